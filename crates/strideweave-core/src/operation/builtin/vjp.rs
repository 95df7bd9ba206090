//! What a built-in's gradient rule is given ([`BuiltinVjp`]) and the shape helpers the rules
//! share. Each rule lives beside its operation's spec; each computes with `ops` while
//! recording is off (the engine turns it off).

use strideweave_layout::{Layout, Shape};

use crate::dtype::{DType, Value};
use crate::error::{Error, Result};
use crate::operation::{Operand, ResolvedInvocation};
use crate::ops;
use crate::tensor::Tensor;

/// The gradients of a built-in's tensor operands, one entry each in operand order.
pub(crate) type Grads = Result<Vec<Option<Tensor>>>;

/// One backward step of a built-in: the invocation it recorded, its tensor operands (on the
/// cotangent's carrier class where the rule reads their values) and the cotangent `g`.
pub(crate) struct BuiltinVjp<'a> {
    invocation: &'a ResolvedInvocation,
    inputs: &'a [Tensor],
    g: &'a Tensor,
}

impl<'a> BuiltinVjp<'a> {
    /// The step of `invocation` with `inputs` and cotangent `g`.
    pub(crate) fn new(
        invocation: &'a ResolvedInvocation,
        inputs: &'a [Tensor],
        g: &'a Tensor,
    ) -> BuiltinVjp<'a> {
        BuiltinVjp {
            invocation,
            inputs,
            g,
        }
    }

    fn name(&self) -> &str {
        self.invocation.call().definition().name()
    }

    /// The cotangent of the result.
    pub(super) fn g(&self) -> &Tensor {
        self.g
    }

    /// The first tensor operand.
    pub(super) fn x(&self) -> Result<&Tensor> {
        self.inputs
            .first()
            .ok_or_else(|| Error::Value(format!("'{}' saved no input", self.name())))
    }

    /// The second tensor operand, when there is one.
    pub(super) fn y(&self) -> Option<&Tensor> {
        self.inputs.get(1)
    }

    /// Every tensor operand, in operand order.
    pub(super) fn inputs(&self) -> &[Tensor] {
        self.inputs
    }

    /// The operands of the recorded call (tensors and scalars).
    pub(super) fn operands(&self) -> &[Operand] {
        self.invocation.call().operands()
    }

    /// The call's weak scalar operand, or `default` when it has none.
    pub(super) fn scalar_or(&self, default: f64) -> Value {
        self.operands()
            .iter()
            .find_map(Operand::as_scalar)
            .unwrap_or(Value::Float(default))
    }

    /// The accumulator dtype the forward plan used.
    pub(super) fn accumulator(&self) -> Option<DType> {
        self.invocation.plan().accumulator_dtype()
    }

    /// Gradients `a` and `b` of the two tensor operands, summed down to their shapes.
    pub(super) fn pair(&self, a: Tensor, b: Tensor) -> Grads {
        let lhs = self.x()?;
        let rhs = self
            .y()
            .ok_or_else(|| Error::Value(format!("'{}' needs two inputs", self.name())))?;
        Ok(vec![
            Some(sum_to(&a, lhs.shape())?),
            Some(sum_to(&b, rhs.shape())?),
        ])
    }

    /// The gradient `grad` of the one tensor operand, summed down to its shape.
    pub(super) fn one(&self, grad: Tensor) -> Grads {
        Ok(vec![Some(sum_to(&grad, self.x()?.shape())?)])
    }

    /// [`pair`](Self::pair) when the call had two tensor operands, else
    /// [`one`](Self::one) with `a`.
    pub(super) fn pair_or_one(&self, a: Tensor, b: impl FnOnce() -> Result<Tensor>) -> Grads {
        match self.y() {
            Some(_) => self.pair(a, b()?),
            None => self.one(a),
        }
    }
}

/// Sums a broadcast gradient `g` down to `shape` (same tree, extent-1 leaves where `g` is
/// wider): a two-mode view — the target tree, then the summed leaves — reduced over mode 1.
pub(crate) fn sum_to(g: &Tensor, shape: &Shape) -> Result<Tensor> {
    if g.shape() == shape {
        return Ok(g.clone());
    }
    let mut kept = Vec::new();
    let mut summed_extents = Vec::new();
    let mut summed_strides = Vec::new();
    for ((e, s), &target) in g.layout().leaf_pairs().zip(shape.leaves()) {
        if e == target {
            kept.push(s);
        } else {
            kept.push(0);
            summed_extents.push(e);
            summed_strides.push(s);
        }
    }
    let mode0 = Layout::with_leaf_strides(shape.clone(), &kept)?;
    let mode1 = Layout::from_flat(&summed_extents, &summed_strides)?;
    let view = Tensor::new(
        g.carrier().clone(),
        g.offset(),
        Layout::from_modes(&[mode0, mode1])?,
    )?;
    // reduce_sum yields mode 0's shape, which is `shape`.
    ops::reduce_sum(&view)
}

/// `g` copied across mode 1 of `shape` (a stride-0 view over `g`'s slots).
pub(super) fn spread_over_mode1(g: &Tensor, shape: &Shape) -> Result<Tensor> {
    let mode1 = shape.mode(1)?;
    let zeros = vec![0; mode1.leaves().len()];
    let layout = Layout::from_modes(&[
        g.layout().clone(),
        Layout::with_leaf_strides(mode1, &zeros)?,
    ])?;
    Tensor::new(g.carrier().clone(), g.offset(), layout)
}
