//! Dependent carriers written in Python: the `DependentCarrier` base, `CompositeProvider`
//! and `PreparedComposite`, over the core's composite provider.
//!
//! A `DependentCarrier` subclass gets a dependent core class: its definition supplies a
//! `CompositeProvider` (and no `KernelProvider`), whose callbacks receive the exact Python
//! instance and derive reach and work through the instance's dependency carriers.

use std::sync::atomic::AtomicBool;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple, PyType};
use pyo3::PyClassInitializer;
use strideweave::carriers::extension::{
    CompositePreparation, CompositeProvider, PreparedComposite, ProviderResult,
};
use strideweave::operation::{OperationCapability, ResolvedInvocation};
use strideweave::{Carrier, CarrierClass, Error};

use crate::callback_error::park;
use crate::carrier::{PyCarrier, PyOperationCapability};
use crate::convert::type_name;
use crate::invocation::wrap_invocation;
use crate::kernels::take_submission;
use crate::prepared::{accept, expect_callable, PyUnsupported};

/// The base of dependent carrier classes: a carrier whose storage and execution are
/// composed from other carrier instances (its dependencies), configured on the instance
/// before `super().__init__(slots, dtype=...)` runs.
#[pyclass(
    name = "DependentCarrier",
    module = "strideweave",
    extends = PyCarrier,
    subclass,
    frozen
)]
pub struct PyDependentCarrier;

#[pymethods]
impl PyDependentCarrier {
    #[new]
    #[classmethod]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn py_new(
        cls: &Bound<'_, PyType>,
        _args: &Bound<'_, PyTuple>,
        _kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<PyClassInitializer<Self>> {
        if cls.is(cls.py().get_type::<PyDependentCarrier>()) {
            return Err(PyTypeError::new_err(
                "DependentCarrier cannot be constructed directly: subclass it and register a \
                 definition with a CompositeProvider",
            ));
        }
        Ok(PyClassInitializer::from(PyCarrier::unconstructed()).add_subclass(PyDependentCarrier))
    }

    /// The capabilities this instance executes, for a definition-free dependent class to
    /// implement: called once, by `_finalize_dependent_capabilities()`. The base's is
    /// unimplemented (`NotImplementedError` naming the class).
    fn _generate_operation_capabilities(slf: &Bound<'_, Self>) -> PyResult<Py<PyAny>> {
        Err(crate::legacy_dependent::generate_unimplemented(
            slf.as_any(),
        ))
    }

    /// Freezes a definition-free instance's generated capabilities, once, as the last step of
    /// its construction; the instance answers capability queries (and, when its class
    /// defines storage hooks, holds values) from then on. A definition-backed instance
    /// finalized at construction and has nothing left to do.
    fn _finalize_dependent_capabilities(slf: &Bound<'_, Self>) -> PyResult<()> {
        crate::legacy_dependent::finalize(slf.as_super())
    }
}

/// The Python instance of a dependent carrier, for its composite callbacks.
fn instance(py: Python<'_>, carrier: &Carrier) -> strideweave::Result<Py<PyAny>> {
    crate::authoring::instance_of(py, carrier).ok_or_else(|| {
        Error::Type(format!(
            "the {} carrier has no Python instance for its composite provider",
            carrier.class()
        ))
    })
}

/// The seed's `CompositeProvider(capabilities, result_carriers, prepare)`: the execution
/// part of a dependent definition.
///
/// - `capabilities(carrier)` returns the instance's complete iterable of
///   `OperationCapability` values, read once at construction;
/// - `result_carriers(carrier, invocation)` returns a tuple of one exact Carrier class per
///   result, checked before `prepare` runs;
/// - `prepare(carrier, invocation)` returns a `PreparedComposite` or `Unsupported`.
#[pyclass(name = "CompositeProvider", module = "strideweave", frozen)]
pub struct PyCompositeProvider {
    #[pyo3(get)]
    capabilities: Py<PyAny>,
    #[pyo3(get)]
    result_carriers: Py<PyAny>,
    #[pyo3(get)]
    prepare: Py<PyAny>,
    pub(crate) core: CompositeProvider,
}

#[pymethods]
impl PyCompositeProvider {
    /// Fields are immutable: assignment is a `dataclasses.FrozenInstanceError`.
    fn __setattr__(&self, py: Python<'_>, name: &str, _value: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    /// Fields cannot be deleted either: a `dataclasses.FrozenInstanceError`.
    fn __delattr__(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    #[new]
    fn py_new(
        py: Python<'_>,
        capabilities: &Bound<'_, PyAny>,
        result_carriers: &Bound<'_, PyAny>,
        prepare: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        let capabilities = expect_callable(capabilities, "CompositeProvider capabilities")?;
        let result_carriers =
            expect_callable(result_carriers, "CompositeProvider result_carriers")?;
        let prepare = expect_callable(prepare, "CompositeProvider prepare")?;
        let core = CompositeProvider::new(
            capabilities_callback(capabilities.clone_ref(py)),
            result_carriers_callback(result_carriers.clone_ref(py)),
            prepare_callback(prepare.clone_ref(py)),
        );
        Ok(PyCompositeProvider {
            capabilities,
            result_carriers,
            prepare,
            core,
        })
    }
}

fn capabilities_callback(
    callback: Py<PyAny>,
) -> impl Fn(&Carrier) -> strideweave::Result<Vec<OperationCapability>> + Send + Sync {
    move |carrier| {
        crate::finalization::attach(|py| {
            let label = "CompositeProvider capabilities";
            let answer = callback
                .bind(py)
                .call1((instance(py, carrier)?,))
                .map_err(|e| park(py, label, e))?;
            let iterator = answer.try_iter().map_err(|_| {
                Error::Type(format!(
                    "{label} must return an iterable of OperationCapability values, got {}",
                    type_name(&answer)
                ))
            })?;
            let mut capabilities = Vec::new();
            for item in iterator {
                let item = item.map_err(|e| park(py, label, e))?;
                let capability = item.cast::<PyOperationCapability>().map_err(|_| {
                    Error::Type(format!(
                        "{label} must yield OperationCapability values, got {}",
                        type_name(&item)
                    ))
                })?;
                capabilities.push(capability.get().inner.clone());
            }
            Ok(capabilities)
        })
    }
}

fn result_carriers_callback(
    callback: Py<PyAny>,
) -> impl Fn(&Carrier, &ResolvedInvocation) -> strideweave::Result<Vec<CarrierClass>> + Send + Sync
{
    move |carrier, invocation| {
        crate::finalization::attach(|py| {
            let label = "CompositeProvider result_carriers";
            let wrapped = wrap_invocation(py, invocation).map_err(|e| park(py, label, e))?;
            let answer = callback
                .bind(py)
                .call1((instance(py, carrier)?, wrapped))
                .map_err(|e| park(py, label, e))?;
            let classes = answer.cast::<PyTuple>().map_err(|_| {
                Error::Type(format!(
                    "{label} must return a tuple of Carrier classes, got {}",
                    type_name(&answer)
                ))
            })?;
            classes
                .iter()
                .map(|class| {
                    crate::authoring::core_class_of(
                        &class,
                        "each of CompositeProvider result_carriers",
                    )
                    .map_err(|e| park(py, label, e))
                })
                .collect()
        })
    }
}

fn prepare_callback(
    callback: Py<PyAny>,
) -> impl Fn(&Carrier, &ResolvedInvocation) -> strideweave::Result<CompositePreparation> + Send + Sync
{
    move |carrier, invocation| {
        crate::finalization::attach(|py| {
            let label = "CompositeProvider prepare";
            let wrapped = wrap_invocation(py, invocation).map_err(|e| park(py, label, e))?;
            let answer = callback
                .bind(py)
                .call1((instance(py, carrier)?, wrapped))
                .map_err(|e| park(py, label, e))?;
            if let Ok(rejection) = answer.cast::<PyUnsupported>() {
                return Ok(CompositePreparation::Unsupported(rejection.get().to_core()));
            }
            let Ok(record) = answer.cast::<PyPreparedComposite>() else {
                return Err(Error::Type(format!(
                    "{label} must return a PreparedComposite or Unsupported, got {}",
                    type_name(&answer)
                )));
            };
            let record = record.clone().unbind();
            Ok(CompositePreparation::Composite(PreparedComposite::new(
                move || {
                    crate::finalization::attach(|py| {
                        let held = record.bind(py);
                        let record = held.get();
                        take_submission(&record.submitted, "PreparedComposite")?;
                        let label = "PreparedComposite submit";
                        let returned = record
                            .submit
                            .bind(py)
                            .call0()
                            .map_err(|e| park(py, label, e))?;
                        accept::<ProviderResult>(
                            py,
                            returned,
                            label,
                            Some(held.clone().into_any().unbind()),
                        )
                    })
                },
            )))
        })
    }
}

/// The seed's `PreparedComposite(submit)`: composite work prepared for one invocation,
/// submitted at most once; `submit()` returns a `ProviderResult` or a `ProviderCompletion`
/// of one.
#[pyclass(name = "PreparedComposite", module = "strideweave", frozen)]
pub struct PyPreparedComposite {
    #[pyo3(get)]
    submit: Py<PyAny>,
    submitted: AtomicBool,
}

#[pymethods]
impl PyPreparedComposite {
    /// Fields are immutable: assignment is a `dataclasses.FrozenInstanceError`.
    fn __setattr__(&self, py: Python<'_>, name: &str, _value: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    /// Fields cannot be deleted either: a `dataclasses.FrozenInstanceError`.
    fn __delattr__(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    #[new]
    fn py_new(submit: &Bound<'_, PyAny>) -> PyResult<Self> {
        Ok(PyPreparedComposite {
            submit: expect_callable(submit, "PreparedComposite submit")?,
            submitted: AtomicBool::new(false),
        })
    }
}
