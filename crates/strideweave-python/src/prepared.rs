//! The records a Python provider hands back: `Unsupported`, `ProviderResult`, and the
//! acceptance of a submission's return — a ready value or any object satisfying the
//! structural `ProviderCompletion` protocol, wrapped as a core completion.

use std::sync::OnceLock;

use pyo3::exceptions::{PyAttributeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyString, PyTuple};
use strideweave::carriers::extension::{ProviderCompletion, ProviderResult, Submitted};
use strideweave::{Error, Tensor};

use crate::callback_error::park;
use crate::convert::type_name;
use crate::errors::IntoPyResult;
use crate::tensor::PyTensor;

/// A non-empty `str` argument; `what` names the field (TypeError for another type,
/// ValueError when empty).
pub fn non_empty_str(object: &Bound<'_, PyAny>, what: &str) -> PyResult<String> {
    let text = object.cast::<PyString>().map_err(|_| {
        PyTypeError::new_err(format!(
            "{what} must be a string (str), got {}",
            type_name(object)
        ))
    })?;
    let text = text.to_cow()?.into_owned();
    if text.is_empty() {
        return Err(PyValueError::new_err(format!(
            "{what} must not be empty (a non-empty str)"
        )));
    }
    Ok(text)
}

/// A callable argument; `what` names the field.
pub fn expect_callable(object: &Bound<'_, PyAny>, what: &str) -> PyResult<Py<PyAny>> {
    if !object.is_callable() {
        return Err(PyTypeError::new_err(format!(
            "{what} must be callable, got {}",
            type_name(object)
        )));
    }
    Ok(object.clone().unbind())
}

/// Materializes a finite iterable once; `what` names the field.
pub fn materialize<'py>(object: &Bound<'py, PyAny>, what: &str) -> PyResult<Bound<'py, PyTuple>> {
    let iterator = object.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "{what} must be an iterable, got {}",
            type_name(object)
        ))
    })?;
    let items = iterator.collect::<PyResult<Vec<_>>>()?;
    PyTuple::new(object.py(), items)
}

/// The seed's `Unsupported(reason)`: an immutable rejection with a non-empty reason. A
/// pattern's `prepare` returns it to let the next candidate prepare; a route's `prepare`
/// returns it to decline one request.
#[pyclass(name = "Unsupported", module = "strideweave", frozen, eq)]
#[derive(PartialEq)]
pub struct PyUnsupported {
    pub(crate) reason: String,
}

#[pymethods]
impl PyUnsupported {
    /// Fields are immutable: assignment is a `dataclasses.FrozenInstanceError`.
    fn __setattr__(&self, py: Python<'_>, name: &str, _value: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    /// Fields cannot be deleted either: a `dataclasses.FrozenInstanceError`.
    fn __delattr__(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    #[new]
    fn py_new(reason: &Bound<'_, PyAny>) -> PyResult<Self> {
        Ok(PyUnsupported {
            reason: non_empty_str(reason, "Unsupported reason")?,
        })
    }

    /// Why the request was declined.
    #[getter]
    fn reason(&self) -> &str {
        &self.reason
    }

    fn __repr__(&self) -> String {
        format!("Unsupported({:?})", self.reason)
    }
}

impl PyUnsupported {
    /// The core rejection.
    pub fn to_core(&self) -> strideweave::carriers::extension::Unsupported {
        // The reason was checked non-empty at construction.
        strideweave::carriers::extension::Unsupported::new(self.reason.as_str())
            .expect("a checked non-empty reason")
    }
}

/// The seed's `ProviderResult(outputs)`: the output Tensors of one kernel or composite
/// submission, materialized once into a non-empty tuple.
#[pyclass(name = "ProviderResult", module = "strideweave", frozen)]
pub struct PyProviderResult {
    outputs: Py<PyTuple>,
    core: ProviderResult,
}

#[pymethods]
impl PyProviderResult {
    /// Fields are immutable: assignment is a `dataclasses.FrozenInstanceError`.
    fn __setattr__(&self, py: Python<'_>, name: &str, _value: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    /// Fields cannot be deleted either: a `dataclasses.FrozenInstanceError`.
    fn __delattr__(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    #[new]
    fn py_new(outputs: &Bound<'_, PyAny>) -> PyResult<Self> {
        let items = materialize(outputs, "ProviderResult outputs")?;
        let mut tensors: Vec<Tensor> = Vec::with_capacity(items.len());
        for item in items.iter() {
            let tensor = item.cast::<PyTensor>().map_err(|_| {
                PyTypeError::new_err(format!(
                    "ProviderResult outputs must hold Tensor values, got {}",
                    type_name(&item)
                ))
            })?;
            tensors.push(tensor.get().inner.clone());
        }
        let core = ProviderResult::new(tensors).py()?;
        Ok(PyProviderResult {
            outputs: items.unbind(),
            core,
        })
    }

    /// The output Tensors in result order.
    #[getter]
    fn outputs(&self, py: Python<'_>) -> Py<PyTuple> {
        self.outputs.clone_ref(py)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!("ProviderResult({} outputs)", self.outputs.bind(py).len())
    }
}

/// How the terminal value of one kind of submission is read from Python: `ready` recognizes
/// a value returned directly by `submit` (and converts it); `terminal` converts what a
/// completion's `wait()` returned.
pub trait SubmissionKind: Clone + Send + Sync + 'static {
    /// What `submit` and `wait()` must return, for messages ("a ProviderResult").
    const EXPECTED: &'static str;

    /// The value when `object` is a direct result; `None` when it is not one.
    fn ready(object: &Bound<'_, PyAny>) -> Option<Self>;
}

impl SubmissionKind for ProviderResult {
    const EXPECTED: &'static str = "a ProviderResult";

    fn ready(object: &Bound<'_, PyAny>) -> Option<Self> {
        object
            .cast::<PyProviderResult>()
            .ok()
            .map(|r| r.get().core.clone())
    }
}

impl SubmissionKind for () {
    const EXPECTED: &'static str = "None";

    fn ready(object: &Bound<'_, PyAny>) -> Option<Self> {
        object.is_none().then_some(())
    }
}

/// The `done` flag of a completion object: a Type error naming the field when it is not a
/// `bool`.
fn done_flag(
    py: Python<'_>,
    completion: &Bound<'_, PyAny>,
    what: &str,
) -> strideweave::Result<bool> {
    let done = completion
        .getattr("done")
        .map_err(|error| park(py, &format!("{what}'s ProviderCompletion done"), error))?;
    done.cast::<PyBool>()
        .map(|b| b.is_true())
        .map_err(|_| not_bool(what, &done))
}

fn not_bool(what: &str, done: &Bound<'_, PyAny>) -> Error {
    Error::Type(format!(
        "{what} returned a ProviderCompletion whose done is {}: done must be a bool",
        type_name(done)
    ))
}

/// Accepts what a Python `submit` returned: the ready value, or a completion object (any
/// object with a `done` property holding a `bool` and a callable `wait`, the structural
/// `ProviderCompletion` protocol, and no `__await__`) waited on later. Anything else is a
/// Type error naming `what`.
///
/// `record` (the prepared-work record whose `submit` returned) is kept alive with a pending
/// completion until the framework drops it after the terminal outcome, so what the provider's
/// prepared work holds outlives the caller's handles.
pub fn accept<T: SubmissionKind>(
    py: Python<'_>,
    returned: Bound<'_, PyAny>,
    what: &str,
    record: Option<Py<PyAny>>,
) -> strideweave::Result<Submitted<T>> {
    if let Some(value) = T::ready(&returned) {
        return Ok(Submitted::Ready(value));
    }
    // The seed's completion is a blocking protocol: a coroutine-style object is refused.
    if returned.hasattr("__await__").unwrap_or(false) {
        return Err(Error::Type(format!(
            "{what} returned {}, which exposes __await__: a ProviderCompletion is a blocking \
             done/wait() protocol, not an awaitable",
            type_name(&returned)
        )));
    }
    let has_wait = returned
        .getattr("wait")
        .is_ok_and(|wait| wait.is_callable());
    let done = match returned.getattr("done") {
        Ok(done) => Some(done),
        Err(error) if error.is_instance_of::<PyAttributeError>(py) => None,
        Err(error) => {
            return Err(park(
                py,
                &format!("{what}'s ProviderCompletion done"),
                error,
            ))
        }
    };
    let Some(done) = done.filter(|_| has_wait) else {
        return Err(Error::Type(format!(
            "{what} must return {} or a ProviderCompletion (a done property and a wait() \
             method), got {}",
            T::EXPECTED,
            type_name(&returned)
        )));
    };
    if !done.is_instance_of::<PyBool>() {
        return Err(not_bool(what, &done));
    }
    Ok(Submitted::pending(PyCompletion::<T> {
        object: returned.unbind(),
        what: what.to_owned(),
        outcome: OnceLock::new(),
        _record: record,
    }))
}

/// A Python completion object seen as a core completion: `wait()` takes the GIL, checks
/// `done` is a `bool`, calls the object's `wait()` and converts its value. The first
/// terminal outcome is kept, so later waits observe the same one.
struct PyCompletion<T> {
    object: Py<PyAny>,
    what: String,
    outcome: OnceLock<strideweave::Result<T>>,
    /// The prepared record that submitted this work, held for as long as the completion.
    _record: Option<Py<PyAny>>,
}

impl<T: SubmissionKind> PyCompletion<T> {
    fn resolve(&self, py: Python<'_>) -> strideweave::Result<T> {
        let completion = self.object.bind(py);
        done_flag(py, completion, &self.what)?;
        let value = completion.call_method0("wait").map_err(|error| {
            park(
                py,
                &format!("{}'s ProviderCompletion wait", self.what),
                error,
            )
        })?;
        T::ready(&value).ok_or_else(|| {
            Error::Type(format!(
                "the ProviderCompletion {} returned must wait() to {}, got {}",
                self.what,
                T::EXPECTED,
                type_name(&value)
            ))
        })
    }
}

impl<T: SubmissionKind> ProviderCompletion<T> for PyCompletion<T> {
    fn done(&self) -> bool {
        if self.outcome.get().is_some() {
            return true;
        }
        crate::finalization::attach(|py| {
            done_flag(py, self.object.bind(py), &self.what).unwrap_or_else(|error| {
                // Not terminal as far as anyone can tell; the exception is not kept.
                crate::callback_error::discard(&error);
                false
            })
        })
    }

    fn wait(&self) -> strideweave::Result<T> {
        if let Some(outcome) = self.outcome.get() {
            return outcome.clone();
        }
        let outcome = crate::finalization::attach(|py| self.resolve(py));
        self.outcome.get_or_init(|| outcome).clone()
    }
}
