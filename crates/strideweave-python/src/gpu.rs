//! The GPU from Python: `strideweave-wgpu`'s carrier classes `Gpu` and `GpuHost`, and the
//! shipped `Metal` class, whose carriers keep their slots in a Gpu carrier on the Metal
//! adapter (docs/python.md, "Metal and the Gpu carrier").
//!
//! The classes always exist. The device behind them comes with the cargo feature `gpu` (on by
//! default); without it, or without an adapter, constructing one is a `NotImplementedError`
//! naming what is missing, raised after the arguments are checked.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyType;
use pyo3::PyClassInitializer;
use strideweave::{Carrier, CarrierClass, DType};

use crate::carrier::{bool_arg, construct, dtype_arg, registered, values_arg, PyCarrier};
use crate::convert::to_index;
use crate::errors::IntoPyResult;
use crate::tensor::{expect_tensor, PyTensor};

/// The dtypes the three classes store.
const STORED: [DType; 3] = [DType::FLOAT32, DType::INT32, DType::BOOL];

/// The `dtype` argument of `class`'s constructors: `None` is Float32; anything but a `DType`
/// is a TypeError, a dtype the classes do not store a ValueError.
fn stored_dtype(dtype: Option<&Bound<'_, PyAny>>, class: &str) -> PyResult<DType> {
    let dtype = match dtype.filter(|d| !d.is_none()) {
        None => return Ok(DType::FLOAT32),
        Some(dtype) => dtype_arg(dtype, &format!("{class} dtype"))?,
    };
    if !STORED.contains(&dtype) {
        return Err(PyValueError::new_err(format!(
            "{class} dtype must be Float32, Int32 or Bool, got {dtype}"
        )));
    }
    Ok(dtype)
}

/// The device side, with the `gpu` feature: the process's Gpu class on whatever adapter wgpu
/// finds, and the Gpu class on the Metal adapter under Metal carriers.
#[cfg(feature = "gpu")]
mod device {
    use strideweave::carriers::Cpu;
    use strideweave::movement::move_to;
    use strideweave::{Carrier, DType, Result, Shape, Tensor, Value};
    use strideweave_wgpu::{Gpu, GpuSlots};

    /// The Gpu class of this process (NotImplemented without an adapter).
    fn gpu() -> Result<Gpu> {
        Gpu::shared()
    }

    pub fn adapter() -> Result<String> {
        Ok(gpu()?.device().adapter().to_string())
    }

    pub fn metal_adapter() -> Result<String> {
        Ok(strideweave_wgpu::metal::metal_gpu()?
            .device()
            .adapter()
            .to_string())
    }

    pub fn gpu_carrier(slots: usize, dtype: DType, mutable: bool) -> Result<Carrier> {
        Carrier::create(gpu()?.class(), GpuSlots::default(), slots, dtype, mutable)
    }

    pub fn gpu_from_values(values: &[Value], dtype: DType) -> Result<Carrier> {
        let gpu = gpu()?;
        if values.is_empty() {
            return gpu.carrier(0, dtype);
        }
        let cpu = Cpu::from_values(values, dtype, true)?;
        let staged = Tensor::compact(cpu, Shape::new(values.len())?)?;
        Ok(gpu.upload(&staged)?.carrier().clone())
    }

    pub fn upload(tensor: &Tensor) -> Result<Tensor> {
        gpu()?.upload(tensor)
    }

    pub fn host_carrier(slots: usize, dtype: DType) -> Result<Carrier> {
        gpu()?.host().carrier(slots, dtype)
    }

    /// Float32 and Int32 words are staged in one copy; Bool goes up to the device and comes
    /// back along the route Gpu → GpuHost.
    pub fn host_from_values(values: &[Value], dtype: DType) -> Result<Carrier> {
        let gpu = gpu()?;
        let cpu = Cpu::from_values(values, dtype, true)?;
        let n = values.len();
        if dtype == DType::FLOAT32 {
            return gpu.host_from_f32(&strideweave::carriers::extension::read_f32s(&cpu, 0, n)?);
        }
        if dtype == DType::INT32 {
            return gpu.host_from_i32(&strideweave::carriers::extension::read_i32s(&cpu, 0, n)?);
        }
        let host = gpu.host().carrier(n, dtype)?;
        if n > 0 {
            let staged = gpu.upload(&Tensor::compact(cpu, Shape::new(n)?)?)?;
            move_to(&staged, &host)?;
        }
        Ok(host)
    }

    pub fn metal_carrier(slots: usize, dtype: DType, mutable: bool) -> Result<Carrier> {
        strideweave_wgpu::metal::metal_carrier(slots, dtype, mutable)
    }
}

/// The device side without the `gpu` feature: every call is NotImplemented.
#[cfg(not(feature = "gpu"))]
mod device {
    use strideweave::{Carrier, DType, Error, Result, Tensor, Value};

    pub fn missing<T>() -> Result<T> {
        Err(Error::NotImplemented(
            "this build of strideweave has no GPU support: its extension module was built \
             without the cargo feature 'gpu'"
                .into(),
        ))
    }

    pub fn adapter() -> Result<String> {
        missing()
    }

    fn metal_missing<T>() -> Result<T> {
        Err(Error::NotImplemented(
            "Metal needs an Apple GPU with the Metal API, and this build of strideweave has no \
             GPU support (built without the cargo feature 'gpu')"
                .into(),
        ))
    }

    pub fn metal_adapter() -> Result<String> {
        metal_missing()
    }

    pub fn gpu_carrier(_slots: usize, _dtype: DType, _mutable: bool) -> Result<Carrier> {
        missing()
    }

    pub fn gpu_from_values(_values: &[Value], _dtype: DType) -> Result<Carrier> {
        missing()
    }

    pub fn upload(_tensor: &Tensor) -> Result<Tensor> {
        missing()
    }

    pub fn host_carrier(_slots: usize, _dtype: DType) -> Result<Carrier> {
        missing()
    }

    pub fn host_from_values(_values: &[Value], _dtype: DType) -> Result<Carrier> {
        missing()
    }

    pub fn metal_carrier(_slots: usize, _dtype: DType, _mutable: bool) -> Result<Carrier> {
        metal_missing()
    }
}

/// Runs `make` without the GIL (device work may wait on the device).
/// The checked `(size, *, mutable=True, dtype=DType.Float32, empty=False)` arguments of a
/// device class named `class`: the size, the mutability and the dtype. `empty` is checked
/// and needs nothing more: a fresh device buffer is zero-filled either way.
fn device_arguments(
    class: &str,
    size: &Bound<'_, PyAny>,
    mutable: Option<&Bound<'_, PyAny>>,
    dtype: Option<&Bound<'_, PyAny>>,
    empty: Option<&Bound<'_, PyAny>>,
) -> PyResult<(usize, bool, DType)> {
    let size = to_index(size, &format!("{class} size"))?;
    let mutable = bool_arg(mutable, true, &format!("{class} mutable"))?;
    let dtype = stored_dtype(dtype, class)?;
    bool_arg(empty, false, &format!("{class} empty"))?;
    Ok((size, mutable, dtype))
}

fn detached<T: Send>(
    py: Python<'_>,
    make: impl FnOnce() -> strideweave::Result<T> + Send,
) -> PyResult<T> {
    crate::finalization::detach(py, make).py()
}

/// A carrier on an Apple GPU, closed to subclassing, definition-free like the other shipped
/// classes: `Metal(size, *, mutable=True, dtype=DType.Float32, empty=False)`.
///
/// Its slots live in a Gpu carrier on the Metal adapter, and its operations run on that
/// class's kernels. Where wgpu finds no Metal adapter (every machine but an Apple one) the
/// constructor raises `NotImplementedError` after checking its arguments.
#[pyclass(name = "Metal", module = "strideweave", extends = PyCarrier, subclass, frozen)]
#[derive(Default)]
pub struct PyMetal;

#[pymethods]
impl PyMetal {
    /// A shipped carrier class is closed: defining a subclass is a `TypeError` with the one
    /// refusal every closed class states (`CLOSED_CARRIER_MESSAGE`).
    #[classmethod]
    #[pyo3(signature = (**_kwargs))]
    fn __init_subclass__(
        cls: &Bound<'_, pyo3::types::PyType>,
        _kwargs: Option<&Bound<'_, pyo3::types::PyDict>>,
    ) -> PyResult<()> {
        Err(crate::carrier::closed_class(cls))
    }

    #[new]
    #[pyo3(signature = (size, *, mutable=None, dtype=None, empty=None))]
    fn py_new(
        py: Python<'_>,
        size: &Bound<'_, PyAny>,
        mutable: Option<&Bound<'_, PyAny>>,
        dtype: Option<&Bound<'_, PyAny>>,
        empty: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let (size, mutable, dtype) = device_arguments("Metal", size, mutable, dtype, empty)?;
        let carrier = detached(py, || device::metal_carrier(size, dtype, mutable))?;
        Ok(construct::<PyMetal>(carrier))
    }

    /// The Metal adapter wgpu found (name, backend, device type, driver), or
    /// `NotImplementedError` naming what is missing.
    #[staticmethod]
    fn adapter(py: Python<'_>) -> PyResult<String> {
        detached(py, device::metal_adapter)
    }
}

/// `strideweave-wgpu`'s carrier class on the adapter wgpu finds (a GPU through Vulkan, Metal
/// or DX12, or Mesa's software Vulkan driver): `Gpu(size, *, mutable=True,
/// dtype=DType.Float32, empty=False)`, zero-filled device buffers of Float32, Int32 or Bool.
///
/// It is definition-backed (the crate's `CarrierDefinition`): its JIT kernels run the
/// built-ins, and it moves to the CPU and to `GpuHost` along its own routes. The CPU declares
/// no route to it, so values go up with `Gpu.upload(tensor)` or `Gpu.from_values(...)`.
#[pyclass(name = "Gpu", module = "strideweave", extends = PyCarrier, subclass, frozen)]
#[derive(Default)]
pub struct PyGpu;

#[pymethods]
impl PyGpu {
    /// A shipped carrier class is closed: defining a subclass is a `TypeError` with the one
    /// refusal every closed class states (`CLOSED_CARRIER_MESSAGE`).
    #[classmethod]
    #[pyo3(signature = (**_kwargs))]
    fn __init_subclass__(
        cls: &Bound<'_, pyo3::types::PyType>,
        _kwargs: Option<&Bound<'_, pyo3::types::PyDict>>,
    ) -> PyResult<()> {
        Err(crate::carrier::closed_class(cls))
    }

    #[new]
    #[pyo3(signature = (size, *, mutable=None, dtype=None, empty=None))]
    fn py_new(
        py: Python<'_>,
        size: &Bound<'_, PyAny>,
        mutable: Option<&Bound<'_, PyAny>>,
        dtype: Option<&Bound<'_, PyAny>>,
        empty: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let (size, mutable, dtype) = device_arguments("Gpu", size, mutable, dtype, empty)?;
        let carrier = detached(py, || device::gpu_carrier(size, dtype, mutable))?;
        Ok(construct::<PyGpu>(carrier))
    }

    /// A Gpu carrier holding `values` (an iterable of bool, int and float, each normalized to
    /// `dtype`), written to the device in one upload.
    #[staticmethod]
    #[pyo3(signature = (values, *, dtype=None))]
    fn from_values(
        py: Python<'_>,
        values: &Bound<'_, PyAny>,
        dtype: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let dtype = stored_dtype(dtype, "Gpu")?;
        let values = values_arg(values, "Gpu.from_values values")?;
        let carrier = detached(py, || device::gpu_from_values(&values, dtype))?;
        registered::<PyGpu>(py, carrier)
    }

    /// A Gpu tensor with `tensor`'s layout and values (the crate's upload facet): the source's
    /// span is read in bulk and written to a new device buffer; the source stays as it was.
    #[staticmethod]
    fn upload(py: Python<'_>, tensor: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        let tensor = expect_tensor(tensor, "Gpu.upload tensor")?;
        let uploaded = detached(py, || device::upload(&tensor))?;
        Ok(crate::tensor::wrap(uploaded))
    }

    /// The adapter the Gpu class runs on (name, backend, device type, driver), or
    /// `NotImplementedError` when wgpu finds none.
    #[staticmethod]
    fn adapter(py: Python<'_>) -> PyResult<String> {
        detached(py, device::adapter)
    }
}

/// The host-side staging class paired with the Gpu class: 32-bit words in host memory, with
/// the routes GpuHost → Gpu and GpuHost → CPU. It is the secondary tier that lets a
/// `TiledEvictable` or `Evictable` over a Gpu primary stream tiles onto the device:
/// `GpuHost(size, *, dtype=DType.Float32)` (zeroed) or `GpuHost.from_values(values, *,
/// dtype=DType.Float32)`.
#[pyclass(name = "GpuHost", module = "strideweave", extends = PyCarrier, subclass, frozen)]
#[derive(Default)]
pub struct PyGpuHost;

#[pymethods]
impl PyGpuHost {
    /// A shipped carrier class is closed: defining a subclass is a `TypeError` with the one
    /// refusal every closed class states (`CLOSED_CARRIER_MESSAGE`).
    #[classmethod]
    #[pyo3(signature = (**_kwargs))]
    fn __init_subclass__(
        cls: &Bound<'_, pyo3::types::PyType>,
        _kwargs: Option<&Bound<'_, pyo3::types::PyDict>>,
    ) -> PyResult<()> {
        Err(crate::carrier::closed_class(cls))
    }

    #[new]
    #[pyo3(signature = (size, *, dtype=None))]
    fn py_new(
        py: Python<'_>,
        size: &Bound<'_, PyAny>,
        dtype: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let size = to_index(size, "GpuHost size")?;
        let dtype = stored_dtype(dtype, "GpuHost")?;
        let carrier = detached(py, || device::host_carrier(size, dtype))?;
        Ok(construct::<PyGpuHost>(carrier))
    }

    /// A GpuHost carrier holding `values`, each normalized to `dtype`.
    #[staticmethod]
    #[pyo3(signature = (values, *, dtype=None))]
    fn from_values(
        py: Python<'_>,
        values: &Bound<'_, PyAny>,
        dtype: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let dtype = stored_dtype(dtype, "GpuHost")?;
        let values = values_arg(values, "GpuHost.from_values values")?;
        let carrier = detached(py, || device::host_from_values(&values, dtype))?;
        registered::<PyGpuHost>(py, carrier)
    }
}

/// The Python object of a new handle on a Metal, Gpu or GpuHost carrier (by the core class's
/// name, as the other shipped classes are found).
pub(crate) fn wrap_device_carrier(py: Python<'_>, carrier: Carrier) -> PyResult<Py<PyAny>> {
    match carrier.class().name() {
        "Metal" => registered::<PyMetal>(py, carrier),
        "Gpu" => registered::<PyGpu>(py, carrier),
        _ => registered::<PyGpuHost>(py, carrier),
    }
}

/// Whether `class` is `Metal`, the shipped class of this module.
pub(crate) fn is_metal_class(py: Python<'_>, class: &Bound<'_, PyType>) -> bool {
    class.is(py.get_type::<PyMetal>())
}

/// Whether `class` is `Gpu` or `GpuHost`, strideweave-wgpu's definition-backed classes.
pub(crate) fn is_wgpu_class(py: Python<'_>, class: &Bound<'_, PyType>) -> bool {
    class.is(py.get_type::<PyGpu>()) || class.is(py.get_type::<PyGpuHost>())
}

/// The core class a Python class of this module stands for: Metal's own (shipped,
/// definition-free), and for Gpu and GpuHost the process's classes (a NotImplementedError
/// without an adapter); `None` for any other class.
pub(crate) fn device_core_class(
    py: Python<'_>,
    class: &Bound<'_, PyType>,
) -> PyResult<Option<CarrierClass>> {
    if is_metal_class(py, class) {
        return Ok(Some(CarrierClass::of::<strideweave::carriers::Metal>()));
    }
    if is_wgpu_class(py, class) {
        let host = class.is(py.get_type::<PyGpuHost>());
        return detached(py, || gpu_class(host)).map(Some);
    }
    Ok(None)
}

#[cfg(feature = "gpu")]
fn gpu_class(host: bool) -> strideweave::Result<CarrierClass> {
    let gpu = strideweave_wgpu::Gpu::shared()?;
    Ok(if host {
        gpu.host().class()
    } else {
        gpu.class()
    })
}

#[cfg(not(feature = "gpu"))]
fn gpu_class(_host: bool) -> strideweave::Result<CarrierClass> {
    device::missing()
}

/// The TypeError of `register_carrier_definition` for Gpu and GpuHost, which have theirs.
pub(crate) fn refuse_definition(py: Python<'_>, class: &Bound<'_, PyType>) -> Option<PyErr> {
    if is_wgpu_class(py, class) {
        let name = class.name().map(|n| n.to_string()).unwrap_or_default();
        return Some(PyTypeError::new_err(format!(
            "{name} is strideweave-wgpu's carrier class and has its own carrier definition; it \
             cannot take another"
        )));
    }
    None
}
