//! `Node`: one recorded computation of the autograd graph.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// Computes the gradients of a node's inputs from the cotangents of its outputs.
pub trait BackwardRule: Send + Sync {
    /// One gradient (or `None`) per input, given one cotangent (or `None`) per output.
    fn backward(
        &self,
        inputs: &[Tensor],
        grad_outputs: &[Option<Tensor>],
    ) -> Result<Vec<Option<Tensor>>>;
}

/// What a node keeps until a backward pass without `retain_graph` frees it.
struct Saved {
    inputs: Vec<Tensor>,
    versions: Vec<(usize, u64)>,
    rule: Arc<dyn BackwardRule>,
}

struct Inner {
    name: Arc<str>,
    outputs: usize,
    /// `None` once released (or while the node is being dropped).
    saved: Mutex<Option<Saved>>,
    released: AtomicBool,
}

/// One recorded computation: its saved inputs with the carrier versions they had, and the
/// rule that maps output cotangents to input gradients.
///
/// A backward pass without `retain_graph` releases the node: its saved inputs, versions and
/// rule (with whatever the rule captured) are dropped then, so the storage they held is freed
/// while the node itself stays attached to its outputs. Nodes are built by the framework
/// only. Cloning shares the node.
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
                outputs,
                saved: Mutex::new(Some(Saved {
                    inputs,
                    versions,
                    rule: Arc::from(rule),
                })),
                released: AtomicBool::new(false),
            }),
        }
    }

    /// An identity of this node while it lives (its record's address): equal for handles to
    /// the same node, possibly reused once the node is gone.
    pub fn id(&self) -> usize {
        Arc::as_ptr(&self.inner) as *const () as usize
    }

    /// Whether `other` is this very node (a handle to the same record).
    pub fn same_as(&self, other: &Node) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The operation that recorded the node.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The saved inputs, positional; empty once the node is released.
    pub fn inputs(&self) -> Vec<Tensor> {
        self.inner
            .saved
            .lock()
            .as_ref()
            .map(|saved| saved.inputs.clone())
            .unwrap_or_default()
    }

    /// `(carrier id, version)` of each input when the node was recorded; empty once the node
    /// is released.
    pub fn input_versions(&self) -> Vec<(usize, u64)> {
        self.inner
            .saved
            .lock()
            .as_ref()
            .map(|saved| saved.versions.clone())
            .unwrap_or_default()
    }

    /// How many outputs the node produced.
    pub fn outputs(&self) -> usize {
        self.inner.outputs
    }

    /// Whether a backward pass without `retain_graph` has freed the node.
    pub fn is_released(&self) -> bool {
        self.inner.released.load(Ordering::Acquire)
    }

    /// Frees what the node saved; it can no longer run backward.
    pub(crate) fn release(&self) {
        self.inner.released.store(true, Ordering::Release);
        let saved = self.inner.saved.lock().take();
        if let Some(saved) = saved {
            dismantle(saved);
        }
    }

    /// Applies the rule: one cotangent (or `None`) per output in, one gradient (or `None`)
    /// per input out. A Value error for a wrong cotangent count, a Runtime error when an
    /// input was modified in place since recording or the node was released.
    pub fn backward(&self, grad_outputs: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let released = || {
            Error::Runtime(format!(
                "the '{}' node was freed by an earlier backward pass; pass retain_graph=true to backward through the graph again",
                self.name()
            ))
        };
        if self.is_released() {
            return Err(released());
        }
        if grad_outputs.len() != self.inner.outputs {
            return Err(Error::Value(format!(
                "the '{}' node has {} outputs, got {} cotangents",
                self.name(),
                self.inner.outputs,
                grad_outputs.len()
            )));
        }
        let guard = self.inner.saved.lock();
        let Some(saved) = guard.as_ref() else {
            return Err(released());
        };
        for (input, &(_, version)) in saved.inputs.iter().zip(&saved.versions) {
            if input.version() != version {
                return Err(Error::Runtime(format!(
                    "an input of '{}' was modified by an in-place modification after it was recorded (version {version} then, {} now)",
                    self.name(),
                    input.version()
                )));
            }
        }
        let inputs = saved.inputs.clone();
        let rule = saved.rule.clone();
        // Not under the lock: a rule may itself differentiate through this node.
        drop(guard);
        let grads = rule.backward(&inputs, grad_outputs)?;
        if grads.len() != inputs.len() {
            return Err(Error::Value(format!(
                "the backward rule of '{}' returned {} gradients for {} inputs",
                self.name(),
                grads.len(),
                inputs.len()
            )));
        }
        for (i, (grad, input)) in grads.iter().zip(&inputs).enumerate() {
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

/// Drops what a node saved, dismantling the chain of nodes behind its inputs iteratively: a
/// long graph dropped recursively would overflow the stack.
fn dismantle(saved: Saved) {
    // The rule may hold further handles to the inputs; drop it first so the inputs' own
    // handles below are the last ones.
    drop(saved.rule);
    let mut pending: Vec<Tensor> = saved.inputs;
    while let Some(tensor) = pending.pop() {
        let Some((node, _)) = tensor.take_grad_fn_if_last() else {
            continue;
        };
        if let Ok(inner) = Arc::try_unwrap(node.inner) {
            if let Some(saved) = inner.saved.lock().take() {
                drop(saved.rule);
                pending.extend(saved.inputs);
            }
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(saved) = self.saved.get_mut().take() {
            dismantle(saved);
        }
    }
}

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Node({}, {} inputs)", self.name(), self.inputs().len())
    }
}
