//! Conversions between Python objects and the core's scalars and integer trees.

use crate::errors::IntoPyResult;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyList, PyTuple};
use strideweave::layout::MAX_NESTING;
use strideweave::{IntTuple, Value};

/// The name of `object`'s type, for error messages.
pub fn type_name(object: &Bound<'_, PyAny>) -> String {
    object
        .get_type()
        .name()
        .map(|name| name.to_string())
        .unwrap_or_else(|_| "object".to_owned())
}

/// A Python `bool`, `int` or `float` as a core [`Value`]; `what` names it in the error.
pub fn to_value(object: &Bound<'_, PyAny>, what: &str) -> PyResult<Value> {
    if let Ok(flag) = object.cast::<PyBool>() {
        return Ok(Value::Bool(flag.is_true()));
    }
    if object.is_instance_of::<PyInt>() {
        return Ok(Value::Int(object.extract::<i64>()?));
    }
    if object.is_instance_of::<PyFloat>() {
        return Ok(Value::Float(object.extract::<f64>()?));
    }
    Err(PyTypeError::new_err(format!(
        "{what} must be a bool, int or float, got {}",
        type_name(object)
    )))
}

/// A core [`Value`] as the Python `bool`, `int` or `float` it is.
pub fn from_value(py: Python<'_>, value: Value) -> PyResult<Py<PyAny>> {
    Ok(match value {
        Value::Bool(flag) => PyBool::new(py, flag).to_owned().into_any().unbind(),
        Value::Int(int) => int.into_pyobject(py)?.into_any().unbind(),
        Value::Float(float) => PyFloat::new(py, float).into_any().unbind(),
    })
}

/// A Python integer tree (an `int`, or a tuple or list of trees) as an [`IntTuple`].
///
/// `bool` is refused (it is an `int` to Python, never an extent or coordinate here), and so is
/// a tree nested deeper than the layout crate accepts; `what` names the argument.
pub fn to_int_tuple(object: &Bound<'_, PyAny>, what: &str) -> PyResult<IntTuple> {
    to_int_tuple_at(object, what, 1)
}

fn to_int_tuple_at(object: &Bound<'_, PyAny>, what: &str, depth: usize) -> PyResult<IntTuple> {
    if object.is_instance_of::<PyBool>() {
        return Err(PyTypeError::new_err(format!(
            "{what} must be an int or a tuple of them, got bool"
        )));
    }
    if object.is_instance_of::<PyInt>() {
        return match object.extract::<i64>() {
            Ok(int) => Ok(IntTuple::Int(int)),
            Err(_) => Ok(IntTuple::Wide(object.extract::<i128>().map_err(|_| {
                PyValueError::new_err(format!("{what} holds an integer beyond 128 bits"))
            })?)),
        };
    }
    let items: Vec<Bound<'_, PyAny>> = if let Ok(tuple) = object.cast::<PyTuple>() {
        tuple.iter().collect()
    } else if let Ok(list) = object.cast::<PyList>() {
        list.iter().collect()
    } else {
        return Err(PyTypeError::new_err(format!(
            "{what} must be an int or a tuple of them, got {}",
            type_name(object)
        )));
    };
    if depth > MAX_NESTING {
        return Err(PyValueError::new_err(format!(
            "{what} is nested deeper than {MAX_NESTING} levels"
        )));
    }
    items
        .iter()
        .map(|item| to_int_tuple_at(item, what, depth + 1))
        .collect::<PyResult<Vec<_>>>()
        .map(IntTuple::Tuple)
}

/// An [`IntTuple`] as Python: an `int`, or a tuple of trees.
pub fn from_int_tuple(py: Python<'_>, tree: &IntTuple) -> PyResult<Py<PyAny>> {
    Ok(match tree {
        IntTuple::Int(int) => int.into_pyobject(py)?.into_any().unbind(),
        IntTuple::Wide(wide) => wide.into_pyobject(py)?.into_any().unbind(),
        IntTuple::Tuple(items) => {
            let converted = items
                .iter()
                .map(|item| from_int_tuple(py, item))
                .collect::<PyResult<Vec<_>>>()?;
            PyTuple::new(py, converted)?.into_any().unbind()
        }
    })
}

/// A non-negative Python `int` (not `bool`) as `usize`; `what` names it in the error.
pub fn to_index(object: &Bound<'_, PyAny>, what: &str) -> PyResult<usize> {
    if object.is_instance_of::<PyBool>() || !object.is_instance_of::<PyInt>() {
        return Err(PyTypeError::new_err(format!(
            "{what} must be an int, got {}",
            type_name(object)
        )));
    }
    object.extract::<usize>().map_err(|_| {
        PyValueError::new_err(format!(
            "{what} must be a non-negative int, got {}",
            object
                .str()
                .map(|s| s.to_string())
                .unwrap_or_else(|_| "?".to_owned())
        ))
    })
}

/// A sequence (tuple or list) of non-negative ints as `Vec<usize>`.
pub fn to_indices(object: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<usize>> {
    let items: Vec<Bound<'_, PyAny>> = if let Ok(tuple) = object.cast::<PyTuple>() {
        tuple.iter().collect()
    } else if let Ok(list) = object.cast::<PyList>() {
        list.iter().collect()
    } else {
        return Err(PyTypeError::new_err(format!(
            "{what} must be a tuple or list of ints, got {}",
            type_name(object)
        )));
    };
    items.iter().map(|item| to_index(item, what)).collect()
}

/// What one element of a Python list of numbers costs: the list's pointer and the number
/// object (an `int` or a `float`, 24 to 32 bytes).
const PYTHON_ELEMENT_BYTES: usize = 40;

/// Refuses, with a `MemoryError` naming `what` and the limit in force, a Python list of
/// `count` numbers that this process's memory cannot hold — before anything is allocated.
pub fn check_python_list(count: usize, what: impl FnOnce() -> String) -> PyResult<()> {
    strideweave::limits::check_allocation(count, PYTHON_ELEMENT_BYTES, what).py()
}
