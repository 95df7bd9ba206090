//! `BlockDevice` and `BlockDeviceCarrier`: Float32 slots on a Linux block device, from
//! Python. `BlockDevice.open(path)` opens the device; `device.allocate(size)` makes a carrier
//! on an aligned extent of it. Device I/O runs without the GIL.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use strideweave::carriers::{BlockDevice, BlockDeviceCarrier};
use strideweave::DType;

use crate::carrier::{registered, PyCarrier};
use crate::convert::{to_index, type_name};
use crate::dtype::PyDType;
use crate::errors::IntoPyResult;

/// An opened Linux block device whose space BlockDevice carriers are allocated from.
#[pyclass(name = "BlockDevice", module = "strideweave", frozen)]
pub struct PyBlockDevice {
    inner: BlockDevice,
}

#[pymethods]
impl PyBlockDevice {
    /// Opens the block device node at `path` (for example a loop device, `/dev/loop0`).
    #[staticmethod]
    fn open(py: Python<'_>, path: &Bound<'_, PyAny>) -> PyResult<Self> {
        let path: String = path.extract().map_err(|_| {
            PyTypeError::new_err(format!(
                "BlockDevice path must be a str, got {}",
                type_name(path)
            ))
        })?;
        let device = crate::finalization::detach(py, || BlockDevice::open(&path)).py()?;
        Ok(PyBlockDevice { inner: device })
    }

    /// The path the device was opened at.
    #[getter]
    fn path(&self) -> String {
        self.inner.path().to_string_lossy().into_owned()
    }

    /// The device's size in bytes.
    #[getter]
    fn capacity_bytes(&self) -> u64 {
        self.inner.capacity_bytes()
    }

    /// The logical block size in bytes.
    #[getter]
    fn logical_block_size(&self) -> u64 {
        self.inner.logical_block_size()
    }

    /// The physical block size in bytes.
    #[getter]
    fn physical_block_size(&self) -> u64 {
        self.inner.physical_block_size()
    }

    /// The alignment of every allocated extent, in bytes.
    #[getter]
    fn allocation_alignment(&self) -> u64 {
        self.inner.allocation_alignment()
    }

    /// Whether the device was closed.
    #[getter]
    fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// Whether a failed transfer faulted the device.
    #[getter]
    fn is_faulted(&self) -> bool {
        self.inner.is_faulted()
    }

    /// The number of live carriers on the device.
    #[getter]
    fn live_carriers(&self) -> usize {
        self.inner.live_carriers()
    }

    /// The bytes not held by any carrier.
    #[getter]
    fn free_bytes(&self) -> u64 {
        self.inner.free_bytes()
    }

    /// A carrier of `size` Float32 slots on an aligned extent of the device.
    #[pyo3(signature = (size, *, mutable=true, dtype=None, empty=false))]
    fn allocate(
        &self,
        py: Python<'_>,
        size: &Bound<'_, PyAny>,
        mutable: bool,
        dtype: Option<&Bound<'_, PyAny>>,
        empty: bool,
    ) -> PyResult<Py<PyAny>> {
        let size = to_index(size, "BlockDevice allocate size")?;
        let dtype = match dtype {
            None => DType::FLOAT32,
            Some(dtype) => dtype
                .cast::<PyDType>()
                .map(|d| d.get().inner)
                .map_err(|_| {
                    PyTypeError::new_err(format!(
                        "BlockDevice allocate dtype must be a DType, got {}",
                        type_name(dtype)
                    ))
                })?,
        };
        let device = &self.inner;
        let carrier =
            crate::finalization::detach(py, || device.allocate(size, mutable, dtype, empty))
                .py()?;
        registered::<PyBlockDeviceCarrier>(py, carrier)
    }

    /// Closes the device; a RuntimeError while carriers on it are live.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let device = &self.inner;
        crate::finalization::detach(py, || device.close()).py()
    }

    /// Whether `other` is the same opened device (not merely the same path).
    fn same_as(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<PyBlockDevice>()
            .is_ok_and(|other| other.get().inner.same_as(&self.inner))
    }

    fn __repr__(&self) -> String {
        format!(
            "BlockDevice('{}', capacity_bytes={})",
            self.path(),
            self.inner.capacity_bytes()
        )
    }
}

/// Float32 slots in an extent of a block device, made by `BlockDevice.allocate`.
#[pyclass(name = "BlockDeviceCarrier", module = "strideweave", extends = PyCarrier, subclass, frozen)]
#[derive(Default)]
pub struct PyBlockDeviceCarrier;

fn block(slf: &PyRef<'_, PyBlockDeviceCarrier>) -> PyResult<BlockDeviceCarrierInfo> {
    let carrier = slf.as_super().carrier()?;
    let body = carrier
        .downcast_ref::<BlockDeviceCarrier>()
        .ok_or_else(|| PyTypeError::new_err("this carrier is not a BlockDeviceCarrier"))?;
    Ok(BlockDeviceCarrierInfo {
        device: body.device().clone(),
        offset: body.device_offset_bytes(),
        extent: body.extent_bytes(),
    })
}

struct BlockDeviceCarrierInfo {
    device: BlockDevice,
    offset: u64,
    extent: u64,
}

#[pymethods]
impl PyBlockDeviceCarrier {
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
    fn py_new() -> PyResult<pyo3::PyClassInitializer<Self>> {
        Err(PyTypeError::new_err(
            "BlockDeviceCarrier cannot be constructed directly: use BlockDevice.allocate",
        ))
    }

    /// The device holding the slots.
    #[getter]
    fn device(slf: PyRef<'_, Self>) -> PyResult<PyBlockDevice> {
        Ok(PyBlockDevice {
            inner: block(&slf)?.device,
        })
    }

    /// The device byte at which slot 0 lives.
    #[getter]
    fn device_offset_bytes(slf: PyRef<'_, Self>) -> PyResult<u64> {
        Ok(block(&slf)?.offset)
    }

    /// The bytes of the device this carrier holds (rounded up to the alignment).
    #[getter]
    fn extent_bytes(slf: PyRef<'_, Self>) -> PyResult<u64> {
        Ok(block(&slf)?.extent)
    }
}
