//! `Node`: one recorded computation of the autograd graph.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// Computes the gradients of a node's inputs from the cotangents of its outputs.
pub(crate) trait BackwardRule: Send + Sync {
    /// One gradient (or `None`) per input, given one cotangent (or `None`) per output.
    fn backward(
        &self,
        inputs: &[Tensor],
        grad_outputs: &[Option<Tensor>],
    ) -> Result<Vec<Option<Tensor>>>;
}

struct Inner {
    name: Arc<str>,
    inputs: Vec<Tensor>,
    versions: Vec<(usize, u64)>,
    outputs: usize,
    /// `None` only while the node is being dropped.
    rule: Option<Box<dyn BackwardRule>>,
    released: AtomicBool,
}

/// One recorded computation: its saved inputs (every tensor operand, per occurrence) with the
/// carrier versions they had, and the rule that maps output cotangents to input gradients.
///
/// Nodes are built by the framework only. Cloning shares the node.
#[derive(Clone)]
pub struct Node {
    inner: Arc<Inner>,
}

impl Node {
    pub(crate) fn new(
        name: Arc<str>,
        inputs: Vec<Tensor>,
        outputs: usize,
        rule: Box<dyn BackwardRule>,
    ) -> Node {
        let versions = inputs
            .iter()
            .map(|t| (t.carrier().id(), t.version()))
            .collect();
        Node {
            inner: Arc::new(Inner {
                name,
                inputs,
                versions,
                outputs,
                rule: Some(rule),
                released: AtomicBool::new(false),
            }),
        }
    }

    /// The operation that recorded the node.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The saved inputs, positional.
    pub fn inputs(&self) -> &[Tensor] {
        &self.inner.inputs
    }

    /// `(carrier id, version)` of each input when the node was recorded.
    pub fn input_versions(&self) -> &[(usize, u64)] {
        &self.inner.versions
    }

    /// How many outputs the node produced.
    pub fn outputs(&self) -> usize {
        self.inner.outputs
    }

    /// Whether a backward pass without `retain_graph` has freed the node.
    pub fn is_released(&self) -> bool {
        self.inner.released.load(Ordering::Acquire)
    }

    pub(crate) fn release(&self) {
        self.inner.released.store(true, Ordering::Release);
    }

    pub(crate) fn id(&self) -> usize {
        Arc::as_ptr(&self.inner) as *const () as usize
    }

    /// Applies the rule: one cotangent (or `None`) per output in, one gradient (or `None`)
    /// per input out. A Value error for a wrong cotangent count, a Runtime error when an
    /// input was modified in place since recording or the node was released.
    pub fn backward(&self, grad_outputs: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        if self.is_released() {
            return Err(Error::Runtime(format!(
                "the '{}' node was freed by an earlier backward pass; pass retain_graph=true to backward through the graph again",
                self.name()
            )));
        }
        if grad_outputs.len() != self.inner.outputs {
            return Err(Error::Value(format!(
                "the '{}' node has {} outputs, got {} cotangents",
                self.name(),
                self.inner.outputs,
                grad_outputs.len()
            )));
        }
        for (input, &(_, version)) in self.inner.inputs.iter().zip(&self.inner.versions) {
            if input.version() != version {
                return Err(Error::Runtime(format!(
                    "an input of '{}' was modified by an in-place modification after it was recorded (version {version} then, {} now)",
                    self.name(),
                    input.version()
                )));
            }
        }
        let Some(rule) = &self.inner.rule else {
            return Ok(vec![None; self.inner.inputs.len()]);
        };
        let grads = rule.backward(&self.inner.inputs, grad_outputs)?;
        if grads.len() != self.inner.inputs.len() {
            return Err(Error::Value(format!(
                "the backward rule of '{}' returned {} gradients for {} inputs",
                self.name(),
                grads.len(),
                self.inner.inputs.len()
            )));
        }
        for (i, (grad, input)) in grads.iter().zip(&self.inner.inputs).enumerate() {
            if let Some(grad) = grad {
                if grad.shape() != input.shape() {
                    return Err(Error::Value(format!(
                        "the backward rule of '{}' returned a gradient of Shape {} for input {i} of Shape {}",
                        self.name(),
                        grad.shape(),
                        input.shape()
                    )));
                }
                if grad.dtype() != input.dtype() {
                    return Err(Error::Type(format!(
                        "the backward rule of '{}' returned a {} gradient for the {} input {i}",
                        self.name(),
                        grad.dtype(),
                        input.dtype()
                    )));
                }
            }
        }
        Ok(grads)
    }
}

impl Drop for Inner {
    /// Dismantles a chain of nodes iteratively: a long graph dropped recursively would
    /// overflow the stack.
    fn drop(&mut self) {
        // The rule may hold further handles to the inputs; drop them first so the inputs'
        // own handles below are the last ones.
        drop(self.rule.take());
        let mut pending: Vec<Tensor> = std::mem::take(&mut self.inputs);
        while let Some(tensor) = pending.pop() {
            let Some((node, _)) = tensor.take_grad_fn_if_last() else {
                continue;
            };
            if let Ok(mut inner) = Arc::try_unwrap(node.inner) {
                drop(inner.rule.take());
                pending.append(&mut inner.inputs);
            }
        }
    }
}

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Node({}, {} inputs)",
            self.name(),
            self.inner.inputs.len()
        )
    }
}
