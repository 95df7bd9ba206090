//! The mapping from the core's errors to Python exceptions.
//!
//! Every [`ErrorKind`] becomes the built-in exception class the seed names for it (`TypeError`,
//! `ValueError`, ...). The two structured errors of the seed get classes of their own:
//! `UnsupportedOperationPlan`, a `NotImplementedError` subclass carrying the operation name and
//! the ordered rejection reasons, and `ProviderContractError`, a `RuntimeError` subclass.
//! The message is the core's message without its leading kind (`"type error: "`), which the
//! Python class already says.

use pyo3::exceptions::{
    PyIndexError, PyKeyError, PyLookupError, PyMemoryError, PyNotImplementedError, PyOSError,
    PyOverflowError, PyRuntimeError, PyTypeError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use strideweave::{Error, ErrorKind};

pyo3::create_exception!(
    strideweave,
    UnsupportedOperationPlan,
    PyNotImplementedError,
    "No capability or kernel accepts an operation plan. `operation` names the operation and \
     `reasons` holds the rejection reasons, in the order the candidates were consulted."
);

pyo3::create_exception!(
    strideweave,
    ProviderContractError,
    PyRuntimeError,
    "A provider broke its callback contract, or one of its callbacks panicked; nothing was \
     published."
);

/// The message of `error` without the kind prefix its `Display` starts with.
fn message(error: &Error) -> String {
    let full = error.to_string();
    let prefix = format!("{}: ", error.kind());
    match full.strip_prefix(&prefix) {
        Some(rest) => rest.to_owned(),
        None => full,
    }
}

/// Converts a core error into the Python exception the seed names for its kind; an error
/// that stands for an exception a Python callback raised becomes that same exception object.
pub fn to_py(error: Error) -> PyErr {
    if let Some(raised) = crate::callback_error::take(&error) {
        return raised;
    }
    match &error {
        Error::UnsupportedOperationPlan(plan) => crate::finalization::attach(|py| {
            let err = UnsupportedOperationPlan::new_err(error.to_string());
            let value = err.value(py);
            let reasons = PyTuple::new(py, plan.reasons());
            let attached = reasons.and_then(|reasons| {
                value.setattr("operation", plan.operation())?;
                value.setattr("reasons", reasons)
            });
            match attached {
                Ok(()) => err,
                Err(failure) => failure,
            }
        }),
        Error::ProviderContract(_) | Error::ProviderPanicked(_) => {
            ProviderContractError::new_err(error.to_string())
        }
        _ => {
            let text = message(&error);
            match error.kind() {
                ErrorKind::Type => PyTypeError::new_err(text),
                ErrorKind::Value => PyValueError::new_err(text),
                ErrorKind::Index => PyIndexError::new_err(text),
                ErrorKind::Runtime => PyRuntimeError::new_err(text),
                ErrorKind::NotImplemented => PyNotImplementedError::new_err(text),
                ErrorKind::Overflow => PyOverflowError::new_err(text),
                ErrorKind::Key => PyKeyError::new_err(text),
                ErrorKind::Lookup => PyLookupError::new_err(text),
                ErrorKind::Memory => PyMemoryError::new_err(text),
                ErrorKind::Io => PyOSError::new_err(text),
                _ => PyRuntimeError::new_err(text),
            }
        }
    }
}

/// `Result` of the core into `PyResult`.
pub trait IntoPyResult<T> {
    /// Maps the error with [`to_py`].
    fn py(self) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for strideweave::Result<T> {
    fn py(self) -> PyResult<T> {
        self.map_err(to_py)
    }
}

/// Raises `error` as its Python exception: a test hook that lets the pytest suite check the
/// mapping of every kind, since not every kind can be provoked through the public API.
#[pyfunction]
#[pyo3(signature = (kind, message))]
pub fn _raise_core_error(kind: &str, message: String) -> PyResult<()> {
    let error = match kind {
        "Type" => Error::Type(message),
        "Value" => Error::Value(message),
        "Index" => Error::Index(message),
        "Runtime" => Error::Runtime(message),
        "NotImplemented" => Error::NotImplemented(message),
        "Overflow" => Error::Overflow(message),
        "Key" => Error::Key(message),
        "Lookup" => Error::Lookup(message),
        "Memory" => Error::Memory(message),
        "Io" => Error::io(message, std::io::Error::other("injected")),
        "ProviderContract" => Error::ProviderContract(message),
        "UnsupportedOperationPlan" => {
            Error::UnsupportedOperationPlan(strideweave::UnsupportedOperationPlan::new(
                message,
                ["first reason".to_owned(), "second reason".to_owned()],
            ))
        }
        other => {
            return Err(PyValueError::new_err(format!(
                "unknown error kind {other:?}"
            )))
        }
    };
    Err(to_py(error))
}

/// The error of an assignment to (or deletion of) field `name` of an immutable record:
/// `dataclasses.FrozenInstanceError`, as the original's frozen records raise (an
/// `AttributeError` subclass).
pub fn frozen_field(py: Python<'_>, name: &str) -> PyErr {
    let message = format!("cannot assign to field '{name}'");
    match py
        .import("dataclasses")
        .and_then(|module| module.getattr("FrozenInstanceError"))
        .and_then(|class| Ok(class.cast_into::<pyo3::types::PyType>()?))
    {
        Ok(class) => PyErr::from_type(class, message),
        Err(error) => error,
    }
}
