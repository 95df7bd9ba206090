//! DLPack: `Tensor.__dlpack__` / `Tensor.__dlpack_device__` export a CPU tensor's slots
//! without a copy, and `from_dlpack(x)` makes a tensor over another library's CPU memory.
//!
//! The export follows the `__array_interface__` view (crate::numpy_interop): a CPU Float32 or
//! Int32 tensor whose layout flattens to one stride per top-level mode, frozen by a
//! [`strideweave::carriers::CpuExport`] for as long as the consumer holds the memory, and
//! marked read-only. Only the versioned capsule (DLPack 1.0) carries a read-only flag, so the
//! export needs a consumer that asks for it (`max_version >= (1, 0)`, as numpy 2.1 and newer
//! do). The structs below are DLPack's C ABI (dlpack.h, version 1.0), written out here: they
//! are a handful of `repr(C)` records, and no maintained crate targets this PyO3 version.

use std::ffi::{c_void, CStr};
use std::ptr::NonNull;

use pyo3::exceptions::{PyBufferError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use strideweave::carriers::{Cpu, CpuExport};
use strideweave::{DType, Tensor};

use crate::convert::type_name;
use crate::errors::IntoPyResult;
use crate::numpy_interop::{layout_of, row_major, view, NoView};
use crate::tensor::{wrap, PyTensor};

/// `kDLCPU`.
const DEVICE_CPU: i32 = 1;
/// `kDLInt` and `kDLFloat` type codes.
const CODE_INT: u8 = 0;
const CODE_FLOAT: u8 = 2;
/// `DLPACK_FLAG_BITMASK_READ_ONLY`.
const FLAG_READ_ONLY: u64 = 1;

const VERSIONED: &CStr = c"dltensor_versioned";
const USED_VERSIONED: &CStr = c"used_dltensor_versioned";
const LEGACY: &CStr = c"dltensor";
const USED_LEGACY: &CStr = c"used_dltensor";

#[repr(C)]
#[derive(Clone, Copy)]
struct DlDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct DlDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
struct DlTensor {
    data: *mut c_void,
    device: DlDevice,
    ndim: i32,
    dtype: DlDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

#[repr(C)]
struct DlPackVersion {
    major: u32,
    minor: u32,
}

#[repr(C)]
struct DlManagedTensorVersioned {
    version: DlPackVersion,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DlManagedTensorVersioned)>,
    flags: u64,
    dl_tensor: DlTensor,
}

#[repr(C)]
struct DlManagedTensor {
    dl_tensor: DlTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DlManagedTensor)>,
}

/// What one export owns: the record handed to the consumer, the shape and strides it points
/// into, and the export that freezes the slots until the consumer calls the deleter.
struct Exported {
    managed: DlManagedTensorVersioned,
    _shape: Box<[i64]>,
    _strides: Box<[i64]>,
    _export: CpuExport,
}

/// The deleter of an exported record: frees what the export owns (and so ends the export).
unsafe extern "C" fn delete_exported(managed: *mut DlManagedTensorVersioned) {
    if managed.is_null() {
        return;
    }
    // SAFETY: `managed` is the record of an `Exported` made by `export` (its only caller
    // passes that record), whose `manager_ctx` is the `Box::into_raw` pointer of that
    // `Exported`; DLPack calls the deleter exactly once, so the box is reclaimed once.
    unsafe { drop(Box::from_raw((*managed).manager_ctx.cast::<Exported>())) }
}

/// The destructor of an exported capsule: a capsule nobody consumed (still named
/// `dltensor_versioned`) still owns its record and deletes it; a consumed one (renamed) does
/// nothing, its consumer calls the deleter.
unsafe extern "C" fn capsule_destructor(capsule: *mut pyo3::ffi::PyObject) {
    // SAFETY: CPython calls a capsule destructor with the GIL held and a live capsule;
    // `PyCapsule_IsValid` only compares the name, and the pointer of a capsule still named
    // `dltensor_versioned` is the record `export` stored in it.
    unsafe {
        if pyo3::ffi::PyCapsule_IsValid(capsule, VERSIONED.as_ptr()) == 1 {
            let managed = pyo3::ffi::PyCapsule_GetPointer(capsule, VERSIONED.as_ptr())
                .cast::<DlManagedTensorVersioned>();
            if let Some(deleter) = (*managed).deleter {
                deleter(managed);
            }
        }
    }
}

/// The DLPack dtype of a CPU tensor dtype DLPack export supports.
fn dl_dtype(dtype: DType) -> Option<DlDataType> {
    let code = if dtype == DType::FLOAT32 {
        CODE_FLOAT
    } else if dtype == DType::INT32 {
        CODE_INT
    } else {
        return None;
    };
    Some(DlDataType {
        code,
        bits: 32,
        lanes: 1,
    })
}

/// `Tensor.__dlpack_device__()`: `(1, 0)`, the CPU, for a tensor on a CPU carrier.
pub fn device(tensor: &Tensor) -> PyResult<(i32, i32)> {
    if tensor.carrier().downcast_ref::<Cpu>().is_none() {
        return Err(PyBufferError::new_err(format!(
            "a tensor on a {} carrier has no memory DLPack can describe",
            tensor.carrier().class()
        )));
    }
    Ok((DEVICE_CPU, 0))
}

/// The `(major, minor)` of a `max_version` argument, `None` when not given.
fn version_arg(max_version: Option<&Bound<'_, PyAny>>) -> PyResult<Option<(u32, u32)>> {
    match max_version {
        None => Ok(None),
        Some(v) if v.is_none() => Ok(None),
        Some(v) => v.extract::<(u32, u32)>().map(Some).map_err(|_| {
            PyTypeError::new_err(format!(
                "__dlpack__ max_version must be a (major, minor) tuple of ints, got {}",
                type_name(v)
            ))
        }),
    }
}

/// `Tensor.__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None)`: a
/// `dltensor_versioned` capsule over the tensor's slots, read-only, which freezes them until
/// the consumer lets go. BufferError for what cannot be exported without a copy.
pub fn export(
    py: Python<'_>,
    tensor: &Tensor,
    stream: Option<&Bound<'_, PyAny>>,
    max_version: Option<&Bound<'_, PyAny>>,
    dl_device: Option<&Bound<'_, PyAny>>,
    copy: Option<&Bound<'_, PyAny>>,
) -> PyResult<Py<PyAny>> {
    if let Some(stream) = stream.filter(|s| !s.is_none()) {
        return Err(PyValueError::new_err(format!(
            "a CPU tensor is exported without a stream, got stream={}",
            stream.repr()?
        )));
    }
    if let Some(device) = dl_device.filter(|d| !d.is_none()) {
        let wanted: Option<(i32, i32)> = device.extract().ok();
        if wanted != Some((DEVICE_CPU, 0)) {
            return Err(PyBufferError::new_err(format!(
                "a CPU tensor is exported to the CPU device (1, 0), not {}",
                device.repr()?
            )));
        }
    }
    if copy.is_some_and(|c| c.is_truthy().unwrap_or(false)) {
        return Err(PyBufferError::new_err(
            "Tensor.__dlpack__ exports a view and never copies: np.array(t) makes a copy",
        ));
    }
    match version_arg(max_version)? {
        Some((major, _)) if major >= 1 => {}
        _ => {
            return Err(PyBufferError::new_err(
                "Tensor.__dlpack__ exports read-only memory, which only a versioned DLPack \
                 capsule can mark: the consumer must pass max_version=(1, 0) or newer",
            ))
        }
    }
    device(tensor)?;
    let Some(dtype) = dl_dtype(tensor.dtype()) else {
        return Err(PyBufferError::new_err(format!(
            "DLPack exports Float32 and Int32 CPU tensors, not {}",
            tensor.dtype()
        )));
    };
    let found = match view(tensor) {
        Ok(found) => found,
        Err(NoView::Failed(error)) => return Err(crate::errors::to_py(error)),
        Err(NoView::Layout(message) | NoView::Storage(message)) => {
            return Err(PyBufferError::new_err(message))
        }
    };
    let shape: Box<[i64]> = found.shape.iter().map(|&e| e as i64).collect();
    let strides: Box<[i64]> = found.strides.iter().map(|&s| (s / 4) as i64).collect();
    let ndim = i32::try_from(shape.len())
        .map_err(|_| PyBufferError::new_err("the tensor has too many modes for DLPack"))?;
    let mut exported = Box::new(Exported {
        managed: DlManagedTensorVersioned {
            version: DlPackVersion { major: 1, minor: 0 },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_exported),
            flags: FLAG_READ_ONLY,
            dl_tensor: DlTensor {
                data: found.address as *mut c_void,
                device: DlDevice {
                    device_type: DEVICE_CPU,
                    device_id: 0,
                },
                ndim,
                dtype,
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            },
        },
        _shape: shape,
        _strides: strides,
        _export: found.export,
    });
    // The boxed slices live on the heap: moving the box does not move them.
    exported.managed.dl_tensor.shape = exported._shape.as_mut_ptr();
    exported.managed.dl_tensor.strides = exported._strides.as_mut_ptr();
    let raw = Box::into_raw(exported);
    // SAFETY: `raw` is the live box just leaked; its record points at itself through
    // `manager_ctx`, which is how the deleter reclaims it.
    let managed = unsafe {
        (*raw).managed.manager_ctx = raw.cast();
        &raw mut (*raw).managed
    };
    // SAFETY: the GIL is held; the capsule stores the record pointer under a static name and
    // the destructor above, which deletes the record unless a consumer renamed the capsule.
    let capsule = unsafe {
        pyo3::ffi::PyCapsule_New(managed.cast(), VERSIONED.as_ptr(), Some(capsule_destructor))
    };
    if capsule.is_null() {
        // SAFETY: the capsule was not made, so nothing else refers to the record.
        unsafe { delete_exported(managed) };
        return Err(PyErr::fetch(py));
    }
    // SAFETY: `capsule` is a new (owned) reference returned by PyCapsule_New.
    Ok(unsafe { Bound::from_owned_ptr(py, capsule) }.unbind())
}

/// A consumed capsule's record, whose deleter runs when the tensor's carrier lets go.
struct Imported {
    record: *mut c_void,
    versioned: bool,
}

// SAFETY: DLPack allows the consumer to call the deleter from any thread (producers such as
// numpy take the GIL inside their deleter), and the record is touched only by that call.
unsafe impl Send for Imported {}
// SAFETY: as above; shared references to `Imported` give no access to the record.
unsafe impl Sync for Imported {}

impl Drop for Imported {
    fn drop(&mut self) {
        // SAFETY: `record` is the record of a capsule this binding consumed (renamed), so it
        // owns the one call of the producer's deleter, made here exactly once.
        unsafe {
            if self.versioned {
                let managed = self.record.cast::<DlManagedTensorVersioned>();
                if let Some(deleter) = (*managed).deleter {
                    deleter(managed);
                }
            } else {
                let managed = self.record.cast::<DlManagedTensor>();
                if let Some(deleter) = (*managed).deleter {
                    deleter(managed);
                }
            }
        }
    }
}

/// The capsule of `source.__dlpack__`, asking for the versioned protocol first.
fn capsule_of<'py>(source: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let py = source.py();
    let method = source.getattr("__dlpack__").map_err(|_| {
        PyTypeError::new_err(format!(
            "from_dlpack takes an object with a __dlpack__ method, got {}",
            type_name(source)
        ))
    })?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("max_version", (1, 0))?;
    match method.call((), Some(&kwargs)) {
        Ok(capsule) => Ok(capsule),
        Err(error) if error.is_instance_of::<PyTypeError>(py) => method.call0(),
        Err(error) => Err(error),
    }
}

/// `from_dlpack(x, *, copy=None)`: a tensor over the CPU memory `x.__dlpack__()` describes,
/// one top-level mode per axis. Shared (an immutable CPU carrier that keeps the producer's
/// memory until it is released) when the data is float32 or int32, 4-byte aligned and with
/// non-negative strides; otherwise (or with `copy=True`) copied to a fresh mutable CPU
/// carrier, which `copy=False` refuses (ValueError). Another device or dtype is a TypeError;
/// an empty tensor (an axis of extent 0) has no strideweave tensor, a ValueError that leaves
/// the capsule unconsumed.
#[pyfunction]
#[pyo3(signature = (source, *, copy=None))]
pub fn from_dlpack(source: &Bound<'_, PyAny>, copy: Option<bool>) -> PyResult<PyTensor> {
    let capsule = capsule_of(source)?;
    let pointer = capsule.as_ptr();
    // SAFETY: `pointer` is a live object (borrowed from `capsule`); PyCapsule_IsValid only
    // checks its type and name.
    let versioned = unsafe { pyo3::ffi::PyCapsule_IsValid(pointer, VERSIONED.as_ptr()) } == 1;
    // SAFETY: as above.
    let legacy = unsafe { pyo3::ffi::PyCapsule_IsValid(pointer, LEGACY.as_ptr()) } == 1;
    if !versioned && !legacy {
        return Err(PyTypeError::new_err(format!(
            "{}.__dlpack__ returned {}, not an unconsumed DLPack capsule",
            type_name(source),
            type_name(&capsule)
        )));
    }
    let name = if versioned { VERSIONED } else { LEGACY };
    // SAFETY: the capsule is valid under `name` (checked above), so its pointer is the
    // producer's record of that protocol version, live until its deleter is called.
    let record = unsafe { pyo3::ffi::PyCapsule_GetPointer(pointer, name.as_ptr()) };
    // SAFETY: `record` is that live record (the capsule still owns it), of the layout its
    // capsule name says; the reference is used only while the record is alive.
    let tensor: &DlTensor = unsafe {
        if versioned {
            &(*record.cast::<DlManagedTensorVersioned>()).dl_tensor
        } else {
            &(*record.cast::<DlManagedTensor>()).dl_tensor
        }
    };
    if tensor.device.device_type != DEVICE_CPU {
        return Err(PyTypeError::new_err(format!(
            "from_dlpack takes CPU memory (device type 1), got device type {}",
            tensor.device.device_type
        )));
    }
    let dtype = match (tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes) {
        (CODE_FLOAT, 32, 1) => DType::FLOAT32,
        (CODE_INT, 32, 1) => DType::INT32,
        (code, bits, lanes) => {
            return Err(PyTypeError::new_err(format!(
                "from_dlpack takes float32 or int32 data, got DLPack type code {code} with \
                 {bits} bits and {lanes} lane(s)"
            )))
        }
    };
    let ndim = usize::try_from(tensor.ndim)
        .map_err(|_| PyValueError::new_err("the DLPack tensor has a negative ndim"))?;
    let shape: Vec<i64> = if ndim == 0 {
        Vec::new()
    } else {
        // SAFETY: DLPack's `shape` holds `ndim` extents, alive as long as the record.
        unsafe { std::slice::from_raw_parts(tensor.shape, ndim) }.to_vec()
    };
    if shape.iter().any(|&e| e < 0) {
        return Err(PyValueError::new_err(
            "the DLPack tensor has a negative extent",
        ));
    }
    let shape: Vec<usize> = shape.iter().map(|&e| e as usize).collect();
    // Before the capsule is consumed: refused, it stays the producer's.
    crate::numpy_interop::refuse_empty("from_dlpack", "DLPack tensor", &shape)?;
    let strides: Vec<i64> = if tensor.strides.is_null() || ndim == 0 {
        row_major(&shape).iter().map(|&s| s as i64).collect()
    } else {
        // SAFETY: a non-null `strides` holds `ndim` element strides, alive as long as the
        // record.
        unsafe { std::slice::from_raw_parts(tensor.strides, ndim) }.to_vec()
    };
    let address = (tensor.data as usize).wrapping_add(tensor.byte_offset as usize);
    let shareable = address.is_multiple_of(4) && strides.iter().all(|&s| s >= 0) && address != 0;
    // From here on this binding owns the record: rename the capsule so its destructor leaves
    // the record alone, then let `Imported` call the deleter exactly once.
    let used = if versioned {
        USED_VERSIONED
    } else {
        USED_LEGACY
    };
    // SAFETY: a live capsule and a static name.
    if unsafe { pyo3::ffi::PyCapsule_SetName(pointer, used.as_ptr()) } != 0 {
        return Err(PyErr::fetch(source.py()));
    }
    let owner = Imported { record, versioned };
    match (shareable, copy) {
        (true, None | Some(false)) => {
            let strides: Vec<usize> = strides.iter().map(|&s| s as usize).collect();
            let span = shape
                .iter()
                .zip(&strides)
                .try_fold(4usize, |acc, (&e, &s)| {
                    acc.checked_add((e - 1).checked_mul(s)?.checked_mul(4)?)
                })
                .ok_or_else(|| PyValueError::new_err("the DLPack tensor spans too many bytes"))?;
            let base = NonNull::new(address as *mut u8)
                .ok_or_else(|| PyValueError::new_err("the DLPack tensor has no data"))?;
            // SAFETY: the producer keeps `span` bytes from `base` (the first element up to
            // the last one its non-negative strides reach) valid until its deleter runs,
            // which `owner` calls only when the carrier drops it. The carrier only reads.
            let carrier = unsafe { Cpu::borrowing(base, span, dtype, Box::new(owner)) }.py()?;
            let layout = layout_of(&shape, &strides)?;
            Tensor::new(carrier, 0, layout).py().map(wrap)
        }
        (false, Some(false)) => Err(PyValueError::new_err(
            "from_dlpack cannot share this memory (misaligned or with negative strides); \
             copy=False forbids the copy",
        )),
        _ => {
            let values = copied(address, &shape, &strides);
            drop(owner);
            let carrier = if dtype == DType::FLOAT32 {
                let floats: Vec<f32> = values.iter().map(|&bits| f32::from_bits(bits)).collect();
                Cpu::from_f32(&floats, true).py()?
            } else {
                let ints: Vec<i32> = values.iter().map(|&bits| bits as i32).collect();
                Cpu::from_i32(&ints, true).py()?
            };
            let layout = layout_of(&shape, &row_major(&shape))?;
            Tensor::new(carrier, 0, layout).py().map(wrap)
        }
    }
}

/// The 4-byte elements at `address` under `shape` and element `strides`, in row-major order.
fn copied(address: usize, shape: &[usize], strides: &[i64]) -> Vec<u32> {
    let count: usize = shape.iter().product();
    let mut values = Vec::with_capacity(count);
    let mut index = vec![0usize; shape.len()];
    for _ in 0..count {
        let offset: i64 = index
            .iter()
            .zip(strides)
            .map(|(&i, &s)| i as i64 * s * 4)
            .sum();
        let at = (address as i64 + offset) as *const u32;
        // SAFETY: `at` is the address of element `index` under the producer's own shape and
        // strides, valid for reads until its deleter runs (after this copy); the read
        // tolerates misalignment.
        values.push(unsafe { at.read_unaligned() });
        for k in (0..shape.len()).rev() {
            index[k] += 1;
            if index[k] < shape[k] {
                break;
            }
            index[k] = 0;
        }
    }
    values
}
