//! `TransferRequest.write_slots(start, values)`: a route's submitted transfer writing a run of
//! destination slots in one call.
//!
//! The values are gathered and checked under the GIL before any slot is written — every
//! value normalized to the destination dtype (the seed's dtype rule), the whole run inside
//! the destination (its range rule, checked by the core before its bulk copy) — so a refused
//! call writes nothing. Float32 and Int32
//! runs then go to the core's bulk copy (`TransferRequest::write_f32s` / `write_i32s`, one
//! copy into a CPU destination), other dtypes slot by slot; either way without the GIL.
//! Like the one-slot `write`, nothing is published: the framework moves the destination's
//! version once, when the move commits.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use strideweave::carriers::extension::TransferRequest;
use strideweave::{DType, Value};

use crate::convert::{to_value, type_name};
use crate::errors::IntoPyResult;

/// The values of one bulk write, in the destination's storage form.
enum Run {
    Float32(Vec<f32>),
    Int32(Vec<i32>),
    Other(Vec<Value>),
}

const WHAT: &str = "TransferRequest.write_slots";

/// The numpy dtype name that holds `dtype` slots without conversion.
fn numpy_name(dtype: DType) -> Option<&'static str> {
    if dtype == DType::FLOAT32 {
        Some("float32")
    } else if dtype == DType::INT32 {
        Some("int32")
    } else if dtype == DType::BOOL {
        Some("bool")
    } else {
        None
    }
}

/// `values` as a run for a destination of `dtype`: a numpy array of exactly that dtype
/// (read through its own memory, flattened in C order), or any other iterable of `bool`,
/// `int` and `float`, consumed once, each value normalized to `dtype`.
fn gather(values: &Bound<'_, PyAny>, dtype: DType) -> PyResult<Run> {
    if let Some(run) = numpy_run(values, dtype)? {
        return Ok(run);
    }
    let iterator = values.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "{WHAT} values must be an iterable of bool, int or float or a numpy array, got {}",
            type_name(values)
        ))
    })?;
    let py = values.py();
    let mut normalized = Vec::new();
    for (k, item) in iterator.enumerate() {
        let value = to_value(&item?, &format!("{WHAT} value {k}"))?;
        let value = dtype.normalize(value).py().map_err(|refused| {
            // The core's refusal, of its own class, naming the value it refused.
            PyErr::from_type(
                refused.get_type(py),
                format!("{WHAT} value {k}: {}", refused.value(py)),
            )
        })?;
        normalized.push(value);
    }
    Ok(typed(dtype, normalized))
}

/// Normalized values in the storage form of `dtype`: plain `f32` or `i32` for Float32 and
/// Int32 (the core's bulk copy), the values themselves otherwise.
fn typed(dtype: DType, normalized: Vec<Value>) -> Run {
    if dtype == DType::FLOAT32 {
        let floats: Option<Vec<f32>> = normalized
            .iter()
            .map(|v| v.as_f64().map(|x| x as f32))
            .collect();
        if let Some(floats) = floats {
            return Run::Float32(floats);
        }
    } else if dtype == DType::INT32 {
        let ints: Option<Vec<i32>> = normalized
            .iter()
            .map(|v| v.as_i64().and_then(|i| i32::try_from(i).ok()))
            .collect();
        if let Some(ints) = ints {
            return Run::Int32(ints);
        }
    }
    Run::Other(normalized)
}

/// A numpy array's values as a run, when `values` is a numpy array; `None` for anything else
/// (numpy not imported counts as anything else). An array of another dtype than the
/// destination's is a TypeError: convert it first, so nothing is narrowed silently.
fn numpy_run(values: &Bound<'_, PyAny>, dtype: DType) -> PyResult<Option<Run>> {
    let py = values.py();
    let Ok(numpy) = py.import("sys")?.getattr("modules")?.get_item("numpy") else {
        return Ok(None);
    };
    if !values.is_instance(&numpy.getattr("ndarray")?)? {
        return Ok(None);
    }
    let name: String = values.getattr("dtype")?.getattr("name")?.extract()?;
    if numpy_name(dtype) != Some(name.as_str()) {
        return Err(PyTypeError::new_err(format!(
            "{WHAT} takes a numpy array of the destination's dtype {dtype} ({}), got {name}",
            numpy_name(dtype).unwrap_or("none")
        )));
    }
    let flat = values.call_method1("ravel", ("C",))?;
    Ok(Some(if dtype == DType::FLOAT32 {
        Run::Float32(flat.call_method0("tolist")?.extract()?)
    } else if dtype == DType::INT32 {
        Run::Int32(flat.call_method0("tolist")?.extract()?)
    } else {
        let flags: Vec<bool> = flat.call_method0("tolist")?.extract()?;
        Run::Other(flags.into_iter().map(Value::Bool).collect())
    }))
}

/// Writes `values` to destination slots `start ..` of `request`'s submitted transfer; see
/// the module documentation.
pub fn write_slots(
    py: Python<'_>,
    request: &TransferRequest,
    start: usize,
    values: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let destination = request.destination();
    let run = gather(values, destination.dtype())?;
    crate::finalization::detach(py, || match &run {
        Run::Float32(values) => request.write_f32s(start, values),
        Run::Int32(values) => request.write_i32s(start, values),
        Run::Other(values) => {
            let size = destination.size();
            if start.checked_add(values.len()).is_none_or(|end| end > size) {
                return Err(strideweave::Error::Index(format!(
                    "{WHAT} writes slots {start}..{start}+{} of a destination of {size} slots",
                    values.len()
                )));
            }
            values
                .iter()
                .enumerate()
                .try_for_each(|(k, value)| request.write(start + k, *value))
        }
    })
    .py()
}
