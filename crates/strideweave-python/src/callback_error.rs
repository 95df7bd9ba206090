//! Python exceptions raised inside provider callbacks, carried through the core unchanged.
//!
//! A callback's exception becomes a core [`Error`] of the matching kind whose message names
//! the exception and ends with a ticket; the exception object itself waits in a table under
//! that ticket. When the error comes back out of the core, [`find`] finds the ticket and the
//! caller re-raises the very object the callback raised.
//!
//! An exception is taken out of the table when it is raised. The core may report one error
//! more than once (a failed move to every `wait` of its handle); the Python handles that can
//! deliver an error repeatedly keep the exception they raised first ([`Delivered`]), so each
//! delivery raises the same object. An error the core handles itself (a failure during a
//! best-effort rollback) is never delivered, so the table also keeps at most [`KEPT`]
//! exceptions, dropping the oldest; an error whose exception was dropped is raised as a
//! fresh exception of its kind and message.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex, PoisonError};

use pyo3::exceptions::PyBaseException;
use pyo3::exceptions::{
    PyIndexError, PyKeyError, PyLookupError, PyMemoryError, PyNotImplementedError, PyOSError,
    PyOverflowError, PyTypeError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::{PyTraverseError, PyVisit};
use strideweave::Error;

static PENDING: LazyLock<Mutex<Parked>> = LazyLock::new(|| Mutex::new(Parked::default()));
static NEXT: AtomicU64 = AtomicU64::new(1);

/// How many undelivered exceptions the table keeps (the most recently parked ones).
pub const KEPT: usize = 256;

/// The parked exceptions by ticket, and their tickets oldest first.
#[derive(Default)]
struct Parked {
    by_ticket: HashMap<u64, PyErr>,
    order: VecDeque<u64>,
}

fn parked() -> std::sync::MutexGuard<'static, Parked> {
    PENDING.lock().unwrap_or_else(PoisonError::into_inner)
}

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
    } else if error.is_instance_of::<PyOSError>(py) {
        let errno = value
            .getattr("errno")
            .ok()
            .and_then(|errno| errno.extract::<i32>().ok());
        let source = match errno {
            Some(code) => std::io::Error::from_raw_os_error(code),
            None => std::io::Error::other("raised by a Python callback"),
        };
        Error::io(message, source)
    } else {
        Error::Runtime(message)
    };
    let evicted = {
        let mut table = parked();
        table.by_ticket.insert(ticket, error);
        table.order.push_back(ticket);
        let mut evicted = Vec::new();
        while table.order.len() > KEPT {
            if let Some(old) = table.order.pop_front() {
                evicted.extend(table.by_ticket.remove(&old));
            }
        }
        evicted
    };
    // Dropped outside the lock: releasing an exception can run Python code that parks again.
    drop(evicted);
    kind_error
}

/// The ticket in `error`'s message, for an error that stands for a parked exception.
fn ticket(error: &Error) -> Option<u64> {
    let text = error.to_string();
    let start = text.rfind(MARK)? + MARK.len();
    let end = start + text[start..].find(']')?;
    text[start..end].parse().ok()
}

/// The parked exception `error` stands for, taken out of the table; `None` for an error the
/// core made itself, or one whose exception was dropped.
pub fn take(error: &Error) -> Option<PyErr> {
    let ticket = ticket(error)?;
    let mut table = parked();
    let taken = table.by_ticket.remove(&ticket)?;
    table.order.retain(|kept| *kept != ticket);
    Some(taken)
}

/// The exception a Python handle raised for its error, so that every later delivery of the
/// same error through that handle raises the same object (`AwaitMove.wait`,
/// `AwaitResidency.wait`). The handle reports it to the garbage collector (an exception's
/// traceback often leads back to the handle), see [`Delivered::visit`].
#[derive(Default)]
pub struct Delivered {
    raised: Mutex<Option<Py<PyBaseException>>>,
}

impl Delivered {
    /// The exception for `error`: the one this handle raised before, else `error`'s
    /// (through [`crate::errors::to_py`]), kept for the next delivery. The lock is held only
    /// with the GIL and around no Python code, so it never waits; the conversion runs
    /// outside it (taking a parked exception runs no Python code either, so of two threads
    /// delivering one parked error, the first keeps the very object for both).
    pub fn raise(&self, py: Python<'_>, error: Error) -> PyErr {
        if let Some(first) = self.first(py) {
            return PyErr::from_value(first.into_bound(py).into_any());
        }
        let made = crate::errors::to_py(error);
        let value = made.value(py).clone().unbind();
        let mut raised = self.raised.lock().unwrap_or_else(PoisonError::into_inner);
        let kept = raised.get_or_insert(value).clone_ref(py);
        drop(raised);
        PyErr::from_value(kept.into_bound(py).into_any())
    }

    fn first(&self, py: Python<'_>) -> Option<Py<PyBaseException>> {
        self.raised
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|first| first.clone_ref(py))
    }

    /// Reports the kept exception to the garbage collector (never blocks: the lock is only
    /// held with the GIL, which the collector holds).
    pub fn visit(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        if let Ok(raised) = self.raised.try_lock() {
            if let Some(exception) = raised.as_ref() {
                visit.call(exception)?;
            }
        }
        Ok(())
    }

    /// Drops the kept exception (the collector's `__clear__`), after the lock is released.
    pub fn clear(&self) {
        let taken = match self.raised.try_lock() {
            Ok(mut raised) => raised.take(),
            Err(_) => None,
        };
        drop(taken);
    }
}

/// Forgets the parked exception `error` stands for: it will not be delivered.
pub fn discard(error: &Error) {
    let Some(ticket) = ticket(error) else {
        return;
    };
    let removed = {
        let mut table = parked();
        table.order.retain(|kept| *kept != ticket);
        table.by_ticket.remove(&ticket)
    };
    drop(removed);
}
