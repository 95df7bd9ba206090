//! `strideweave.carriers.operation_capability` from Python: the manual capability declaration
//! of definition-free classes (`register_operation_capabilities`) and the class-level queries,
//! all answered by the core's capability registry for the exact class.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use strideweave::carrier::{
    capabilities_for_carrier_class as core_capabilities, matching_capability as core_matching,
    register_operation_capabilities as core_register, require_capability as core_require,
    supports_operation_plan as core_supports, unsupported_plan_reason as core_reason, CarrierClass,
};
use strideweave::operation::{OperationCapability, OperationPlan};

use crate::authoring::core_class_of;
use crate::carrier::PyOperationCapability;
use crate::convert::type_name;
use crate::errors::IntoPyResult;

/// The plan of a plan argument: an `OperationCapability` or an `OperationPlan`.
pub fn plan_arg(plan: &Bound<'_, PyAny>, what: &str) -> PyResult<OperationPlan> {
    if let Ok(capability) = plan.cast::<PyOperationCapability>() {
        return Ok(capability.get().inner.plan().clone());
    }
    crate::custom_ops::expect_plan(plan, what).map_err(|_| {
        PyTypeError::new_err(format!(
            "{what} must be an OperationCapability or an OperationPlan, got {}",
            type_name(plan)
        ))
    })
}

/// Capabilities as a tuple of Python objects, keeping only those of `operation` when given.
pub fn capability_tuple<'a>(
    py: Python<'_>,
    capabilities: impl IntoIterator<Item = &'a OperationCapability>,
    operation: Option<&str>,
) -> PyResult<Py<PyTuple>> {
    let items = capabilities
        .into_iter()
        .filter(|c| operation.is_none_or(|name| c.operation() == name))
        .map(|c| Py::new(py, PyOperationCapability { inner: c.clone() }))
        .collect::<PyResult<Vec<_>>>()?;
    Ok(PyTuple::new(py, items)?.unbind())
}

fn class_arg(class: &Bound<'_, PyAny>, what: &str) -> PyResult<CarrierClass> {
    core_class_of(class, what)
}

/// `register_operation_capabilities(carrier_class, capabilities)`: the one complete
/// declaration of what a definition-free independent class executes, made before the class is
/// first observed; the iterable is consumed once. A definition-backed, shipped or dependent
/// class, a second declaration, or one after the class was observed is a `TypeError`.
#[pyfunction]
pub fn register_operation_capabilities(
    py: Python<'_>,
    carrier_class: &Bound<'_, PyAny>,
    capabilities: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let class = class_arg(
        carrier_class,
        "register_operation_capabilities carrier_class",
    )?;
    let items =
        crate::prepared::materialize(capabilities, "register_operation_capabilities capabilities")?;
    let capabilities = items
        .iter()
        .map(|item| {
            item.cast::<PyOperationCapability>()
                .map(|c| c.get().inner.clone())
                .map_err(|_| {
                    PyTypeError::new_err(format!(
                        "register_operation_capabilities capabilities must hold \
                         OperationCapability values, got {}",
                        type_name(&item)
                    ))
                })
        })
        .collect::<PyResult<Vec<_>>>()?;
    crate::finalization::detach(py, || core_register(class, capabilities)).py()
}

/// `capabilities_for_carrier_class(carrier_class, operation=None)`: the class's declared (or
/// definition-derived) capabilities in the deterministic order, only those of `operation`
/// when given. Observes the class.
#[pyfunction]
#[pyo3(signature = (carrier_class, operation=None))]
pub fn capabilities_for_carrier_class(
    py: Python<'_>,
    carrier_class: &Bound<'_, PyAny>,
    operation: Option<&str>,
) -> PyResult<Py<PyTuple>> {
    let class = class_arg(
        carrier_class,
        "capabilities_for_carrier_class carrier_class",
    )?;
    let capabilities = crate::finalization::detach(py, || core_capabilities(class));
    capability_tuple(py, capabilities.iter(), operation)
}

/// `matching_capability(carrier_class, plan)`: the capability authorizing `plan`, or `None`.
#[pyfunction]
pub fn matching_capability(
    py: Python<'_>,
    carrier_class: &Bound<'_, PyAny>,
    plan: &Bound<'_, PyAny>,
) -> PyResult<Option<Py<PyOperationCapability>>> {
    let class = class_arg(carrier_class, "matching_capability carrier_class")?;
    let plan = plan_arg(plan, "matching_capability plan")?;
    crate::finalization::detach(py, || core_matching(class, &plan))
        .map(|inner| Py::new(py, PyOperationCapability { inner }))
        .transpose()
}

/// `supports_operation_plan(carrier_class, plan)`: whether the class executes exactly `plan`.
#[pyfunction]
pub fn supports_operation_plan(
    py: Python<'_>,
    carrier_class: &Bound<'_, PyAny>,
    plan: &Bound<'_, PyAny>,
) -> PyResult<bool> {
    let class = class_arg(carrier_class, "supports_operation_plan carrier_class")?;
    let plan = plan_arg(plan, "supports_operation_plan plan")?;
    Ok(crate::finalization::detach(py, || {
        core_supports(class, &plan)
    }))
}

/// `unsupported_plan_reason(carrier_class, plan)`: why the class does not execute `plan`, or
/// `None` when it does.
#[pyfunction]
pub fn unsupported_plan_reason(
    py: Python<'_>,
    carrier_class: &Bound<'_, PyAny>,
    plan: &Bound<'_, PyAny>,
) -> PyResult<Option<String>> {
    let class = class_arg(carrier_class, "unsupported_plan_reason carrier_class")?;
    let plan = plan_arg(plan, "unsupported_plan_reason plan")?;
    Ok(crate::finalization::detach(py, || {
        core_reason(class, &plan)
    }))
}

/// `require_capability(carrier_class, plan)`: the capability authorizing `plan`, or
/// `UnsupportedOperationPlan` with the reason.
#[pyfunction]
pub fn require_capability(
    py: Python<'_>,
    carrier_class: &Bound<'_, PyAny>,
    plan: &Bound<'_, PyAny>,
) -> PyResult<Py<PyOperationCapability>> {
    let class = class_arg(carrier_class, "require_capability carrier_class")?;
    let plan = plan_arg(plan, "require_capability plan")?;
    let inner = crate::finalization::detach(py, || core_require(class, &plan)).py()?;
    Py::new(py, PyOperationCapability { inner })
}
