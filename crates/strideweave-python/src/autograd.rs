//! The recording mode as Python context managers: `with no_grad(): ...`.

use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::PyBool;
use strideweave::autograd::{
    is_grad_enabled as core_is_grad_enabled, set_grad_enabled as core_set, GradModeGuard,
};

use crate::convert::type_name;

/// A context manager that sets this thread's recording mode inside its block and restores
/// the previous mode when the block ends, also by an exception. Blocks nest.
#[pyclass(name = "GradMode", module = "strideweave", unsendable)]
pub struct PyGradMode {
    enabled: bool,
    guards: Vec<GradModeGuard>,
}

#[pymethods]
impl PyGradMode {
    /// The mode this context manager sets.
    #[getter]
    fn enabled(&self) -> bool {
        self.enabled
    }

    fn __enter__(&mut self) {
        self.guards.push(core_set(self.enabled));
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&mut self, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        match self.guards.pop() {
            Some(guard) => {
                drop(guard);
                Ok(false)
            }
            None => Err(PyRuntimeError::new_err(
                "GradMode.__exit__ without a matching __enter__",
            )),
        }
    }
}

/// A context manager that turns gradient recording off on this thread inside its block.
#[pyfunction]
pub fn no_grad() -> PyGradMode {
    PyGradMode {
        enabled: false,
        guards: Vec::new(),
    }
}

/// A context manager that sets gradient recording to `mode` on this thread inside its block.
#[pyfunction]
pub fn set_grad_enabled(mode: &Bound<'_, PyAny>) -> PyResult<PyGradMode> {
    let mode = mode.cast::<PyBool>().map_err(|_| {
        PyTypeError::new_err(format!(
            "set_grad_enabled mode must be a bool, got {}",
            type_name(mode)
        ))
    })?;
    Ok(PyGradMode {
        enabled: mode.is_true(),
        guards: Vec::new(),
    })
}

/// Whether operations on this thread record autograd nodes.
#[pyfunction]
pub fn is_grad_enabled() -> bool {
    core_is_grad_enabled()
}
