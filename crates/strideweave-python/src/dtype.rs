//! `DType`: the core's element types, one Python object per dtype so that identity compares.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use pyo3::prelude::*;
use strideweave::DType;

use crate::errors::IntoPyResult;

/// The one Python object of each dtype, keyed by the dtype's identity.
static INTERNED: LazyLock<Mutex<HashMap<DType, Py<PyDType>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// An element type. Dtypes are recognised by identity: `t.dtype is DType.Float32`.
#[pyclass(name = "DType", module = "strideweave", frozen)]
pub struct PyDType {
    pub(crate) inner: DType,
}

/// The Python object of `dtype`, the same object on every call.
pub fn wrap(py: Python<'_>, dtype: DType) -> PyResult<Py<PyDType>> {
    let lock = || {
        INTERNED
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    };
    if let Some(existing) = lock().get(&dtype) {
        return Ok(existing.clone_ref(py));
    }
    // Created without the lock held: the first object initializes the type, whose class
    // attributes come back here.
    let object = Py::new(py, PyDType { inner: dtype })?;
    Ok(lock().entry(dtype).or_insert(object).clone_ref(py))
}

#[allow(non_snake_case)]
#[pymethods]
impl PyDType {
    /// The dtype itself: dtypes are interned and immutable, so a copy is the same object.
    fn __copy__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The dtype itself, as for `copy.copy` (what `dataclasses.asdict` reaches).
    fn __deepcopy__<'py>(slf: PyRef<'py, Self>, _memo: &Bound<'py, PyAny>) -> PyRef<'py, Self> {
        slf
    }

    #[classattr]
    fn Any(py: Python<'_>) -> PyResult<Py<PyDType>> {
        wrap(py, DType::ANY)
    }
    #[classattr]
    fn Floating(py: Python<'_>) -> PyResult<Py<PyDType>> {
        wrap(py, DType::FLOATING)
    }
    #[classattr]
    fn Integer(py: Python<'_>) -> PyResult<Py<PyDType>> {
        wrap(py, DType::INTEGER)
    }
    #[classattr]
    fn Bool(py: Python<'_>) -> PyResult<Py<PyDType>> {
        wrap(py, DType::BOOL)
    }
    #[classattr]
    fn Int8(py: Python<'_>) -> PyResult<Py<PyDType>> {
        wrap(py, DType::INT8)
    }
    #[classattr]
    fn Int32(py: Python<'_>) -> PyResult<Py<PyDType>> {
        wrap(py, DType::INT32)
    }
    #[classattr]
    fn Float32(py: Python<'_>) -> PyResult<Py<PyDType>> {
        wrap(py, DType::FLOAT32)
    }
    #[classattr]
    fn Float64(py: Python<'_>) -> PyResult<Py<PyDType>> {
        wrap(py, DType::FLOAT64)
    }
    #[classattr]
    fn E8M0(py: Python<'_>) -> PyResult<Py<PyDType>> {
        wrap(py, DType::E8M0)
    }
    #[classattr]
    fn E5M2(py: Python<'_>) -> PyResult<Py<PyDType>> {
        wrap(py, DType::E5M2)
    }
    #[classattr]
    fn E4M3(py: Python<'_>) -> PyResult<Py<PyDType>> {
        wrap(py, DType::E4M3)
    }
    #[classattr]
    fn E3M2(py: Python<'_>) -> PyResult<Py<PyDType>> {
        wrap(py, DType::E3M2)
    }
    #[classattr]
    fn E2M3(py: Python<'_>) -> PyResult<Py<PyDType>> {
        wrap(py, DType::E2M3)
    }
    #[classattr]
    fn E2M1(py: Python<'_>) -> PyResult<Py<PyDType>> {
        wrap(py, DType::E2M1)
    }

    /// The registered dtype called `name` (a Lookup error names an unknown one).
    #[staticmethod]
    fn from_name(py: Python<'_>, name: &str) -> PyResult<Py<PyDType>> {
        wrap(py, DType::from_name(name).py()?)
    }

    /// Every registered dtype, in registration order.
    #[staticmethod]
    fn registered(py: Python<'_>) -> PyResult<Vec<Py<PyDType>>> {
        DType::registered()
            .into_iter()
            .map(|dtype| wrap(py, dtype))
            .collect()
    }

    /// The dtype's registered name.
    #[getter]
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    /// The name again, as the original's enum-like `DType.value` (`DType.Float32.value ==
    /// "Float32"`).
    #[getter]
    fn value(&self) -> &'static str {
        self.inner.name()
    }

    /// The width in bits of a simple dtype; `None` for a category.
    #[getter]
    fn bits(&self) -> Option<u32> {
        self.inner.bits()
    }

    /// Whether this dtype is a category (`Any`, `Floating`, `Integer`).
    #[getter]
    fn is_category(&self) -> bool {
        self.inner.is_category()
    }

    /// Whether this dtype is a simple storage dtype.
    #[getter]
    fn is_simple(&self) -> bool {
        self.inner.is_simple()
    }

    /// Whether gradients flow through tensors of this dtype.
    #[getter]
    fn is_differentiable(&self) -> bool {
        self.inner.is_differentiable()
    }

    /// The direct supertype, `None` for `Any`.
    #[getter]
    fn supertype(&self, py: Python<'_>) -> PyResult<Option<Py<PyDType>>> {
        self.inner.supertype().map(|d| wrap(py, d)).transpose()
    }

    /// Whether this dtype is `other` or lies below it.
    fn is_subtype_of(&self, other: PyRef<'_, PyDType>) -> bool {
        self.inner.is_subtype_of(other.inner)
    }

    fn __repr__(&self) -> String {
        format!("DType.{}", self.inner.name())
    }

    fn __str__(&self) -> &'static str {
        self.inner.name()
    }
}
