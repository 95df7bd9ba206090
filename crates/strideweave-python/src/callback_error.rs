//! Python exceptions raised inside provider callbacks, carried through the core unchanged.
//!
//! A callback's exception becomes a core [`Error`] of the matching kind whose message names
//! the exception and ends with a ticket; the exception object itself waits in a table under
//! that ticket. When the error comes back out of the core, [`find`] finds the ticket and the
//! caller re-raises the very object the callback raised.
//!
//! The core may report one error more than once (a completion's outcome to each of its
//! waiters, a failed move to every `wait`), so finding an exception does not remove it: every
//! delivery raises the same object. The table keeps the [`KEPT`] most recently parked
//! exceptions (an error the core handles itself, such as a failure during a best-effort
//! rollback, is never delivered, so entries are dropped by age rather than on delivery); an
//! error whose exception has aged out is raised as a fresh exception of its kind and message.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex, PoisonError};

use pyo3::exceptions::{
    PyIndexError, PyKeyError, PyLookupError, PyMemoryError, PyNotImplementedError, PyOSError,
    PyOverflowError, PyTypeError, PyValueError,
};
use pyo3::prelude::*;
use strideweave::Error;

static PENDING: LazyLock<Mutex<Parked>> = LazyLock::new(|| Mutex::new(Parked::default()));
static NEXT: AtomicU64 = AtomicU64::new(1);

/// How many parked exceptions the table keeps (the most recent ones).
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

/// The parked exception `error` stands for (the same object on every call while it is
/// kept); `None` for an error the core made itself, or one whose exception aged out.
pub fn find(py: Python<'_>, error: &Error) -> Option<PyErr> {
    let ticket = ticket(error)?;
    parked()
        .by_ticket
        .get(&ticket)
        .map(|raised| raised.clone_ref(py))
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
