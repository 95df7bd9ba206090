//! `Tensor.autograd_ctx`: the recorded operation a tensor came from, as one Python object per
//! graph node (the original's spelling of `grad_fn`). The graph is the framework's: the
//! context is read-only, and nodes are built only by recording calls.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, PoisonError};

use pyo3::prelude::*;
use pyo3::types::{PyTuple, PyWeakrefReference};
use strideweave::autograd::Node;

use crate::tensor::wrap;

/// The live Python object of each node, by the node's identity.
static CONTEXTS: LazyLock<Mutex<HashMap<usize, Py<PyWeakrefReference>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// One recorded operation of the autograd graph: the node a tensor's `autograd_ctx` names.
#[pyclass(
    name = "AutogradContext",
    module = "strideweave.tensor",
    frozen,
    weakref
)]
pub struct PyAutogradContext {
    node: Node,
}

#[pymethods]
impl PyAutogradContext {
    /// The name of the operation that recorded the node.
    #[getter]
    fn name(&self) -> &str {
        self.node.name()
    }

    /// The operands the node saved for its backward rule (empty once released).
    #[getter]
    fn inputs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let inputs = self
            .node
            .inputs()
            .into_iter()
            .map(|tensor| Py::new(py, wrap(tensor)))
            .collect::<PyResult<Vec<_>>>()?;
        PyTuple::new(py, inputs)
    }

    /// Whether a backward pass without `retain_graph` released the node's saved operands.
    #[getter]
    fn is_released(&self) -> bool {
        self.node.is_released()
    }

    fn __repr__(&self) -> String {
        format!("AutogradContext('{}')", self.node.name())
    }
}

/// The one Python object of `node` while it lives.
pub fn context_of(py: Python<'_>, node: Node) -> PyResult<Py<PyAutogradContext>> {
    let key = node.id();
    let mut contexts = CONTEXTS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(weak) = contexts.get(&key) {
        if let Some(live) = weak.bind(py).upgrade() {
            if let Ok(context) = live.cast_into::<PyAutogradContext>() {
                if context.get().node.same_as(&node) {
                    return Ok(context.unbind());
                }
            }
        }
    }
    let context = Py::new(py, PyAutogradContext { node })?;
    contexts.insert(key, PyWeakrefReference::new(context.bind(py))?.unbind());
    if contexts.len() > 256 {
        contexts.retain(|_, weak| weak.bind(py).upgrade().is_some());
    }
    Ok(context)
}
