//! `strideweave.carriers.operation_capability` from Python: the manual capability declaration
//! of definition-free classes (`register_operation_capabilities`) and the class-level queries,
//! all answered by the core's capability registry for the exact class.
//!
//! As the original's do, the queries answer for any class: one that is no concrete Carrier
//! implementation (`object`, an unrelated class, the `Carrier` root) declares nothing. A
//! declaration's own objects are the ones the queries answer with (`matching_capability(cls,
//! plan) is entry`).

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, PoisonError};

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyTuple, PyType};
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

/// The objects each class's declaration was made of, by class, in the registry's order.
static DECLARED: LazyLock<Mutex<HashMap<CarrierClass, Vec<Py<PyOperationCapability>>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// The Python object of a class's capability: the declared object when the class declared
/// it, else a new one.
pub fn capability_object(
    py: Python<'_>,
    class: CarrierClass,
    capability: &OperationCapability,
) -> PyResult<Py<PyOperationCapability>> {
    let declared = DECLARED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&class)
        .and_then(|objects| {
            objects
                .iter()
                .find(|object| object.get().inner == *capability)
                .map(|object| object.clone_ref(py))
        });
    match declared {
        Some(object) => Ok(object),
        None => Py::new(
            py,
            PyOperationCapability {
                inner: capability.clone(),
            },
        ),
    }
}

/// A class's capabilities as a tuple of Python objects (the declared ones where the class
/// declared them), keeping only those of `operation` when given.
pub fn class_capability_tuple<'a>(
    py: Python<'_>,
    class: CarrierClass,
    capabilities: impl IntoIterator<Item = &'a OperationCapability>,
    operation: Option<&str>,
) -> PyResult<Py<PyTuple>> {
    let items = capabilities
        .into_iter()
        .filter(|c| operation.is_none_or(|name| c.operation() == name))
        .map(|c| capability_object(py, class, c))
        .collect::<PyResult<Vec<_>>>()?;
    Ok(PyTuple::new(py, items)?.unbind())
}

fn class_arg(class: &Bound<'_, PyAny>, what: &str) -> PyResult<CarrierClass> {
    core_class_of(class, what)
}

/// The class a query is about, or `None` for a class that is no concrete Carrier
/// implementation (it declares nothing); an argument that is not a class is a `TypeError`.
fn query_class(class: &Bound<'_, PyAny>, what: &str) -> PyResult<Option<CarrierClass>> {
    let py = class.py();
    let Ok(python_class) = class.cast::<PyType>() else {
        return class_arg(class, what).map(Some);
    };
    let base = py.get_type::<crate::carrier::PyCarrier>();
    let dependent_base = py.get_type::<crate::composite::PyDependentCarrier>();
    if !python_class.is_subclass(&base)?
        || python_class.is(&base)
        || python_class.is(&dependent_base)
    {
        return Ok(None);
    }
    class_arg(class, what).map(Some)
}

/// The reason a class that is no Carrier implementation gives for any plan.
fn nothing_declared(class: &Bound<'_, PyAny>, plan: &OperationPlan) -> String {
    let name = class
        .getattr("__name__")
        .and_then(|n| n.extract::<String>())
        .unwrap_or_else(|_| type_name(class));
    format!(
        "{name} declares no operation-plan capability for '{}'",
        plan.operation()
    )
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
    if let Ok(python_class) = carrier_class.cast::<PyType>() {
        let base = py.get_type::<crate::carrier::PyCarrier>();
        if python_class.is(&base) {
            return Err(PyTypeError::new_err(
                "register_operation_capabilities: capabilities cannot be declared for the \
                 Carrier base class; declare them for an exact Carrier implementation",
            ));
        }
        if !python_class.is_subclass(&base)? {
            return Err(PyTypeError::new_err(format!(
                "register_operation_capabilities: {} is not a Carrier implementation",
                python_class.name()?
            )));
        }
    }
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
    crate::finalization::detach(py, || core_register(class, capabilities)).py()?;
    let objects = items
        .iter()
        .filter_map(|item| item.cast_into::<PyOperationCapability>().ok())
        .map(Bound::unbind)
        .collect();
    DECLARED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(class, objects);
    Ok(())
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
    let Some(class) = query_class(
        carrier_class,
        "capabilities_for_carrier_class carrier_class",
    )?
    else {
        return Ok(PyTuple::empty(py).unbind());
    };
    let capabilities = crate::finalization::detach(py, || core_capabilities(class));
    class_capability_tuple(py, class, capabilities.iter(), operation)
}

/// `matching_capability(carrier_class, plan)`: the capability authorizing `plan`, or `None`.
#[pyfunction]
pub fn matching_capability(
    py: Python<'_>,
    carrier_class: &Bound<'_, PyAny>,
    plan: &Bound<'_, PyAny>,
) -> PyResult<Option<Py<PyOperationCapability>>> {
    let plan = plan_arg(plan, "matching_capability plan")?;
    let Some(class) = query_class(carrier_class, "matching_capability carrier_class")? else {
        return Ok(None);
    };
    crate::finalization::detach(py, || core_matching(class, &plan))
        .map(|inner| capability_object(py, class, &inner))
        .transpose()
}

/// `supports_operation_plan(carrier_class, plan)`: whether the class executes exactly `plan`.
#[pyfunction]
pub fn supports_operation_plan(
    py: Python<'_>,
    carrier_class: &Bound<'_, PyAny>,
    plan: &Bound<'_, PyAny>,
) -> PyResult<bool> {
    let plan = plan_arg(plan, "supports_operation_plan plan")?;
    let Some(class) = query_class(carrier_class, "supports_operation_plan carrier_class")? else {
        return Ok(false);
    };
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
    let plan = plan_arg(plan, "unsupported_plan_reason plan")?;
    let Some(class) = query_class(carrier_class, "unsupported_plan_reason carrier_class")? else {
        return Ok(Some(nothing_declared(carrier_class, &plan)));
    };
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
    let plan = plan_arg(plan, "require_capability plan")?;
    let Some(class) = query_class(carrier_class, "require_capability carrier_class")? else {
        return Err(strideweave::Error::UnsupportedOperationPlan(
            strideweave::UnsupportedOperationPlan::new(
                plan.operation(),
                [nothing_declared(carrier_class, &plan)],
            ),
        ))
        .py();
    };
    let inner = crate::finalization::detach(py, || core_require(class, &plan)).py()?;
    capability_object(py, class, &inner)
}
