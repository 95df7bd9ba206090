//! The autograd surface of [`Tensor`]: requiring gradients, reading them, and running a
//! backward pass (docs/autograd.md).

use strideweave_layout::Layout;

use crate::autograd::engine::{run, Outcome};
use crate::autograd::node::Node;
use crate::dtype::{DType, Value};
use crate::error::{Error, Result};
use crate::tensor::Tensor;

impl Tensor {
    /// Whether gradients can flow through this tensor: only Float32 tensors are
    /// differentiable.
    pub fn is_differentiable(&self) -> bool {
        self.dtype() == DType::FLOAT32
    }

    fn require_differentiable(&self, what: &str) -> Result<()> {
        if !self.is_differentiable() {
            return Err(Error::Runtime(format!(
                "cannot {what}: a {} tensor is not differentiable (only Float32 is)",
                self.dtype()
            )));
        }
        Ok(())
    }

    /// Whether this tensor takes part in differentiation: a leaf that asked for it, or the
    /// result of a recorded operation.
    pub fn requires_grad(&self) -> bool {
        if !self.is_tracked() {
            return false;
        }
        let state = self.autograd().lock();
        state.requires_grad || state.grad_fn.is_some()
    }

    /// Makes this leaf record gradients (or stop). A Runtime error for a tensor whose carrier
    /// is released, for a non-Float32 tensor asked to require them, or for a non-leaf.
    pub fn set_requires_grad(&self, requires: bool) -> Result<()> {
        self.carrier().check_live("change requires_grad")?;
        if requires {
            self.require_differentiable("require gradients")?;
            self.mark_tracked();
        }
        let mut state = self.autograd().lock();
        if state.grad_fn.is_some() {
            return Err(Error::Runtime(
                "requires_grad can only be changed on a leaf; this tensor was produced by a recorded operation".into(),
            ));
        }
        state.requires_grad = requires;
        Ok(())
    }

    /// Whether no recorded operation produced this tensor.
    pub fn is_leaf(&self) -> bool {
        self.autograd().lock().grad_fn.is_none()
    }

    /// The node that produced this tensor, if a recorded operation did.
    pub fn grad_fn(&self) -> Option<Node> {
        self.grad_fn_output().map(|(node, _)| node)
    }

    pub(crate) fn grad_fn_output(&self) -> Option<(Node, usize)> {
        self.autograd().lock().grad_fn.clone()
    }

    /// The accumulated gradient, if any.
    pub fn grad(&self) -> Option<Tensor> {
        self.autograd().lock().grad.clone()
    }

    /// Replaces the accumulated gradient. A Runtime error for a non-differentiable tensor
    /// given one; a Type error for a gradient of another dtype; a Value error for a gradient
    /// of another shape.
    pub fn set_grad(&self, grad: Option<Tensor>) -> Result<()> {
        if let Some(g) = &grad {
            self.require_differentiable("assign a gradient")?;
            if g.dtype() != self.dtype() {
                return Err(Error::Type(format!(
                    "a gradient of dtype {} cannot belong to a {} tensor",
                    g.dtype(),
                    self.dtype()
                )));
            }
            if g.shape() != self.shape() {
                return Err(Error::Value(format!(
                    "a gradient of Shape {} cannot belong to a tensor of Shape {}",
                    g.shape(),
                    self.shape()
                )));
            }
        }
        self.autograd().lock().grad = grad;
        Ok(())
    }

    /// Makes a non-leaf keep its gradient in `.grad` after backward passes.
    pub fn retain_grad(&self) -> Result<()> {
        self.require_differentiable("retain gradients")?;
        self.autograd().lock().retain_grad = true;
        Ok(())
    }

    /// The same slots as a new tensor outside the graph.
    pub fn detach(&self) -> Tensor {
        self.clone_without_autograd()
    }

    /// Back-propagates from this tensor: adds to `.grad` of every leaf that requires
    /// gradients the derivative of this tensor weighted by `gradient`.
    ///
    /// `gradient` may be omitted only for a single-element tensor of shape `(1)`. A
    /// cotangent must have this tensor's exact layout when its layout is injective; for a
    /// broadcast (stride-0) tensor it must have the same shape and an injective layout.
    /// Without `retain_graph` the graph is freed afterwards, and a second pass through it
    /// is a Runtime error. A failed pass changes no `.grad`.
    pub fn backward(&self, gradient: Option<&Tensor>, retain_graph: bool) -> Result<()> {
        self.require_differentiable("backward")?;
        if !self.requires_grad() {
            return Err(Error::Runtime(
                "backward needs a tensor that requires gradients or was produced by a recorded operation".into(),
            ));
        }
        let cotangent = cotangent_for(self, gradient)?;
        match run(&[(self.clone(), cotangent)], retain_graph, None)? {
            Outcome::Accumulated | Outcome::Captured(_) => Ok(()),
        }
    }
}

/// The validated cotangent of `output`: the given one, or ones for a shape-`(1)` output.
pub(crate) fn cotangent_for(output: &Tensor, gradient: Option<&Tensor>) -> Result<Tensor> {
    let Some(gradient) = gradient else {
        let shape = output.shape();
        if shape.rank() != 1 || shape.leaves() != [1] {
            return Err(Error::Value(format!(
                "backward without a gradient needs a single-element tensor of Shape (1), got Shape {shape}"
            )));
        }
        let carrier =
            output
                .carrier()
                .new_like(&[Value::Float(1.0)], true, Some(DType::FLOAT32))?;
        return Tensor::new(carrier, 0, Layout::column_major(shape.clone()));
    };
    if gradient.dtype() != DType::FLOAT32 {
        return Err(Error::Type(format!(
            "a cotangent must be Float32, got {}",
            gradient.dtype()
        )));
    }
    if output.layout().is_injective() {
        if gradient.layout() != output.layout() {
            return Err(Error::Value(format!(
                "the cotangent's layout {} must equal the output's layout {}",
                gradient.layout(),
                output.layout()
            )));
        }
    } else {
        let only_broadcast = output.layout().filter().is_injective();
        if !only_broadcast
            || gradient.shape() != output.shape()
            || !gradient.layout().is_injective()
        {
            return Err(Error::Value(format!(
                "a cotangent for the non-injective layout {} needs the same shape and an injective layout, got {}",
                output.layout(),
                gradient.layout()
            )));
        }
    }
    Ok(gradient.clone())
}

/// The gradients of `outputs` weighted by `cotangents` with respect to `inputs`, without
/// touching any `.grad`: one entry per input, `None` where an input is unreachable.
///
/// A Value error for a non-differentiable input or a cotangent count that differs from the
/// outputs; a Runtime error for a non-differentiable output.
pub fn grad(
    outputs: &[Tensor],
    inputs: &[Tensor],
    cotangents: &[Option<Tensor>],
    retain_graph: bool,
) -> Result<Vec<Option<Tensor>>> {
    if cotangents.len() != outputs.len() {
        return Err(Error::Value(format!(
            "grad needs one cotangent (or None) per output: {} outputs, {} cotangents",
            outputs.len(),
            cotangents.len()
        )));
    }
    if let Some(bad) = inputs.iter().find(|t| !t.is_differentiable()) {
        return Err(Error::Value(format!(
            "grad inputs must be differentiable; got a {} tensor",
            bad.dtype()
        )));
    }
    let mut roots = Vec::with_capacity(outputs.len());
    for (output, cotangent) in outputs.iter().zip(cotangents) {
        output.require_differentiable("differentiate an output")?;
        roots.push((output.clone(), cotangent_for(output, cotangent.as_ref())?));
    }
    match run(&roots, retain_graph, Some(inputs))? {
        Outcome::Captured(grads) => Ok(grads),
        Outcome::Accumulated => Ok(vec![None; inputs.len()]),
    }
}
