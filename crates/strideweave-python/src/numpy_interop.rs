//! numpy interop: `np.asarray(t)` views a CPU tensor's slots without a copy, and
//! `from_numpy(arr)` makes a tensor over an array's memory where it can.
//!
//! The stable ABI of CPython 3.9 has no buffer protocol, so a view goes through numpy's
//! `__array_interface__`: `Tensor.__array__` hands numpy a small `_ArrayView` object holding a
//! [`CpuExport`] of the carrier, and numpy keeps that object as the array's base. The export
//! freezes the slots while the array lives (writes are refused, a release is deferred), so the
//! read-only array always shows what the tensor holds and its version stays true.

use std::ptr::NonNull;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use strideweave::carriers::{Cpu, CpuExport};
use strideweave::layout::Layout;
use strideweave::{DType, Tensor};

use crate::convert::{from_value, type_name};
use crate::errors::IntoPyResult;
use crate::tensor::{wrap, PyTensor};

/// The array-interface type string of a 4-byte element in native byte order.
fn typestr(dtype: DType) -> Option<&'static str> {
    let little = cfg!(target_endian = "little");
    if dtype == DType::FLOAT32 {
        Some(if little { "<f4" } else { ">f4" })
    } else if dtype == DType::INT32 {
        Some(if little { "<i4" } else { ">i4" })
    } else {
        None
    }
}

/// The numpy dtype name a copy of a tensor of `dtype` gets.
fn numpy_dtype_name(dtype: DType) -> Option<&'static str> {
    [
        (DType::FLOAT32, "float32"),
        (DType::FLOAT64, "float64"),
        (DType::INT32, "int32"),
        (DType::INT8, "int8"),
        (DType::BOOL, "bool"),
    ]
    .into_iter()
    .find(|(d, _)| *d == dtype)
    .map(|(_, name)| name)
}

/// The numpy axes of a layout: one `(extent, stride in slots)` per top-level mode, or the
/// message saying which mode does not flatten to one stride.
fn axes(layout: &Layout) -> Result<Vec<(usize, usize)>, String> {
    (0..layout.rank())
        .map(|k| {
            let leaves = layout.mode_leaves(k).unwrap_or(&[]);
            let wide: Vec<(usize, usize)> =
                leaves.iter().copied().filter(|&(e, _)| e != 1).collect();
            let Some(&(_, first)) = wide.first() else {
                return Ok((leaves.iter().map(|l| l.0).product(), 0));
            };
            let chained = wide.windows(2).all(|pair| {
                pair[0]
                    .0
                    .checked_mul(pair[0].1)
                    .is_some_and(|next| next == pair[1].1)
            });
            if !chained {
                let mode = layout
                    .mode(k)
                    .map(|m| m.to_string())
                    .unwrap_or_else(|_| "?".to_owned());
                return Err(format!(
                    "the tensor's layout {layout} does not flatten to one stride per mode \
                     (mode {k} is {mode}), so numpy cannot view it; np.array(t) copies it"
                ));
            }
            Ok((wide.iter().map(|l| l.0).product(), first))
        })
        .collect()
}

/// The extent of every top-level mode of `layout`.
fn mode_extents(layout: &Layout) -> Vec<usize> {
    (0..layout.rank())
        .map(|k| {
            layout
                .mode_leaves(k)
                .unwrap_or(&[])
                .iter()
                .map(|l| l.0)
                .product()
        })
        .collect()
}

/// What numpy is handed to view a tensor: the export that freezes the slots and the
/// array interface describing them. numpy keeps this object as the array's `base`, so the
/// export ends when the last array over it is gone.
#[pyclass(name = "_ArrayView", module = "strideweave", frozen)]
pub struct PyArrayView {
    pub(crate) export: CpuExport,
    pub(crate) address: usize,
    pub(crate) shape: Vec<usize>,
    /// In bytes.
    pub(crate) strides: Vec<isize>,
    typestr: &'static str,
}

#[pymethods]
impl PyArrayView {
    /// numpy's array interface (version 3): read-only data at the tensor's first element.
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let interface = PyDict::new(py);
        interface.set_item("version", 3)?;
        interface.set_item("typestr", self.typestr)?;
        interface.set_item("shape", PyTuple::new(py, &self.shape)?)?;
        interface.set_item("strides", PyTuple::new(py, &self.strides)?)?;
        interface.set_item("data", (self.address, true))?;
        Ok(interface)
    }

    /// The number of bytes of the exported carrier's slots.
    #[getter]
    fn exported_bytes(&self) -> usize {
        self.export.len_bytes()
    }
}

/// Why a tensor cannot be viewed without a copy.
pub(crate) enum NoView {
    /// The layout does not flatten: an error unless a copy was asked for.
    Layout(String),
    /// The carrier or dtype has no host memory numpy could view: a copy where allowed.
    Storage(String),
    /// The export failed (a released carrier): the core's error.
    Failed(strideweave::Error),
}

/// The view of `tensor` for numpy, or why there is none.
pub(crate) fn view(tensor: &Tensor) -> Result<PyArrayView, NoView> {
    let carrier = tensor.carrier();
    if carrier.downcast_ref::<Cpu>().is_none() {
        return Err(NoView::Storage(format!(
            "a tensor on a {} carrier has no host memory numpy can view",
            carrier.class()
        )));
    }
    let Some(typestr) = typestr(tensor.dtype()) else {
        return Err(NoView::Storage(format!(
            "numpy views Float32 and Int32 CPU tensors, not {}",
            tensor.dtype()
        )));
    };
    let axes = axes(tensor.layout()).map_err(NoView::Layout)?;
    let export = Cpu::export(carrier).map_err(NoView::Failed)?;
    let width = 4usize;
    let empty = axes.iter().any(|&(e, _)| e == 0);
    let last = axes
        .iter()
        .try_fold(tensor.offset(), |acc, &(e, s)| {
            acc.checked_add(e.saturating_sub(1).checked_mul(s)?)
        })
        .filter(|&last| {
            empty
                || last
                    .checked_mul(width)
                    .is_some_and(|b| b < export.len_bytes())
        });
    let strides: Option<Vec<isize>> = axes
        .iter()
        .map(|&(_, s)| s.checked_mul(width).and_then(|b| isize::try_from(b).ok()))
        .collect();
    let (Some(_), Some(strides)) = (last, strides) else {
        return Err(NoView::Layout(format!(
            "the tensor's layout {} at offset {} does not fit numpy's byte strides",
            tensor.layout(),
            tensor.offset()
        )));
    };
    let address = if empty {
        export.address()
    } else {
        export.address() + tensor.offset() * width
    };
    Ok(PyArrayView {
        export,
        address,
        shape: axes.iter().map(|a| a.0).collect(),
        strides,
        typestr,
    })
}

/// A numpy copy of `tensor`'s values, shaped by its top-level modes.
fn copied<'py>(
    py: Python<'py>,
    numpy: &Bound<'py, PyModule>,
    tensor: &Tensor,
) -> PyResult<Bound<'py, PyAny>> {
    let values = crate::finalization::detach(py, || tensor.to_values()).py()?;
    let items = values
        .into_iter()
        .map(|v| from_value(py, v))
        .collect::<PyResult<Vec<_>>>()?;
    let dtype = numpy_dtype_name(tensor.dtype());
    let flat = numpy.call_method1("array", (PyList::new(py, items)?, dtype))?;
    let shape = PyTuple::new(py, mode_extents(tensor.layout()))?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("order", "F")?;
    flat.call_method("reshape", (shape,), Some(&kwargs))
}

/// `Tensor.__array__(dtype=None, copy=None)`: a read-only view of a CPU Float32 or Int32
/// tensor whose layout flattens (one stride per top-level mode); a copy for other carriers
/// and dtypes (unless `copy` is False), or when `copy` is True; a ValueError naming the
/// layout for one that does not flatten (unless `copy` is True).
pub fn to_numpy(
    py: Python<'_>,
    tensor: &Tensor,
    dtype: Option<&Bound<'_, PyAny>>,
    copy: Option<bool>,
) -> PyResult<Py<PyAny>> {
    let numpy = py.import("numpy")?;
    let dtype = dtype.filter(|d| !d.is_none());
    let array = match (view(tensor), copy) {
        (Err(NoView::Failed(error)), _) => return Err(crate::errors::to_py(error)),
        (Ok(view), Some(true)) => {
            let array = numpy.call_method1("asarray", (Py::new(py, view)?,))?;
            array.call_method0("copy")?
        }
        (Ok(view), _) => numpy.call_method1("asarray", (Py::new(py, view)?,))?,
        (Err(NoView::Layout(message)), None | Some(false)) => {
            return Err(PyValueError::new_err(message))
        }
        (Err(NoView::Storage(message)), Some(false)) => {
            return Err(PyValueError::new_err(format!(
                "{message}; copy=False forbids the copy"
            )))
        }
        (Err(_), _) => copied(py, &numpy, tensor)?,
    };
    let Some(dtype) = dtype else {
        return Ok(array.unbind());
    };
    let wanted = numpy.call_method1("dtype", (dtype,))?;
    if array.getattr("dtype")?.eq(&wanted)? {
        return Ok(array.unbind());
    }
    if copy == Some(false) {
        return Err(PyValueError::new_err(format!(
            "the tensor holds {}, and converting it to {} needs a copy, which copy=False forbids",
            tensor.dtype(),
            wanted.str()?
        )));
    }
    Ok(array.call_method1("astype", (wanted,))?.unbind())
}

/// Why an array cannot be shared without a copy, or `None` when it can.
fn unshareable(
    dtype: DType,
    aligned: bool,
    native: bool,
    address: usize,
    strides: &[isize],
) -> Option<String> {
    if dtype == DType::BOOL {
        return Some("bool arrays are copied".to_owned());
    }
    if !native {
        return Some("the array is not in native byte order".to_owned());
    }
    if !aligned || !address.is_multiple_of(4) {
        return Some("the array is not 4-byte aligned".to_owned());
    }
    if let Some(stride) = strides.iter().find(|&&s| s < 0 || s % 4 != 0) {
        return Some(format!(
            "its byte stride {stride} is negative or not a multiple of 4"
        ));
    }
    None
}

/// The array interface fields `from_numpy` reads.
struct Interface {
    address: usize,
    shape: Vec<usize>,
    strides: Vec<isize>,
    native: bool,
}

fn interface(array: &Bound<'_, PyAny>, itemsize: usize) -> PyResult<Interface> {
    let interface = array.getattr("__array_interface__")?;
    let (address, _read_only): (usize, bool) = interface.get_item("data")?.extract()?;
    let shape: Vec<usize> = interface.get_item("shape")?.extract()?;
    let strides: Vec<isize> = match interface.get_item("strides")? {
        s if s.is_none() => {
            let mut running = itemsize as isize;
            let mut strides = vec![0isize; shape.len()];
            for (k, &extent) in shape.iter().enumerate().rev() {
                strides[k] = running;
                running *= extent as isize;
            }
            strides
        }
        s => s.extract()?,
    };
    let typestr: String = interface.get_item("typestr")?.extract()?;
    let order = if cfg!(target_endian = "little") {
        '<'
    } else {
        '>'
    };
    Ok(Interface {
        address,
        shape,
        strides,
        native: typestr.starts_with(order) || typestr.starts_with('|'),
    })
}

/// Refuses a zero-size `shape` (an array or DLPack tensor with an axis of extent 0): a
/// tensor's extents are at least 1 (the seed: "Extent <1 raises ValueError"), so there is no
/// tensor of it, shared or copied. The ValueError names `function`, the shape and the axis.
pub(crate) fn refuse_empty(function: &str, what: &str, shape: &[usize]) -> PyResult<()> {
    let Some(axis) = shape.iter().position(|&extent| extent == 0) else {
        return Ok(());
    };
    let extents: Vec<String> = shape.iter().map(usize::to_string).collect();
    let written = if extents.len() == 1 {
        format!("({},)", extents[0])
    } else {
        format!("({})", extents.join(", "))
    };
    Err(PyValueError::new_err(format!(
        "{function} cannot make a tensor of the empty {what} of shape {written}: axis {axis} \
         has extent 0, and every extent of a tensor's Shape is at least 1"
    )))
}

/// Row-major slot strides of `shape`.
pub(crate) fn row_major(shape: &[usize]) -> Vec<usize> {
    let mut running = 1usize;
    let mut strides = vec![0usize; shape.len()];
    for (k, &extent) in shape.iter().enumerate().rev() {
        strides[k] = running;
        running = running.saturating_mul(extent.max(1));
    }
    strides
}

/// The layout with one mode per axis of `shape` and slot `strides`.
pub(crate) fn layout_of(shape: &[usize], strides: &[usize]) -> PyResult<Layout> {
    if shape.is_empty() {
        return Ok(Layout::scalar());
    }
    Layout::from_flat(shape, strides).map_err(crate::layout::layout_err)
}

/// `from_numpy(array, *, copy=None)`: a tensor of a float32, int32 or bool numpy array, with
/// one top-level mode per axis (`t[i, j] == array[i, j]`).
///
/// The tensor shares the array's memory (an immutable CPU carrier that keeps the array
/// alive) when the array is float32 or int32, in native byte order, 4-byte aligned
/// and its strides are non-negative multiples of 4 bytes, unless `copy` is True. Otherwise it
/// gets a copy on a fresh, mutable CPU carrier, unless `copy` is False, which is then a
/// ValueError saying why. An empty array (an axis of extent 0) has no tensor: a ValueError.
#[pyfunction]
#[pyo3(signature = (array, *, copy=None))]
pub fn from_numpy(
    py: Python<'_>,
    array: &Bound<'_, PyAny>,
    copy: Option<bool>,
) -> PyResult<PyTensor> {
    let numpy = py.import("numpy")?;
    if !array.is_instance(&numpy.getattr("ndarray")?)? {
        return Err(PyTypeError::new_err(format!(
            "from_numpy takes a numpy.ndarray, got {}",
            type_name(array)
        )));
    }
    let name: String = array.getattr("dtype")?.getattr("name")?.extract()?;
    let dtype = match name.as_str() {
        "float32" => DType::FLOAT32,
        "int32" => DType::INT32,
        "bool" => DType::BOOL,
        other => {
            return Err(PyTypeError::new_err(format!(
                "from_numpy takes float32, int32 or bool arrays, got {other}; convert it \
                 first, e.g. array.astype(numpy.float32)"
            )))
        }
    };
    let itemsize = if dtype == DType::BOOL { 1 } else { 4 };
    let found = interface(array, itemsize)?;
    refuse_empty("from_numpy", "array", &found.shape)?;
    let aligned: bool = array.getattr("flags")?.getattr("aligned")?.extract()?;
    let refusal = unshareable(dtype, aligned, found.native, found.address, &found.strides);
    match (refusal, copy) {
        (None, None | Some(false)) => share(array, dtype, &found),
        (Some(reason), Some(false)) => Err(PyValueError::new_err(format!(
            "from_numpy cannot share the array's memory: {reason}; copy=False forbids the copy"
        ))),
        _ => copy_of(py, &numpy, array, dtype, &found.shape),
    }
}

/// A tensor over the array's own memory.
fn share(array: &Bound<'_, PyAny>, dtype: DType, found: &Interface) -> PyResult<PyTensor> {
    let span = found
        .shape
        .iter()
        .zip(&found.strides)
        .try_fold(4usize, |acc, (&e, &s)| {
            acc.checked_add((e - 1).checked_mul(s as usize)?)
        })
        .ok_or_else(|| PyValueError::new_err("the array spans more bytes than fit in usize"))?;
    let address = NonNull::new(found.address as *mut u8)
        .ok_or_else(|| PyValueError::new_err("the array has no data pointer"))?;
    let owner: Box<dyn Send + Sync> = Box::new(array.clone().unbind());
    // SAFETY: numpy keeps `span` bytes from `address` (the first element up to the last
    // reachable byte under the array's non-negative strides) allocated while the array lives,
    // and the owner holds a reference to the array until the carrier drops it. The carrier
    // only reads; a numpy write while the core reads is the documented caller's race.
    let carrier = unsafe { Cpu::borrowing(address, span, dtype, owner) }.py()?;
    let strides: Vec<usize> = found.strides.iter().map(|&s| s as usize / 4).collect();
    let layout = layout_of(&found.shape, &strides)?;
    Tensor::new(carrier, 0, layout).py().map(wrap)
}

/// A tensor over a copy of the array's values on a fresh, mutable CPU carrier.
fn copy_of(
    py: Python<'_>,
    numpy: &Bound<'_, PyModule>,
    array: &Bound<'_, PyAny>,
    dtype: DType,
    shape: &[usize],
) -> PyResult<PyTensor> {
    let count: usize = shape.iter().product();
    let carrier = if dtype == DType::BOOL {
        let flat = array
            .call_method1("ravel", ("C",))?
            .call_method0("tolist")?;
        let values = flat
            .try_iter()?
            .map(|item| crate::convert::to_value(&item?, "a bool array element"))
            .collect::<PyResult<Vec<_>>>()?;
        Cpu::from_values(&values, DType::BOOL, true).py()?
    } else {
        let kwargs = PyDict::new(py);
        let name = if dtype == DType::FLOAT32 {
            "float32"
        } else {
            "int32"
        };
        kwargs.set_item("dtype", name)?;
        kwargs.set_item("order", "C")?;
        kwargs.set_item("copy", true)?;
        // A fresh array: numpy allocates it aligned, in native byte order and contiguous.
        let fresh = numpy.call_method("array", (array,), Some(&kwargs))?;
        let found = interface(&fresh, 4)?;
        if dtype == DType::FLOAT32 {
            // SAFETY: `fresh` is a new C-contiguous, aligned, native float32 array of `count`
            // elements at `found.address`, alive until the end of this scope and reachable
            // by no other code (the copy is read under the GIL, before `fresh` is dropped).
            let values = unsafe { std::slice::from_raw_parts(found.address as *const f32, count) };
            Cpu::from_f32(values, true).py()?
        } else {
            // SAFETY: as above, for a C-contiguous aligned native int32 array.
            let values = unsafe { std::slice::from_raw_parts(found.address as *const i32, count) };
            Cpu::from_i32(values, true).py()?
        }
    };
    let layout = layout_of(shape, &row_major(shape))?;
    Tensor::new(carrier, 0, layout).py().map(wrap)
}
