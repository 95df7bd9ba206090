//! `move`, `move_async` and `copy`: a tensor onto another carrier, the GIL released while the
//! core transfers.

use pyo3::prelude::*;
use pyo3::{PyTraverseError, PyVisit};
use strideweave::movement::{copy_to, move_async as core_move_async, move_to, MoveHandle};

use crate::callback_error::Delivered;
use crate::carrier::expect_carrier;
use crate::errors::IntoPyResult;
use crate::tensor::{expect_tensor, wrap, PyTensor};

/// Moves `tensor` to `destination` and releases the source carrier; returns the tensor on
/// `destination` (offset 0, same layout).
#[pyfunction(name = "move")]
pub fn move_tensor(
    py: Python<'_>,
    tensor: &Bound<'_, PyAny>,
    destination: &Bound<'_, PyAny>,
) -> PyResult<PyTensor> {
    let tensor = expect_tensor(tensor, "move tensor")?;
    let destination = expect_carrier(destination, "move destination")?;
    crate::finalization::detach(py, || move_to(&tensor, &destination))
        .py()
        .map(wrap)
}

/// Starts moving `tensor` to `destination`; returns the completion handle.
#[pyfunction]
pub fn move_async(
    py: Python<'_>,
    tensor: &Bound<'_, PyAny>,
    destination: &Bound<'_, PyAny>,
) -> PyResult<PyMoveHandle> {
    let tensor = expect_tensor(tensor, "move_async tensor")?;
    let destination = expect_carrier(destination, "move_async destination")?;
    let handle = crate::finalization::detach(py, || core_move_async(&tensor, &destination)).py()?;
    Ok(PyMoveHandle {
        inner: handle,
        result: std::sync::OnceLock::new(),
        error: Delivered::default(),
    })
}

/// Copies `tensor` to `destination`, leaving the source as it was.
#[pyfunction]
pub fn copy(
    py: Python<'_>,
    tensor: &Bound<'_, PyAny>,
    destination: &Bound<'_, PyAny>,
) -> PyResult<PyTensor> {
    let tensor = expect_tensor(tensor, "copy tensor")?;
    let destination = expect_carrier(destination, "copy destination")?;
    crate::finalization::detach(py, || copy_to(&tensor, &destination))
        .py()
        .map(wrap)
}

/// The completion of a move: `done`, and a blocking `wait()` that returns the same Tensor
/// object (or raises the same exception object) every time. No coroutine protocol.
#[pyclass(name = "AwaitMove", module = "strideweave", frozen, weakref)]
pub struct PyMoveHandle {
    inner: MoveHandle,
    result: std::sync::OnceLock<Py<PyTensor>>,
    error: Delivered,
}

#[pymethods]
impl PyMoveHandle {
    /// The exception this handle keeps, for Python's garbage collector.
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        self.error.visit(&visit)
    }

    fn __clear__(&self) {
        self.error.clear();
    }

    /// Whether the move reached its terminal outcome.
    #[getter]
    fn done(&self) -> bool {
        self.inner.done()
    }

    /// Blocks (without the GIL) until the move ends; the moved Tensor or the move's error.
    fn wait(&self, py: Python<'_>) -> PyResult<Py<PyTensor>> {
        if let Some(result) = self.result.get() {
            return Ok(result.clone_ref(py));
        }
        let tensor = crate::finalization::detach(py, || self.inner.wait())
            .map_err(|error| self.error.raise(py, error))?;
        let made = Py::new(py, wrap(tensor))?;
        Ok(self.result.get_or_init(|| made).clone_ref(py))
    }
}
