//! Python exceptions raised inside provider callbacks, carried through the core unchanged.
//!
//! A callback's exception becomes a core [`Error`] of the matching kind whose message names
//! the exception and ends with a ticket; the exception object itself waits in a table under
//! that ticket. When the error comes back out of the core, [`take`] finds the ticket and the
//! caller re-raises the very object the callback raised.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex, PoisonError};

use pyo3::exceptions::{
    PyIndexError, PyKeyError, PyLookupError, PyMemoryError, PyNotImplementedError, PyOverflowError,
    PyTypeError, PyValueError,
};
use pyo3::prelude::*;
use strideweave::Error;

static PENDING: LazyLock<Mutex<HashMap<u64, PyErr>>> = LazyLock::new(|| Mutex::new(HashMap::new()));
static NEXT: AtomicU64 = AtomicU64::new(1);

const MARK: &str = "[python exception #";

/// Parks `error` and returns the core error that stands for it.
pub fn park(py: Python<'_>, callback: &str, error: PyErr) -> Error {
    let ticket = NEXT.fetch_add(1, Ordering::Relaxed);
    let value = error.value(py);
    let class = value
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "exception".to_owned());
    let text = value
        .str()
        .map(|s| s.to_string())
        .unwrap_or_else(|_| String::new());
    let message = format!("{callback} raised {class}: {text} {MARK}{ticket}]");
    let kind_error = if error.is_instance_of::<PyTypeError>(py) {
        Error::Type(message)
    } else if error.is_instance_of::<PyValueError>(py) {
        Error::Value(message)
    } else if error.is_instance_of::<PyIndexError>(py) {
        Error::Index(message)
    } else if error.is_instance_of::<PyNotImplementedError>(py) {
        Error::NotImplemented(message)
    } else if error.is_instance_of::<PyOverflowError>(py) {
        Error::Overflow(message)
    } else if error.is_instance_of::<PyKeyError>(py) {
        Error::Key(message)
    } else if error.is_instance_of::<PyLookupError>(py) {
        Error::Lookup(message)
    } else if error.is_instance_of::<PyMemoryError>(py) {
        Error::Memory(message)
    } else {
        Error::Runtime(message)
    };
    PENDING
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(ticket, error);
    kind_error
}

/// The parked exception `error` stands for, removed from the table; `None` for an error the
/// core made itself.
pub fn take(error: &Error) -> Option<PyErr> {
    let text = error.to_string();
    let start = text.rfind(MARK)? + MARK.len();
    let end = start + text[start..].find(']')?;
    let ticket: u64 = text[start..end].parse().ok()?;
    PENDING
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(&ticket)
}
