//! Definition-free `DependentCarrier` classes written in Python (seed: "Definition-free
//! carriers retain the existing extension path", for the dependent category).
//!
//! Such a class owns its capabilities per instance, as the original's legacy dependent
//! carriers do: `Carrier.__init__()` (no arguments) leaves the instance unfinalized, the
//! class's own constructor installs its dependencies, and its last step,
//! `_finalize_dependent_capabilities()`, materializes `_generate_operation_capabilities()`
//! once, validates and sorts it, and only then builds the core carrier over the instance's
//! storage hooks with that snapshot as its reach. Until then the instance answers no
//! capability query; whatever fails on the way publishes nothing and leaves the instance
//! unfinalized. A class that defines no storage hooks (`size()` of its own) finalizes a
//! snapshot and no storage: it answers capability queries and holds no values.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::sync::OnceLock;

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyTuple, PyType};
use strideweave::operation::{missing_plan_reason, OperationCapability, OperationPlan};
use strideweave::{Carrier, CarrierClass};

use crate::carrier::{PyCarrier, PyOperationCapability};
use crate::convert::type_name;

/// The state of one definition-free dependent instance: unfinalized until its snapshot is
/// set.
pub struct LegacyDependent {
    /// The class name used in messages (`type(self).__name__`).
    name: String,
    /// The class's core class.
    class: CarrierClass,
    /// Set while one call finalizes (a second, concurrent one is refused).
    finalizing: AtomicBool,
    /// The capability objects the generator returned, sorted in the deterministic capability
    /// order: the instance's whole answer once set.
    snapshot: OnceLock<Py<PyTuple>>,
}

impl LegacyDependent {
    /// The state of a fresh, unfinalized instance of `class`.
    pub fn new(name: String, class: CarrierClass) -> LegacyDependent {
        LegacyDependent {
            name,
            class,
            finalizing: AtomicBool::new(false),
            snapshot: OnceLock::new(),
        }
    }

    /// The `RuntimeError` of a query before finalization.
    pub fn not_finalized(&self) -> PyErr {
        PyRuntimeError::new_err(format!(
            "this {} instance has not finalized its operation capabilities; a dependent carrier \
             calls _finalize_dependent_capabilities() once its dependencies are in place, before \
             it answers a capability query",
            self.name
        ))
    }

    /// The error of a storage use of an instance without a core carrier: unfinalized, or
    /// finalized by a class that defines no storage hooks.
    pub fn no_storage(&self) -> PyErr {
        if self.snapshot.get().is_none() {
            return self.not_finalized();
        }
        PyTypeError::new_err(format!(
            "this {} instance holds no storage: its class defines no storage hooks (size(), \
             dtype(), get_value(), set_value())",
            self.name
        ))
    }

    /// The frozen snapshot, or the `RuntimeError` of an unfinalized instance.
    fn entries<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyOperationCapability>>> {
        let snapshot = self.snapshot.get().ok_or_else(|| self.not_finalized())?;
        snapshot
            .bind(py)
            .iter()
            .map(|entry| {
                entry
                    .cast_into::<PyOperationCapability>()
                    .map_err(PyErr::from)
            })
            .collect()
    }

    /// `operation_capabilities(operation_name)`: the snapshot's objects themselves, only
    /// those of `operation_name` when given.
    pub fn capabilities(
        &self,
        py: Python<'_>,
        operation_name: Option<&str>,
    ) -> PyResult<Py<PyTuple>> {
        let chosen: Vec<_> = self
            .entries(py)?
            .into_iter()
            .filter(|c| operation_name.is_none_or(|name| c.get().inner.operation() == name))
            .collect();
        Ok(PyTuple::new(py, chosen)?.unbind())
    }

    /// The snapshot's object authorizing `plan`, if any.
    pub fn matching(
        &self,
        py: Python<'_>,
        plan: &OperationPlan,
    ) -> PyResult<Option<Py<PyOperationCapability>>> {
        Ok(self
            .entries(py)?
            .into_iter()
            .find(|c| c.get().inner.matches(plan))
            .map(Bound::unbind))
    }

    /// Why the instance does not execute `plan` (the core's two forms), or `None`.
    pub fn reason(&self, py: Python<'_>, plan: &OperationPlan) -> PyResult<Option<String>> {
        let entries = self.entries(py)?;
        if entries.iter().any(|c| c.get().inner.matches(plan)) {
            return Ok(None);
        }
        let declared: Vec<OperationCapability> =
            entries.iter().map(|c| c.get().inner.clone()).collect();
        Ok(Some(missing_plan_reason(self.class, &declared, plan)))
    }
}

/// `DependentCarrier._generate_operation_capabilities()` of the base: unimplemented.
pub fn generate_unimplemented(slf: &Bound<'_, PyAny>) -> PyErr {
    pyo3::exceptions::PyNotImplementedError::new_err(format!(
        "{} must implement _generate_operation_capabilities() to say which plans this instance \
         executes",
        class_name(&slf.get_type())
    ))
}

fn class_name(class: &Bound<'_, PyType>) -> String {
    class
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "DependentCarrier".to_owned())
}

/// Whether `class` defines a storage hook of its own (`size()` other than `Carrier.size`).
fn defines_storage(class: &Bound<'_, PyType>) -> PyResult<bool> {
    let base = class.py().get_type::<PyCarrier>().getattr("size")?;
    Ok(!class.getattr("size")?.is(&base))
}

/// `DependentCarrier._finalize_dependent_capabilities()`.
///
/// A definition-backed instance finalized at construction (its `CompositeProvider`'s
/// capabilities were read then): nothing is left to do. A definition-free one materializes
/// its generator once, requires `OperationCapability` entries (`TypeError`) with no exact
/// shape twice (`ValueError`), builds its core carrier when the class defines storage hooks,
/// and then publishes the snapshot. A second call is a `RuntimeError`; any failure leaves the
/// instance unfinalized.
pub fn finalize(slf: &Bound<'_, PyCarrier>) -> PyResult<()> {
    let py = slf.py();
    let held = slf.get();
    let Some(state) = held.legacy_dependent() else {
        return match held.carrier() {
            Ok(_) => Ok(()),
            Err(error) => Err(error),
        };
    };
    if state.snapshot.get().is_some() {
        return Err(already_finalized(&state.name));
    }
    if state.finalizing.swap(true, Ordering::AcqRel) {
        return Err(PyRuntimeError::new_err(format!(
            "this {} instance is already finalizing its operation capabilities on another call",
            state.name
        )));
    }
    let outcome = freeze(slf, state);
    state.finalizing.store(false, Ordering::Release);
    let (objects, carrier) = outcome?;
    if let Some(carrier) = carrier {
        held.adopt(py, carrier, slf.as_any())?;
    }
    state
        .snapshot
        .set(objects)
        .map_err(|_| already_finalized(&state.name))
}

fn already_finalized(name: &str) -> PyErr {
    PyRuntimeError::new_err(format!(
        "this {name} instance has already finalized its operation capabilities; a dependent \
         carrier finalizes once, at the end of construction"
    ))
}

/// Generates, validates and sorts the snapshot, and builds the core carrier over it when the
/// class defines storage hooks; publishes nothing.
fn freeze(
    slf: &Bound<'_, PyCarrier>,
    state: &LegacyDependent,
) -> PyResult<(Py<PyTuple>, Option<Carrier>)> {
    let py = slf.py();
    let generated = slf.call_method0("_generate_operation_capabilities")?;
    let items = crate::prepared::materialize(
        &generated,
        &format!("{}._generate_operation_capabilities()", state.name),
    )?;
    let mut entries = items
        .iter()
        .map(|item| {
            item.cast_into::<PyOperationCapability>().map_err(|error| {
                PyTypeError::new_err(format!(
                    "the capabilities {} generated must be OperationCapability entries, got {}",
                    state.name,
                    type_name(error.into_inner().as_any())
                ))
            })
        })
        .collect::<PyResult<Vec<_>>>()?;
    entries.sort_by(|a, b| a.get().inner.cmp_order(&b.get().inner));
    if let Some(pair) = entries
        .windows(2)
        .find(|w| w[0].get().inner == w[1].get().inner)
    {
        return Err(PyValueError::new_err(format!(
            "this {} instance generated two capabilities for {}",
            state.name,
            pair[0].get().inner
        )));
    }
    let snapshot: Arc<[OperationCapability]> =
        entries.iter().map(|c| c.get().inner.clone()).collect();
    let carrier = if defines_storage(&slf.get_type())? {
        Some(crate::legacy::construct(
            slf.as_any(),
            state.class,
            Some(snapshot),
        )?)
    } else {
        None
    };
    Ok((PyTuple::new(py, entries)?.unbind(), carrier))
}
