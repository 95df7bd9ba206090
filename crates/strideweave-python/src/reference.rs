//! The reference implementation of a custom operation defined from Python: the seed's
//! `define_operation(..., reference=None, ...)`, an optional carrier-neutral oracle that
//! computes an invocation's results, against which kernels are compared within each
//! `ResultSpec`'s `atol` and `rtol` (docs/python.md, Custom operations).
//!
//! The Python callable becomes the core definition's reference callback, so the Rust side
//! (the conformance kit) calls it like a Rust reference; `OperationDefinition.reference` is
//! the callable itself and `OperationDefinition.run_reference(invocation)` runs it through
//! the core's callback and checks what it returned against the invocation's result specs.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, PoisonError};

use pyo3::exceptions::{PyNotImplementedError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};
use strideweave::operation::{OperationDefinition, ReferenceFn, ResolvedInvocation};
use strideweave::{Error, Tensor};

use crate::callback_error::park;
use crate::convert::type_name;
use crate::errors::IntoPyResult;
use crate::invocation::wrap_invocation;
use crate::tensor::PyTensor;

/// The Python reference of each custom operation that has one, by operation name (names are
/// never freed for reuse, so an entry lives as long as its definition).
static REFERENCES: LazyLock<Mutex<HashMap<String, Py<PyAny>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// Records `reference` as the Python reference of `definition`.
pub fn remember(definition: &OperationDefinition, reference: Py<PyAny>) {
    REFERENCES
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(definition.name().to_owned(), reference);
}

/// The Python reference of `definition`, the very callable `define_operation` received;
/// `None` for a definition without one (every built-in).
pub fn python_reference(py: Python<'_>, definition: &OperationDefinition) -> Option<Py<PyAny>> {
    REFERENCES
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(definition.name())
        .map(|reference| reference.clone_ref(py))
}

/// The core reference callback of the Python `reference(invocation)` of operation `name`: it
/// takes the GIL back, calls the reference with the `ResolvedInvocation`, and accepts a
/// Tensor or a tuple or list of Tensors (a Type error naming what came back otherwise). An
/// exception raised by the reference is parked and raised again as the same object.
pub fn reference_fn(name: String, reference: Py<PyAny>) -> Box<ReferenceFn> {
    Box::new(move |invocation: &ResolvedInvocation| {
        crate::finalization::attach(|py| {
            let label = format!("'{name}' reference");
            let argument = wrap_invocation(py, invocation).map_err(|e| park(py, &label, e))?;
            let answer = reference
                .bind(py)
                .call1((argument,))
                .map_err(|e| park(py, &label, e))?;
            results_of(&label, &answer)
        })
    })
}

/// The tensors a reference returned: one Tensor, or a tuple or list of them.
fn results_of(label: &str, answer: &Bound<'_, PyAny>) -> strideweave::Result<Vec<Tensor>> {
    if let Ok(tensor) = answer.cast::<PyTensor>() {
        return Ok(vec![tensor.get().inner.clone()]);
    }
    let items: Vec<Bound<'_, PyAny>> = if let Ok(tuple) = answer.cast::<PyTuple>() {
        tuple.iter().collect()
    } else if let Ok(list) = answer.cast::<PyList>() {
        list.iter().collect()
    } else {
        return Err(Error::Type(format!(
            "{label} must return a Tensor or a tuple of Tensors, got {}",
            type_name(answer)
        )));
    };
    items
        .iter()
        .enumerate()
        .map(|(index, item)| {
            item.cast::<PyTensor>()
                .map(|tensor| tensor.get().inner.clone())
                .map_err(|_| {
                    Error::Type(format!(
                        "{label} result {index} must be a Tensor, got {}",
                        type_name(item)
                    ))
                })
        })
        .collect()
}

/// `definition.run_reference(invocation)`: runs the reference through the core's callback,
/// with the GIL released around it, and checks its results against the invocation's result
/// specs — their number, and each result's dtype, shape, layout and aliasing, a
/// `ProviderContractError` naming the result otherwise — as the framework checks a kernel's.
pub fn run_reference(
    py: Python<'_>,
    definition: &OperationDefinition,
    invocation: &ResolvedInvocation,
) -> PyResult<Vec<Tensor>> {
    let name = definition.name();
    let Some(reference) = definition.reference() else {
        return Err(PyNotImplementedError::new_err(format!(
            "'{name}' has no reference implementation: define_operation was given none"
        )));
    };
    let called = invocation.call().definition();
    if !called.same_as(definition) {
        return Err(PyValueError::new_err(format!(
            "'{name}' run_reference received an invocation of '{}'",
            called.name()
        )));
    }
    let results = crate::finalization::detach(py, || reference(invocation)).py()?;
    check_results(name, invocation, &results).py()?;
    Ok(results)
}

/// The seed's publication checks, applied to a reference's results.
fn check_results(
    name: &str,
    invocation: &ResolvedInvocation,
    results: &[Tensor],
) -> strideweave::Result<()> {
    let specs = invocation.results();
    let broken = |message: String| Error::ProviderContract(format!("'{name}' reference {message}"));
    if results.len() != specs.len() {
        return Err(broken(format!(
            "returned {} results for {} result specs",
            results.len(),
            specs.len()
        )));
    }
    let operands: Vec<&Tensor> = invocation
        .call()
        .operands()
        .iter()
        .filter_map(|operand| operand.as_tensor())
        .collect();
    for (index, (result, spec)) in results.iter().zip(specs).enumerate() {
        if result.dtype() != spec.dtype() {
            return Err(broken(format!(
                "result {index} is {}, its spec says {}",
                result.dtype(),
                spec.dtype()
            )));
        }
        if result.shape() != spec.shape() {
            return Err(broken(format!(
                "result {index} has Shape {}, its spec says {}",
                result.shape(),
                spec.shape()
            )));
        }
        if result.layout() != spec.layout() {
            return Err(broken(format!(
                "result {index} has layout {}, its spec says {}",
                result.layout(),
                spec.layout()
            )));
        }
        match spec.alias_of() {
            Some(alias) => {
                let aliased = invocation
                    .call()
                    .operands()
                    .get(alias)
                    .and_then(|operand| operand.as_tensor())
                    .is_some_and(|operand| operand.carrier().same_as(result.carrier()));
                if !aliased {
                    return Err(broken(format!(
                        "result {index} must be operand {alias} or a view of its storage (its \
                         spec's alias_of)"
                    )));
                }
            }
            None => {
                if let Some(position) = operands
                    .iter()
                    .position(|operand| operand.carrier().same_as(result.carrier()))
                {
                    return Err(broken(format!(
                        "result {index} shares storage with operand {position}, but its spec \
                         aliases none"
                    )));
                }
            }
        }
    }
    Ok(())
}
