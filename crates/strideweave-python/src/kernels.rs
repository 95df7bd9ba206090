//! Kernels written in Python: `KernelExecutionInterface` (subclassable; identity = exact type
//! and version), `KernelPattern`, `PreparedKernel`, `KernelProvider`, `KernelPack` and
//! `register_kernel_pack`, each over the core's record of the same name.
//!
//! Every Python callback runs with the GIL taken back for its duration; the core runs with
//! it released. An exception a callback raises is parked and re-raised as the same object
//! when the error leaves the core (crate::callback_error).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use pyo3::exceptions::{PyAttributeError, PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyString, PyTuple, PyType};
use strideweave::carriers::extension::{
    register_kernel_pack as core_register_pack, ExecutionInterface, InterfaceHandle, KernelPack,
    KernelPattern, KernelProvider, Preparation, PreparedKernel, ProviderResult,
};
use strideweave::operation::ResolvedInvocation;
use strideweave::Error;

use crate::callback_error::park;
use crate::convert::type_name;
use crate::errors::IntoPyResult;
use crate::invocation::{expect_capability, wrap_invocation, PyOperationDefinition};
use crate::prepared::{accept, expect_callable, materialize, non_empty_str, PyUnsupported};

/// The seed's `KernelExecutionInterface(version)`: the immutable compatibility base of a
/// carrier's execution context. Subclass it to add device, stream or workspace facilities;
/// the public identity is always `(type(interface), interface.version)`.
///
/// This native class is the base of `strideweave.KernelExecutionInterface`, the package's
/// Python subclass, which refuses attribute changes once the interface is sealed (its
/// `__setattr__` asks [`_check_attribute_change`](Self::_check_attribute_change)). The
/// refusal lives at the Python level so that a subclass may still set its own fields with
/// `object.__setattr__` (CPython refuses that call past a native `__setattr__`). A subclass
/// sets its own attributes in its `__init__` and calls `super().__init__(version)`; once a
/// `KernelProvider` or `KernelPack` holds the interface, no attribute can be set or deleted
/// through assignment, and its identity is the one it had then.
#[pyclass(
    name = "KernelExecutionInterface",
    module = "strideweave._native",
    subclass,
    frozen
)]
pub struct PyKernelExecutionInterface {
    version: OnceLock<String>,
    sealed: AtomicBool,
    /// The exact type when the interface was sealed: its identity from then on.
    sealed_type: OnceLock<Py<PyType>>,
}

#[pymethods]
impl PyKernelExecutionInterface {
    #[new]
    #[classmethod]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn py_new(
        cls: &Bound<'_, PyType>,
        _args: &Bound<'_, PyTuple>,
        _kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        if cls.is(cls.py().get_type::<PyKernelExecutionInterface>()) {
            return Err(PyTypeError::new_err(
                "strideweave._native.KernelExecutionInterface is the native base: construct \
                 strideweave.KernelExecutionInterface or a subclass of it",
            ));
        }
        Ok(PyKernelExecutionInterface {
            version: OnceLock::new(),
            sealed: AtomicBool::new(false),
            sealed_type: OnceLock::new(),
        })
    }

    fn __init__(&self, version: &Bound<'_, PyAny>) -> PyResult<()> {
        let version = non_empty_str(version, "KernelExecutionInterface version")?;
        if self.version.set(version).is_err() {
            return Err(PyTypeError::new_err(
                "KernelExecutionInterface version is immutable: the interface was already \
                 initialized",
            ));
        }
        Ok(())
    }

    /// The interface version (the second half of the identity).
    #[getter]
    fn version(&self) -> PyResult<String> {
        self.checked_version().map(str::to_owned)
    }

    /// The compatibility identity `(type(interface), interface.version)`.
    #[getter]
    fn compatibility_identity<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let version = slf.get().checked_version()?.to_owned();
        PyTuple::new(
            slf.py(),
            [
                slf.get().identity_type(slf).into_any(),
                PyString::new(slf.py(), &version).into_any(),
            ],
        )
    }

    /// Refuses a change of attribute `name` (an `AttributeError`) when it is the version or
    /// the interface is sealed: what the package class's `__setattr__` and `__delattr__` ask
    /// before they change anything.
    fn _check_attribute_change(slf: &Bound<'_, Self>, name: &Bound<'_, PyAny>) -> PyResult<()> {
        slf.get().check_unsealed(slf, name)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        Ok(format!(
            "{}(version={:?})",
            slf.get_type().name()?,
            slf.get()
                .version
                .get()
                .map(String::as_str)
                .unwrap_or("<uninitialized>")
        ))
    }
}

impl PyKernelExecutionInterface {
    /// The type of the identity: the exact type at sealing, the current one before.
    fn identity_type<'py>(&self, slf: &Bound<'py, Self>) -> Bound<'py, PyType> {
        match self.sealed_type.get() {
            Some(sealed) => sealed.bind(slf.py()).clone(),
            None => slf.get_type(),
        }
    }

    fn checked_version(&self) -> PyResult<&str> {
        self.version.get().map(String::as_str).ok_or_else(|| {
            PyTypeError::new_err(
                "this KernelExecutionInterface was never initialized: a subclass's __init__ \
                 must call super().__init__(version)",
            )
        })
    }

    fn check_unsealed(&self, slf: &Bound<'_, Self>, name: &Bound<'_, PyAny>) -> PyResult<()> {
        if name
            .cast::<PyString>()
            .is_ok_and(|n| n.to_cow().is_ok_and(|n| n == "version"))
        {
            return Err(PyAttributeError::new_err(
                "KernelExecutionInterface version is immutable (read-only)",
            ));
        }
        if self.sealed.load(Ordering::Acquire) {
            return Err(PyAttributeError::new_err(format!(
                "{} is immutable: a KernelProvider or KernelPack holds it",
                slf.get_type().name()?
            )));
        }
        Ok(())
    }
}

/// The core execution interface of a Python one: its version and the Python object (which
/// patterns receive, and whose exact type is half of the identity).
pub struct PythonInterface {
    version: String,
    pub(crate) object: Py<PyAny>,
}

impl ExecutionInterface for PythonInterface {
    fn version(&self) -> &str {
        &self.version
    }
}

/// The core handle of a Python interface argument, sealing the interface; `what` names the
/// field.
fn interface_handle(object: &Bound<'_, PyAny>, what: &str) -> PyResult<InterfaceHandle> {
    let interface = object.cast::<PyKernelExecutionInterface>().map_err(|_| {
        PyTypeError::new_err(format!(
            "{what} must be a KernelExecutionInterface, got {}",
            type_name(object)
        ))
    })?;
    let version = interface.get().checked_version()?.to_owned();
    let _ = interface
        .get()
        .sealed_type
        .set(interface.get_type().unbind());
    interface.get().sealed.store(true, Ordering::Release);
    InterfaceHandle::new(PythonInterface {
        version,
        object: object.clone().unbind(),
    })
    .py()
}

/// The Python interface object behind a core handle.
fn interface_object(py: Python<'_>, handle: &InterfaceHandle) -> strideweave::Result<Py<PyAny>> {
    handle
        .downcast_ref::<PythonInterface>()
        .map(|interface| interface.object.clone_ref(py))
        .ok_or_else(|| {
            Error::Type(format!(
                "the execution interface {} is not a Python KernelExecutionInterface",
                handle.identity()
            ))
        })
}

/// The identity `(type, version)` of a Python interface, for comparisons and messages.
fn identity_of<'py>(interface: &Bound<'py, PyAny>) -> Option<(Bound<'py, PyType>, String)> {
    let held = interface.cast::<PyKernelExecutionInterface>().ok()?;
    let version = held.get().version.get()?.clone();
    Some((held.get().identity_type(held), version))
}

/// Whether two Python interfaces have one identity: the same exact type and version.
fn same_identity(a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> bool {
    match (identity_of(a), identity_of(b)) {
        (Some((ta, va)), Some((tb, vb))) => ta.is(&tb) && va == vb,
        _ => false,
    }
}

/// `(Type, 'version')` for messages.
fn describe_identity(interface: &Bound<'_, PyAny>) -> String {
    match identity_of(interface) {
        Some((class, version)) => format!(
            "({}, '{version}')",
            class.name().map(|n| n.to_string()).unwrap_or_default()
        ),
        None => type_name(interface),
    }
}

/// The seed's `PreparedKernel(interface, submit)`: kernel work prepared for one invocation,
/// bound to the execution interface it submits through. The framework invokes `submit` at
/// most once; it returns a `ProviderResult` or a `ProviderCompletion` of one.
#[pyclass(name = "PreparedKernel", module = "strideweave", frozen)]
pub struct PyPreparedKernel {
    #[pyo3(get)]
    interface: Py<PyAny>,
    #[pyo3(get)]
    submit: Py<PyAny>,
    submitted: AtomicBool,
}

#[pymethods]
impl PyPreparedKernel {
    /// Fields are immutable: assignment is a `dataclasses.FrozenInstanceError`.
    fn __setattr__(&self, py: Python<'_>, name: &str, _value: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    /// Fields cannot be deleted either: a `dataclasses.FrozenInstanceError`.
    fn __delattr__(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    #[new]
    fn py_new(interface: &Bound<'_, PyAny>, submit: &Bound<'_, PyAny>) -> PyResult<Self> {
        if interface.cast::<PyKernelExecutionInterface>().is_err() {
            return Err(PyTypeError::new_err(format!(
                "PreparedKernel interface must be a KernelExecutionInterface, got {}",
                type_name(interface)
            )));
        }
        Ok(PyPreparedKernel {
            interface: interface.clone().unbind(),
            submit: expect_callable(submit, "PreparedKernel submit")?,
            submitted: AtomicBool::new(false),
        })
    }
}

/// Takes the submission of a prepared record once; a second submission of the same object
/// is a contract error (each preparation must return a fresh record).
pub fn take_submission(flag: &AtomicBool, record: &str) -> strideweave::Result<()> {
    if flag.swap(true, Ordering::AcqRel) {
        return Err(Error::ProviderContract(format!(
            "this {record} was already submitted: the framework submits a prepared record at \
             most once, so each preparation must return a fresh one"
        )));
    }
    Ok(())
}

/// The seed's `KernelPattern(operation, plans, kernel_id, prepare, preference=0)`: one
/// executable candidate. `prepare(invocation, interface)` returns a `PreparedKernel`, or
/// `Unsupported` to let the next matching candidate prepare.
#[pyclass(name = "KernelPattern", module = "strideweave", frozen)]
pub struct PyKernelPattern {
    #[pyo3(get)]
    operation: Py<PyOperationDefinition>,
    #[pyo3(get)]
    plans: Py<PyTuple>,
    #[pyo3(get)]
    kernel_id: String,
    #[pyo3(get)]
    prepare: Py<PyAny>,
    #[pyo3(get)]
    preference: i64,
    pub(crate) core: KernelPattern,
}

#[pymethods]
impl PyKernelPattern {
    /// Fields are immutable: assignment is a `dataclasses.FrozenInstanceError`.
    fn __setattr__(&self, py: Python<'_>, name: &str, _value: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    /// Fields cannot be deleted either: a `dataclasses.FrozenInstanceError`.
    fn __delattr__(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    #[new]
    #[pyo3(signature = (operation, plans, kernel_id, prepare, preference=None))]
    fn py_new(
        operation: &Bound<'_, PyAny>,
        plans: &Bound<'_, PyAny>,
        kernel_id: &Bound<'_, PyAny>,
        prepare: &Bound<'_, PyAny>,
        preference: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let definition = operation.cast::<PyOperationDefinition>().map_err(|_| {
            PyTypeError::new_err(format!(
                "KernelPattern operation must be an OperationDefinition, got {}",
                type_name(operation)
            ))
        })?;
        let plans = materialize(plans, "KernelPattern plans")?;
        let capabilities = plans
            .iter()
            .map(|plan| expect_capability(&plan, "KernelPattern plans"))
            .collect::<PyResult<Vec<_>>>()?;
        let kernel_id = kernel_id
            .cast::<PyString>()
            .map_err(|_| {
                PyTypeError::new_err(format!(
                    "KernelPattern kernel_id must be a str, got {}",
                    type_name(kernel_id)
                ))
            })?
            .to_cow()?
            .into_owned();
        let prepare = expect_callable(prepare, "KernelPattern prepare")?;
        let preference = match preference {
            None => 0,
            Some(value) => preference_of(value)?,
        };
        let core = KernelPattern::new(
            &definition.get().inner,
            capabilities,
            &kernel_id,
            pattern_prepare(kernel_id.clone(), prepare.clone_ref(operation.py())),
            preference,
        )
        .py()?;
        Ok(PyKernelPattern {
            operation: definition.clone().unbind(),
            plans: plans.unbind(),
            kernel_id,
            prepare,
            preference,
            core,
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "KernelPattern(kernel_id={:?}, preference={})",
            self.kernel_id, self.preference
        )
    }
}

fn preference_of(value: &Bound<'_, PyAny>) -> PyResult<i64> {
    if value.is_instance_of::<PyBool>() || !value.is_instance_of::<PyInt>() {
        return Err(PyTypeError::new_err(format!(
            "KernelPattern preference must be an int other than bool, got {}",
            type_name(value)
        )));
    }
    value.extract::<i64>().map_err(|_| {
        PyOverflowError::new_err("KernelPattern preference must fit in a signed 64-bit int")
    })
}

/// The core preparation callback of a Python pattern.
fn pattern_prepare(
    kernel_id: String,
    prepare: Py<PyAny>,
) -> impl Fn(&ResolvedInvocation, &InterfaceHandle) -> strideweave::Result<Preparation> + Send + Sync
{
    move |invocation, handle| {
        crate::finalization::attach(|py| {
            let label = format!("KernelPattern '{kernel_id}' prepare");
            let interface = interface_object(py, handle)?;
            let invocation = wrap_invocation(py, invocation).map_err(|e| park(py, &label, e))?;
            let answer = prepare
                .bind(py)
                .call1((invocation, interface.clone_ref(py)))
                .map_err(|e| park(py, &label, e))?;
            if let Ok(rejection) = answer.cast::<PyUnsupported>() {
                return Ok(Preparation::Unsupported(rejection.get().to_core()));
            }
            let Ok(record) = answer.cast::<PyPreparedKernel>() else {
                return Err(Error::Type(format!(
                    "{label} must return a PreparedKernel or Unsupported, got {}",
                    type_name(&answer)
                )));
            };
            let record_interface = record.get().interface.bind(py);
            let provider_interface = interface.bind(py);
            if !record_interface.is(provider_interface)
                && !same_identity(record_interface, provider_interface)
            {
                return Err(Error::Type(format!(
                    "kernel '{kernel_id}' prepared work for interface {}, but the provider's \
                     interface is {}",
                    describe_identity(record_interface),
                    describe_identity(provider_interface)
                )));
            }
            let record = record.clone().unbind();
            let kernel_id = kernel_id.clone();
            Ok(Preparation::Kernel(PreparedKernel::new(
                handle.clone(),
                move || {
                    crate::finalization::attach(|py| {
                        let held = record.bind(py);
                        let record = held.get();
                        take_submission(&record.submitted, "PreparedKernel")?;
                        let label = format!("PreparedKernel submit of kernel '{kernel_id}'");
                        let returned = record
                            .submit
                            .bind(py)
                            .call0()
                            .map_err(|e| park(py, &label, e))?;
                        accept::<ProviderResult>(
                            py,
                            returned,
                            &label,
                            Some(held.clone().into_any().unbind()),
                        )
                    })
                },
            )))
        })
    }
}

/// Materializes patterns once into a tuple of `KernelPattern` values and their core
/// patterns; `what` names the field.
fn patterns_of<'py>(
    patterns: &Bound<'py, PyAny>,
    what: &str,
) -> PyResult<(Bound<'py, PyTuple>, Vec<KernelPattern>)> {
    let items = materialize(patterns, what)?;
    let cores = items
        .iter()
        .map(|item| {
            item.cast::<PyKernelPattern>()
                .map(|p| p.get().core.clone())
                .map_err(|_| {
                    PyTypeError::new_err(format!(
                        "{what} must hold KernelPattern values, got {}",
                        type_name(&item)
                    ))
                })
        })
        .collect::<PyResult<Vec<_>>>()?;
    Ok((items, cores))
}

/// The seed's `KernelProvider(interface, patterns=())`: the execution part of an independent
/// definition, one interface and its built-in patterns.
#[pyclass(name = "KernelProvider", module = "strideweave", frozen)]
pub struct PyKernelProvider {
    #[pyo3(get)]
    interface: Py<PyAny>,
    #[pyo3(get)]
    patterns: Py<PyTuple>,
    pub(crate) core: KernelProvider,
}

#[pymethods]
impl PyKernelProvider {
    /// Fields are immutable: assignment is a `dataclasses.FrozenInstanceError`.
    fn __setattr__(&self, py: Python<'_>, name: &str, _value: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    /// Fields cannot be deleted either: a `dataclasses.FrozenInstanceError`.
    fn __delattr__(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    #[new]
    #[pyo3(signature = (interface, patterns=None))]
    fn py_new(interface: &Bound<'_, PyAny>, patterns: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let py = interface.py();
        let (items, cores) = match patterns {
            None => (PyTuple::empty(py), Vec::new()),
            Some(patterns) => patterns_of(patterns, "KernelProvider patterns")?,
        };
        let handle = interface_handle(interface, "KernelProvider interface")?;
        let core = KernelProvider::new(handle, cores).py()?;
        Ok(PyKernelProvider {
            interface: interface.clone().unbind(),
            patterns: items.unbind(),
            core,
        })
    }
}

/// The seed's `KernelPack(namespace, version, carrier_class, execution_interface,
/// patterns)`: kernel patterns for exactly one independent carrier class, attached by
/// `register_kernel_pack` before the class is first observed.
#[pyclass(name = "KernelPack", module = "strideweave", frozen)]
pub struct PyKernelPack {
    #[pyo3(get)]
    namespace: String,
    #[pyo3(get)]
    version: String,
    #[pyo3(get)]
    carrier_class: Py<PyType>,
    #[pyo3(get)]
    execution_interface: Py<PyAny>,
    #[pyo3(get)]
    patterns: Py<PyTuple>,
    cores: Vec<KernelPattern>,
    handle: InterfaceHandle,
}

#[pymethods]
impl PyKernelPack {
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
        namespace: &Bound<'_, PyAny>,
        version: &Bound<'_, PyAny>,
        carrier_class: &Bound<'_, PyAny>,
        execution_interface: &Bound<'_, PyAny>,
        patterns: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        let namespace = non_empty_str(namespace, "KernelPack namespace")?;
        let version = non_empty_str(version, "KernelPack version")?;
        let class = carrier_class.cast::<PyType>().map_err(|_| {
            PyTypeError::new_err(format!(
                "KernelPack carrier_class must be a Carrier class, got {}",
                type_name(carrier_class)
            ))
        })?;
        let (items, cores) = patterns_of(patterns, "KernelPack patterns")?;
        if cores.is_empty() {
            return Err(PyValueError::new_err(format!(
                "KernelPack '{namespace}' {version} patterns must not be empty"
            )));
        }
        let mut seen = std::collections::HashSet::new();
        if let Some(id) = cores
            .iter()
            .map(KernelPattern::kernel_id)
            .find(|id| !seen.insert(*id))
        {
            return Err(PyValueError::new_err(format!(
                "KernelPack '{namespace}' {version} has a duplicate kernel_id '{id}'"
            )));
        }
        let handle = interface_handle(execution_interface, "KernelPack execution_interface")?;
        Ok(PyKernelPack {
            namespace,
            version,
            carrier_class: class.clone().unbind(),
            execution_interface: execution_interface.clone().unbind(),
            patterns: items.unbind(),
            cores,
            handle,
        })
    }
}

/// Validates `pack` and attaches it to its exact target class; returns `None`.
///
/// TypeError: not a `KernelPack`; a target that is `Carrier`, an unrelated class, a shipped
/// class, a `DependentCarrier` class, a class without a definition, a storage-only class, or
/// an execution interface whose exact type or version differs from the provider's; a class
/// already observed. ValueError: a `(namespace, version)` already registered on the class or
/// a kernel id already in its execution set. A rejected pack contributes nothing.
#[pyfunction]
pub fn register_kernel_pack(py: Python<'_>, pack: &Bound<'_, PyAny>) -> PyResult<()> {
    let pack = pack.cast::<PyKernelPack>().map_err(|_| {
        PyTypeError::new_err(format!(
            "register_kernel_pack pack must be a KernelPack, got {}",
            type_name(pack)
        ))
    })?;
    let pack = pack.get();
    let label = format!("KernelPack '{}' {}", pack.namespace, pack.version);
    let class = pack.carrier_class.bind(py);
    let core_class = crate::authoring::pack_target(class, &label)?;
    if let Some(definition) = strideweave::carriers::extension::carrier_definition(core_class) {
        if let Some(provider) = definition.kernels() {
            let provider_interface = interface_object(py, provider.interface()).py()?;
            let pack_interface = pack.execution_interface.bind(py);
            if !same_identity(pack_interface, provider_interface.bind(py)) {
                return Err(PyTypeError::new_err(format!(
                    "{label}: execution interface {} does not match the {} provider's {}",
                    describe_identity(pack_interface),
                    class.name()?,
                    describe_identity(provider_interface.bind(py))
                )));
            }
        }
    }
    let core = KernelPack::new(
        &pack.namespace,
        &pack.version,
        core_class,
        pack.handle.clone(),
        pack.cores.iter().cloned(),
    )
    .py()?;
    crate::finalization::detach(py, || core_register_pack(core)).py()
}
