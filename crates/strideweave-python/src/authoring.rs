//! Carriers written in Python: the `StorageProvider` and `CarrierDefinition` records,
//! `register_carrier_definition`, and the construction of a registered Python class.
//!
//! A Python carrier class registered with a definition gets a core class of its own
//! (`CarrierClass::mint`, dependent for a `DependentCarrier` subclass); the core's provider
//! state of each carrier is the Python instance itself, so every storage and composite
//! callback receives that exact instance. Registration assembles the core definition from
//! the Python records: storage, kernel provider (crate::kernels), transfer routes
//! (crate::routes), composite provider (crate::composite) and facets.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyTuple, PyType};
use strideweave::carrier::ClassKind;
use strideweave::carriers::extension::{
    register_carrier_definition as core_register, CarrierDefinition, CarrierFacet, FreshRequest,
    StorageProvider,
};
use strideweave::{Carrier, CarrierClass, DType, Error, Value};

use crate::callback_error::park;
use crate::carrier::{PyCarrier, PyCarrierFacet};
use crate::composite::{PyCompositeProvider, PyDependentCarrier};
use crate::convert::{from_value, to_value, type_name};
use crate::dtype::PyDType;
use crate::errors::IntoPyResult;
use crate::instance_link::InstanceLink;
use crate::kernels::PyKernelProvider;
use crate::prepared::materialize;
use crate::routes::PyTransferRoute;

/// The provider state of a carrier of a Python class: the link to its Python instance,
/// shared with the instance's own object (see crate::instance_link).
pub struct PyState {
    pub(crate) link: Arc<InstanceLink>,
}

impl PyState {
    /// The state of a carrier whose Python instance is `instance`, linked to it.
    fn linking(instance: &Bound<'_, PyAny>) -> PyResult<PyState> {
        let link = InstanceLink::new(instance.clone().unbind());
        instance.cast::<PyCarrier>()?.get().set_link(&link);
        Ok(PyState { link })
    }
}

/// The core class minted for each Python carrier class, by the class object's address (the
/// class object is kept alive here, so the address is never reused).
static CLASSES: LazyLock<Mutex<ClassTable>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// Python carrier class object address → (the class, its core class).
type ClassTable = HashMap<usize, (Py<PyType>, CarrierClass)>;

/// The core class of Python class `class`, minted on first use.
pub(crate) fn class_of(class: &Bound<'_, PyType>) -> PyResult<CarrierClass> {
    let key = class.as_ptr() as usize;
    let mut classes = CLASSES.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, core)) = classes.get(&key) {
        return Ok(*core);
    }
    let name = class.qualname()?.to_string();
    let kind = if class.is_subclass(&class.py().get_type::<PyDependentCarrier>())? {
        ClassKind::Dependent
    } else {
        ClassKind::Independent
    };
    let core = CarrierClass::mint(&name, kind);
    classes.insert(key, (class.clone().unbind(), core));
    Ok(core)
}

/// The Python class whose core class is `class`, when it is one minted here.
pub fn python_class(py: Python<'_>, class: CarrierClass) -> Option<Py<PyType>> {
    CLASSES
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .values()
        .find(|(_, core)| *core == class)
        .map(|(python, _)| python.clone_ref(py))
}

/// The core class already minted for `class`, if any.
pub(crate) fn known_class(class: &Bound<'_, PyType>) -> Option<CarrierClass> {
    let key = class.as_ptr() as usize;
    CLASSES
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&key)
        .map(|(_, core)| *core)
}

/// The facets of a Python-defined carrier, by exact Python facet type.
pub struct PythonFacets {
    entries: Vec<(Py<PyType>, Py<PyAny>)>,
}

impl CarrierFacet for PythonFacets {
    fn facet_name(&self) -> &'static str {
        "Python facets"
    }
}

impl PythonFacets {
    /// The facet registered under exactly `facet_type`.
    pub fn find(&self, py: Python<'_>, facet_type: &Bound<'_, PyType>) -> Option<Py<PyAny>> {
        self.entries
            .iter()
            .find(|(class, _)| class.bind(py).is(facet_type))
            .map(|(_, facet)| facet.clone_ref(py))
    }
}

fn callable(object: &Bound<'_, PyAny>, record: &str, field: &str) -> PyResult<Py<PyAny>> {
    if !object.is_callable() {
        return Err(PyTypeError::new_err(format!(
            "{record} {field} must be callable, got {}",
            type_name(object)
        )));
    }
    Ok(object.clone().unbind())
}

/// The seed's `StorageProvider`: six storage callbacks and the elementwise-fallback
/// permission, all immutable.
#[pyclass(name = "StorageProvider", module = "strideweave", frozen)]
pub struct PyStorageProvider {
    #[pyo3(get)]
    supports_dtype: Py<PyAny>,
    #[pyo3(get)]
    physical_size: Py<PyAny>,
    #[pyo3(get)]
    allocate: Py<PyAny>,
    #[pyo3(get)]
    release: Py<PyAny>,
    #[pyo3(get)]
    read: Py<PyAny>,
    #[pyo3(get)]
    write: Py<PyAny>,
    #[pyo3(get)]
    elementwise_fallback: bool,
}

#[pymethods]
impl PyStorageProvider {
    /// Fields are immutable: assignment is a `dataclasses.FrozenInstanceError`.
    fn __setattr__(&self, py: Python<'_>, name: &str, _value: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    /// Fields cannot be deleted either: a `dataclasses.FrozenInstanceError`.
    fn __delattr__(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    #[new]
    #[pyo3(signature = (supports_dtype, physical_size, allocate, release, read, write, elementwise_fallback=None))]
    #[allow(clippy::too_many_arguments)]
    fn py_new(
        supports_dtype: &Bound<'_, PyAny>,
        physical_size: &Bound<'_, PyAny>,
        allocate: &Bound<'_, PyAny>,
        release: &Bound<'_, PyAny>,
        read: &Bound<'_, PyAny>,
        write: &Bound<'_, PyAny>,
        elementwise_fallback: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let record = "StorageProvider";
        let elementwise_fallback = match elementwise_fallback {
            None => false,
            Some(flag) => flag
                .cast::<PyBool>()
                .map_err(|_| {
                    PyTypeError::new_err(format!(
                        "StorageProvider elementwise_fallback must be a bool, got {}",
                        type_name(flag)
                    ))
                })?
                .is_true(),
        };
        Ok(PyStorageProvider {
            supports_dtype: callable(supports_dtype, record, "supports_dtype")?,
            physical_size: callable(physical_size, record, "physical_size")?,
            allocate: callable(allocate, record, "allocate")?,
            release: callable(release, record, "release")?,
            read: callable(read, record, "read")?,
            write: callable(write, record, "write")?,
            elementwise_fallback,
        })
    }
}

/// Calls a storage callback with the carrier instance first; a Python exception becomes the
/// parked core error.
fn call(
    py: Python<'_>,
    name: &str,
    function: &Py<PyAny>,
    args: Bound<'_, PyTuple>,
) -> strideweave::Result<Py<PyAny>> {
    function
        .bind(py)
        .call1(args)
        .map(Bound::unbind)
        .map_err(|error| park(py, &format!("StorageProvider {name}"), error))
}

fn expect_none(py: Python<'_>, name: &str, result: &Py<PyAny>) -> strideweave::Result<()> {
    if result.bind(py).is_none() {
        return Ok(());
    }
    Err(Error::Type(format!(
        "StorageProvider {name} must return None, got {}",
        type_name(result.bind(py))
    )))
}

impl PyStorageProvider {
    /// The core storage provider that calls these callbacks.
    fn to_core(&self, py: Python<'_>) -> StorageProvider {
        let supports = self.supports_dtype.clone_ref(py);
        let size = self.physical_size.clone_ref(py);
        let allocate = self.allocate.clone_ref(py);
        let release = self.release.clone_ref(py);
        let read = self.read.clone_ref(py);
        let write = self.write.clone_ref(py);
        StorageProvider::new_with_fresh_for(
            move |state: &PyState, dtype: DType| {
                crate::finalization::attach(|py| {
                    let dtype =
                        crate::dtype::wrap(py, dtype).map_err(|e| park(py, "supports_dtype", e))?;
                    let args = PyTuple::new(py, [state.link.instance(py)?, dtype.into_any()])
                        .map_err(|e| park(py, "supports_dtype", e))?;
                    let answer = call(py, "supports_dtype", &supports, args)?;
                    answer
                        .bind(py)
                        .cast::<PyBool>()
                        .map(|b| b.is_true())
                        .map_err(|_| {
                            Error::Type(format!(
                                "StorageProvider supports_dtype must return a bool, got {}",
                                type_name(answer.bind(py))
                            ))
                        })
                })
            },
            move |state: &PyState| {
                crate::finalization::attach(|py| {
                    let args = PyTuple::new(py, [state.link.instance(py)?])
                        .map_err(|e| park(py, "physical_size", e))?;
                    let answer = call(py, "physical_size", &size, args)?;
                    let answer = answer.bind(py);
                    if answer.is_instance_of::<PyBool>() || !answer.is_instance_of::<PyInt>() {
                        return Err(Error::Type(format!(
                            "StorageProvider physical_size must return an int, got {}",
                            type_name(answer)
                        )));
                    }
                    answer.extract::<i64>().map_err(|_| {
                        Error::Value(
                            "StorageProvider physical_size returned an int beyond 64 bits"
                                .to_owned(),
                        )
                    })
                })
            },
            move |state: &mut PyState, slots: usize, _dtype: DType| {
                crate::finalization::attach(|py| {
                    let slots = PyInt::new(py, slots).into_any().unbind();
                    let args = PyTuple::new(py, [state.link.instance(py)?, slots])
                        .map_err(|e| park(py, "allocate", e))?;
                    let answer = call(py, "allocate", &allocate, args)?;
                    expect_none(py, "allocate", &answer)
                })
            },
            move |state: &mut PyState| {
                crate::finalization::attach(|py| {
                    let args = PyTuple::new(py, [state.link.instance(py)?])
                        .map_err(|e| park(py, "release", e))?;
                    let answer = call(py, "release", &release, args)?;
                    expect_none(py, "release", &answer)
                })
            },
            move |state: &PyState, index: usize| {
                crate::finalization::attach(|py| {
                    let index = PyInt::new(py, index).into_any().unbind();
                    let args = PyTuple::new(py, [state.link.instance(py)?, index])
                        .map_err(|e| park(py, "read", e))?;
                    let answer = call(py, "read", &read, args)?;
                    to_value(answer.bind(py), "StorageProvider read's result").map_err(|_| {
                        Error::Type(format!(
                            "StorageProvider read must return a bool, int or float, got {}",
                            type_name(answer.bind(py))
                        ))
                    })
                })
            },
            move |state: &mut PyState, index: usize, value: Value| {
                crate::finalization::attach(|py| {
                    let index = PyInt::new(py, index).into_any().unbind();
                    let value = from_value(py, value).map_err(|e| park(py, "write", e))?;
                    let args = PyTuple::new(py, [state.link.instance(py)?, index, value])
                        .map_err(|e| park(py, "write", e))?;
                    let answer = call(py, "write", &write, args)?;
                    expect_none(py, "write", &answer)
                })
            },
            |state: &PyState, request: FreshRequest| {
                crate::finalization::attach(|py| {
                    let prototype = state.link.instance(py)?;
                    fresh_instance(py, prototype.bind(py), request)
                })
            },
        )
        .with_elementwise_fallback(self.elementwise_fallback)
    }
}

/// The name of the optional method through which a Python carrier class configures an
/// instance the framework makes like an existing one (see [`fresh_instance`]).
const CONFIGURE_LIKE: &str = "configure_like";

/// The instance of a carrier the framework makes from `prototype` (a factory: an operation's
/// result, `new_like`, `allocate_like`, a tier's fresh storage): a new object of the
/// prototype's exact class, made by the class's `__new__`, with its configuration set before
/// any storage callback sees it (the seed: "Before the framework first invokes supports_dtype
/// for an instance, that exact instance SHALL have established every definition-required
/// configuration"). The seed does not say where that configuration comes from; this is the
/// rule:
///
/// - a class that defines `configure_like(self, prototype)` gets it called on the fresh object
///   with the prototype; it copies (or derives) the configuration — a device, dependency
///   tiers — and returns `None`; the class's `__init__` does not run, so its signature is the
///   class's own business;
/// - any other class is initialized like a user's instance, `cls(slots, dtype=dtype)` (with
///   `mutable=False` added for an immutable one) running its `__init__`, which must reach
///   `Carrier.__init__` with those arguments (that call constructs nothing here).
///
/// Either way the factory then runs the framework's construction on the instance. Exceptions
/// raised by `__new__`, `configure_like` or `__init__` propagate as themselves, except that an
/// `__init__` which cannot take the factory's arguments at all is a TypeError naming
/// `configure_like` (the refusal is its cause).
fn fresh_instance(
    py: Python<'_>,
    prototype: &Bound<'_, PyAny>,
    request: FreshRequest,
) -> strideweave::Result<PyState> {
    let class = prototype.get_type();
    let name = class
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "carrier".to_owned());
    let fresh = class
        .call_method1("__new__", (class.clone(),))
        .map_err(|e| park(py, &format!("{name}.__new__"), e))?;
    let held = fresh.cast::<PyCarrier>().map_err(|_| {
        Error::Type(format!(
            "{name}.__new__ returned {}, not a {name}",
            type_name(&fresh)
        ))
    })?;
    held.get().expect_fresh(request);
    let configure = class
        .getattr_opt(CONFIGURE_LIKE)
        .map_err(|e| park(py, &format!("{name}.{CONFIGURE_LIKE}"), e))?;
    if configure.is_some() {
        configure_like(py, &name, &fresh, prototype)?;
    } else {
        initialize_like_a_user(py, &name, &fresh, request)?;
    }
    let label = format!("{name} of a carrier the framework makes");
    PyState::linking(&fresh).map_err(|e| park(py, &label, e))
}

/// Calls `fresh.configure_like(prototype)`, which must return `None`.
fn configure_like(
    py: Python<'_>,
    name: &str,
    fresh: &Bound<'_, PyAny>,
    prototype: &Bound<'_, PyAny>,
) -> strideweave::Result<()> {
    let label = format!("{name}.{CONFIGURE_LIKE}");
    let answer = fresh
        .call_method1(CONFIGURE_LIKE, (prototype,))
        .map_err(|e| park(py, &label, e))?;
    if answer.is_none() {
        return Ok(());
    }
    Err(Error::Type(format!(
        "{label} must return None, got {}",
        type_name(&answer)
    )))
}

/// Runs `fresh.__init__(slots, dtype=dtype[, mutable=False])` for `request` and checks that
/// it reached `Carrier.__init__`.
fn initialize_like_a_user(
    py: Python<'_>,
    name: &str,
    fresh: &Bound<'_, PyAny>,
    request: FreshRequest,
) -> strideweave::Result<()> {
    let label = format!("{name}.__init__ of a carrier the framework makes");
    let dtype = crate::dtype::wrap(py, request.dtype()).map_err(|e| park(py, &label, e))?;
    let kwargs = PyDict::new(py);
    let mut set = kwargs.set_item("dtype", dtype);
    if !request.mutable() {
        set = set.and_then(|()| kwargs.set_item("mutable", false));
    }
    set.map_err(|e| park(py, &label, e))?;
    if let Err(error) = fresh.call_method("__init__", (request.slots(),), Some(&kwargs)) {
        return Err(park(py, &label, refused_arguments(py, name, error)));
    }
    let initialized = fresh
        .cast::<PyCarrier>()
        .is_ok_and(|held| held.get().fresh_initialized());
    if !initialized {
        return Err(Error::Type(format!(
            "{name}.__init__ did not call Carrier.__init__ for a carrier the framework makes: \
             it must call super().__init__(slots, dtype=dtype, mutable=mutable), or the class \
             must define {CONFIGURE_LIKE}(self, prototype)"
        )));
    }
    Ok(())
}

/// `error`, raised by calling a class's `__init__` with a factory's arguments, unless it is
/// the interpreter refusing those arguments — a TypeError that no frame of `__init__` ever
/// saw (it has no traceback, since the call came from here) — which becomes a TypeError
/// saying how to make such a class constructible by the framework, caused by the refusal.
fn refused_arguments(py: Python<'_>, name: &str, error: PyErr) -> PyErr {
    if !error.is_instance_of::<PyTypeError>(py) || error.traceback(py).is_some() {
        return error;
    }
    let refusal = error.value(py).to_string();
    let explained = PyTypeError::new_err(format!(
        "{name}.__init__ cannot be called as {name}(slots, dtype=..., mutable=...) ({refusal}), \
         so the framework cannot make a {name} like an existing one: define \
         {CONFIGURE_LIKE}(self, prototype) on {name} to set a fresh instance's configuration \
         from the prototype"
    ));
    explained.set_cause(py, Some(error));
    explained
}

/// The core class a Python carrier class stands for, as a route endpoint or a result class:
/// a shipped class's own, or the class minted for a Python subclass (see
/// [`check_concrete`]).
pub fn core_class_of(class: &Bound<'_, PyAny>, what: &str) -> PyResult<CarrierClass> {
    check_concrete(class, what)?;
    let class = class.cast::<PyType>()?;
    match crate::carrier::native_core_class(class.py(), class)? {
        Some(native) => Ok(native),
        None => class_of(class),
    }
}

/// Checks that `class` is a concrete Carrier class: a shipped class or a Python subclass
/// other than `Carrier` and `DependentCarrier` (TypeError naming `what` otherwise).
pub fn check_concrete(class: &Bound<'_, PyAny>, what: &str) -> PyResult<()> {
    let py = class.py();
    let not_concrete = || {
        PyTypeError::new_err(format!(
            "{what} must be a concrete Carrier subclass, got {}",
            describe_class(class)
        ))
    };
    let class = class.cast::<PyType>().map_err(|_| not_concrete())?;
    if crate::carrier::native_core_class(py, class)?.is_some() {
        return Ok(());
    }
    let base = py.get_type::<PyCarrier>();
    let dependent = py.get_type::<PyDependentCarrier>();
    if class.is(&base) || class.is(&dependent) || !class.is_subclass(&base)? {
        return Err(not_concrete());
    }
    Ok(())
}

/// A class object's name, or the type of a non-class, for messages.
fn describe_class(object: &Bound<'_, PyAny>) -> String {
    match object.cast::<PyType>() {
        Ok(class) => class
            .name()
            .map(|n| n.to_string())
            .unwrap_or_else(|_| "class".to_owned()),
        Err(_) => type_name(object),
    }
}

/// The core class a kernel pack may target: a Python independent class with a definition.
/// `Carrier`, an unrelated class, a shipped class, a `DependentCarrier` class or a class
/// without a definition is a TypeError starting with `label`.
pub fn pack_target(class: &Bound<'_, PyType>, label: &str) -> PyResult<CarrierClass> {
    let py = class.py();
    let base = py.get_type::<PyCarrier>();
    let name = class.name()?;
    if class.is(&base) {
        return Err(PyTypeError::new_err(format!(
            "{label}: carrier_class must be an exact Carrier subclass, not Carrier itself"
        )));
    }
    if !class.is_subclass(&base)? {
        return Err(PyTypeError::new_err(format!(
            "{label}: carrier_class must be a Carrier subclass, got the unrelated class {name}"
        )));
    }
    let shipped = crate::carrier::native_core_class(py, class)?;
    // strideweave-wgpu's Gpu and GpuHost: definition-backed, so the core decides (the
    // provider's interface, whether the class was observed).
    if let Some(core) = shipped.filter(|_| crate::gpu::is_wgpu_class(py, class)) {
        return Ok(core);
    }
    let dependent =
        shipped.is_some_and(|core| core.kind() == strideweave::carrier::ClassKind::Dependent);
    if shipped.is_some() && !dependent {
        return Err(PyTypeError::new_err(format!(
            "{label}: {name} is a shipped definition-free carrier class and takes no kernel packs \
                 (a pack needs an exact CarrierDefinition)"
        )));
    }
    if dependent || class.is_subclass(&py.get_type::<PyDependentCarrier>())? {
        return Err(PyTypeError::new_err(format!(
            "{label}: {name} is a dependent carrier class; it derives execution from its \
             dependencies and owns no kernel packs"
        )));
    }
    known_class(class)
        .filter(|core| core.is_definition_backed())
        .ok_or_else(|| {
            PyTypeError::new_err(format!(
                "{label}: {name} has no carrier definition; a pack needs an exact \
                 CarrierDefinition with a kernel provider"
            ))
        })
}

/// The seed's `CarrierDefinition(storage, kernels=None, transfers=(), composite=None,
/// facets=())`: one carrier implementation, immutable, its iterables materialized once.
#[pyclass(name = "CarrierDefinition", module = "strideweave", frozen)]
pub struct PyCarrierDefinition {
    storage: Py<PyStorageProvider>,
    #[pyo3(get)]
    kernels: Option<Py<PyKernelProvider>>,
    #[pyo3(get)]
    transfers: Py<PyTuple>,
    #[pyo3(get)]
    composite: Option<Py<PyCompositeProvider>>,
    #[pyo3(get)]
    facets: Py<PyTuple>,
}

#[pymethods]
impl PyCarrierDefinition {
    /// Fields are immutable: assignment is a `dataclasses.FrozenInstanceError`.
    fn __setattr__(&self, py: Python<'_>, name: &str, _value: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    /// Fields cannot be deleted either: a `dataclasses.FrozenInstanceError`.
    fn __delattr__(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    #[new]
    #[pyo3(signature = (storage, kernels=None, transfers=None, composite=None, facets=None))]
    fn py_new(
        py: Python<'_>,
        storage: &Bound<'_, PyAny>,
        kernels: Option<&Bound<'_, PyAny>>,
        transfers: Option<&Bound<'_, PyAny>>,
        composite: Option<&Bound<'_, PyAny>>,
        facets: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let storage = storage.cast::<PyStorageProvider>().map_err(|_| {
            PyTypeError::new_err(format!(
                "CarrierDefinition storage must be a StorageProvider, got {}",
                type_name(storage)
            ))
        })?;
        let kernels = match kernels.filter(|k| !k.is_none()) {
            None => None,
            Some(kernels) => Some(
                kernels
                    .cast::<PyKernelProvider>()
                    .map_err(|_| {
                        PyTypeError::new_err(format!(
                            "CarrierDefinition kernels must be a KernelProvider or None, got {}",
                            type_name(kernels)
                        ))
                    })?
                    .clone()
                    .unbind(),
            ),
        };
        let composite = match composite.filter(|c| !c.is_none()) {
            None => None,
            Some(composite) => Some(
                composite
                    .cast::<PyCompositeProvider>()
                    .map_err(|_| {
                        PyTypeError::new_err(format!(
                            "CarrierDefinition composite must be a CompositeProvider or None, \
                             got {}",
                            type_name(composite)
                        ))
                    })?
                    .clone()
                    .unbind(),
            ),
        };
        let transfers = match transfers {
            None => PyTuple::empty(py),
            Some(routes) => materialize(routes, "CarrierDefinition transfers")?,
        };
        let mut pairs: Vec<(Bound<'_, PyType>, Bound<'_, PyType>)> = Vec::new();
        for route in transfers.iter() {
            let route = route.cast::<PyTransferRoute>().map_err(|_| {
                PyTypeError::new_err(format!(
                    "CarrierDefinition transfers must hold TransferRoute values, got {}",
                    type_name(&route)
                ))
            })?;
            let (source, destination) = route.get().endpoints(py);
            if pairs
                .iter()
                .any(|(s, d)| s.is(&source) && d.is(&destination))
            {
                return Err(PyValueError::new_err(format!(
                    "CarrierDefinition transfers hold duplicate exact transfer routes: two from {} to {}",
                    source.name()?,
                    destination.name()?
                )));
            }
            pairs.push((source, destination));
        }
        let facets = match facets {
            None => PyTuple::empty(py),
            Some(facets) => materialize(facets, "CarrierDefinition facets")?,
        };
        let mut seen: Vec<Bound<'_, PyType>> = Vec::new();
        for facet in facets.iter() {
            if facet.cast::<PyCarrierFacet>().is_err() {
                return Err(PyTypeError::new_err(format!(
                    "CarrierDefinition facets must hold CarrierFacet instances, got {}",
                    type_name(&facet)
                )));
            }
            let class = facet.get_type();
            if seen.iter().any(|s| s.is(&class)) {
                return Err(PyValueError::new_err(format!(
                    "CarrierDefinition facets hold duplicate exact facet types: two facets of the exact \
                     class {}",
                    class.name()?
                )));
            }
            seen.push(class);
        }
        Ok(PyCarrierDefinition {
            storage: storage.clone().unbind(),
            kernels,
            transfers: transfers.unbind(),
            composite,
            facets: facets.unbind(),
        })
    }

    /// The storage provider.
    #[getter]
    fn storage(&self, py: Python<'_>) -> Py<PyStorageProvider> {
        self.storage.clone_ref(py)
    }
}

/// Binds `definition` to exactly `carrier_class` and returns `None`.
///
/// `carrier_class` must be a Carrier subclass written in Python (not `Carrier` or
/// `DependentCarrier`, not a shipped class); a class is defined once. Every route must start
/// at exactly `carrier_class`; a `DependentCarrier` class needs a composite provider and no
/// kernel provider, an independent class no composite provider (TypeError, nothing
/// published).
#[pyfunction]
pub fn register_carrier_definition(
    py: Python<'_>,
    carrier_class: &Bound<'_, PyAny>,
    definition: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let class = carrier_class.cast::<PyType>().map_err(|_| {
        PyTypeError::new_err(format!(
            "register_carrier_definition carrier_class must be a Carrier subclass, got {}",
            type_name(carrier_class)
        ))
    })?;
    let base = py.get_type::<PyCarrier>();
    if class.is(&base) || !class.is_subclass(&base)? {
        return Err(PyTypeError::new_err(format!(
            "register_carrier_definition carrier_class must be a concrete Carrier subclass \
             other than Carrier, got {}",
            class.name()?
        )));
    }
    if class.is(py.get_type::<PyDependentCarrier>()) {
        return Err(PyTypeError::new_err(
            "register_carrier_definition carrier_class must be a concrete subclass of \
             DependentCarrier, not DependentCarrier itself",
        ));
    }
    if let Some(refusal) = crate::gpu::refuse_definition(py, class) {
        return Err(refusal);
    }
    if crate::carrier::is_native_class(py, class) {
        return Err(PyTypeError::new_err(format!(
            "{} is a shipped carrier class; it cannot take a carrier definition",
            class.name()?
        )));
    }
    let definition = definition.cast::<PyCarrierDefinition>().map_err(|_| {
        PyTypeError::new_err(format!(
            "register_carrier_definition definition must be a CarrierDefinition, got {}",
            type_name(definition)
        ))
    })?;
    let definition = definition.get();
    let mut routes = Vec::new();
    for route in definition.transfers.bind(py).iter() {
        let route = route.cast::<PyTransferRoute>()?;
        let (source, _) = route.get().endpoints(py);
        if !source.is(class) {
            return Err(PyTypeError::new_err(format!(
                "the transfer route {} starts at {}, but the definition is registered for {}: \
                 every route's exact source_class must be the registered class",
                route.get().route_id(),
                source.name()?,
                class.name()?
            )));
        }
        routes.push(route.clone());
    }
    let storage = definition.storage.get().to_core(py);
    let mut core = CarrierDefinition::new(storage);
    if let Some(kernels) = &definition.kernels {
        core = core.with_kernels(kernels.get().core.clone()).py()?;
    }
    if let Some(composite) = &definition.composite {
        core = core.with_composite(composite.get().core.clone()).py()?;
    }
    let facets = definition.facets.bind(py);
    if !facets.is_empty() {
        let entries = facets
            .iter()
            .map(|facet| (facet.get_type().unbind(), facet.unbind()))
            .collect();
        let facets: Arc<dyn CarrierFacet> = Arc::new(PythonFacets { entries });
        core = core.with_facets([facets]).py()?;
    }
    let core_class = class_of(class)?;
    if !routes.is_empty() {
        let cores = routes
            .iter()
            .map(|route| route.get().to_core(py, core_class))
            .collect::<PyResult<Vec<_>>>()?;
        core = core.with_transfers(cores).py()?;
    }
    crate::finalization::detach(py, || core_register(core_class, core)).py()
}

/// Constructs the core carrier of `instance`, a fresh object of a registered Python class.
pub fn construct(
    instance: &Bound<'_, PyAny>,
    slots: usize,
    dtype: DType,
    mutable: bool,
) -> PyResult<Carrier> {
    let py = instance.py();
    let class = instance.get_type();
    let Some(core_class) = known_class(&class).filter(|c| c.is_definition_backed()) else {
        return Err(PyTypeError::new_err(format!(
            "{} has no carrier definition: register one with register_carrier_definition \
             before constructing it",
            class.name()?
        )));
    };
    let state = PyState::linking(instance)?;
    crate::finalization::detach(py, || {
        Carrier::create(core_class, state, slots, dtype, mutable)
    })
    .py()
}

/// The Python instance behind a carrier of a Python class (definition-backed or
/// definition-free).
pub fn instance_of(py: Python<'_>, carrier: &Carrier) -> Option<Py<PyAny>> {
    if let Some(instance) = crate::legacy::instance_of(py, carrier) {
        return Some(instance);
    }
    carrier
        .with_provider_state::<PyState, _>(|state| state.link.instance(py).ok())
        .ok()
        .flatten()
}

/// The dtype argument of a Python carrier's constructor.
pub fn dtype_of(dtype: &Bound<'_, PyAny>) -> PyResult<DType> {
    dtype.cast::<PyDType>().map(|d| d.get().inner).map_err(|_| {
        PyTypeError::new_err(format!(
            "Carrier dtype must be a DType, got {}",
            type_name(dtype)
        ))
    })
}
