//! `Carrier` and the shipped carrier classes (CPU, Generic, FileBacked, Evictable,
//! TiledEvictable), each a Python class over the core's carrier handle.
//!
//! Every core carrier has at most one live Python object: a carrier returned from the core
//! (`t.carrier`, a move's destination) is the object the caller built, found through a table
//! of weak references keyed by the carrier's identity.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex, OnceLock, PoisonError};

use pyo3::exceptions::{PyNotImplementedError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyTuple, PyType, PyWeakrefReference};
use pyo3::{PyClass, PyClassInitializer, PyTraverseError, PyVisit};
use strideweave::carrier::{CarrierClass, ClassKind};
use strideweave::carriers::extension::FreshRequest;
use strideweave::carriers::{Cpu, Evictable, FileBacked, Generic, TileResidency, TiledEvictable};
use strideweave::{Carrier, DType, Value};

use crate::convert::{from_value, to_index, to_value, type_name};
use crate::dtype::PyDType;
use crate::errors::IntoPyResult;
use crate::instance_link::InstanceLink;

/// The live Python object of each core carrier, by the carrier's identity.
static OBJECTS: LazyLock<Mutex<ObjectTable>> = LazyLock::new(|| Mutex::new(ObjectTable::new()));

struct ObjectTable {
    objects: HashMap<usize, Py<PyWeakrefReference>>,
    prune_at: usize,
}

impl ObjectTable {
    fn new() -> ObjectTable {
        ObjectTable {
            objects: HashMap::new(),
            prune_at: 64,
        }
    }
}

fn objects() -> std::sync::MutexGuard<'static, ObjectTable> {
    OBJECTS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The base of every carrier class: the place a tensor's slots live and the authority that
/// runs operations on them.
#[pyclass(name = "Carrier", module = "strideweave", subclass, weakref, frozen)]
pub struct PyCarrier {
    inner: OnceLock<Carrier>,
    facet: OnceLock<Py<PyAny>>,
    /// For an instance the framework makes (a factory's fresh carrier): what it constructs,
    /// and whether the class's `__init__` reached `Carrier.__init__` with those arguments.
    fresh: OnceLock<(FreshRequest, AtomicBool)>,
    /// The link through which the core carrier refers back to a Python object: for an
    /// instance of a Python class, the one its provider state holds to the instance; for a
    /// TiledEvictable with a Python residency policy, the one its policy holds to the policy.
    link: OnceLock<Arc<InstanceLink>>,
    /// For an instance of a definition-free `DependentCarrier` class: its finalization state
    /// and capability snapshot (`crate::legacy_dependent`).
    dependent: OnceLock<crate::legacy_dependent::LegacyDependent>,
    /// For an instance of a definition-free independent class: its core carrier, built at
    /// the first use (`crate::legacy_pending`).
    pending: OnceLock<crate::legacy_pending::Pending>,
}

impl PyCarrier {
    /// The base part of an object of a Python carrier class, before its construction.
    pub(crate) fn unconstructed() -> PyCarrier {
        PyCarrier {
            inner: OnceLock::new(),
            facet: OnceLock::new(),
            fresh: OnceLock::new(),
            link: OnceLock::new(),
            dependent: OnceLock::new(),
            pending: OnceLock::new(),
        }
    }

    /// The class of a definition-free independent instance whose carrier is not built yet
    /// (its capability queries are the class's).
    fn pending_class(&self) -> Option<CarrierClass> {
        if self.inner.get().is_some() {
            return None;
        }
        self.pending
            .get()
            .map(crate::legacy_pending::Pending::class)
    }

    /// The finalization state of a definition-free dependent instance, if this is one.
    pub(crate) fn legacy_dependent(&self) -> Option<&crate::legacy_dependent::LegacyDependent> {
        self.dependent.get()
    }

    /// Takes `carrier` as this object's core carrier (a definition-free dependent instance's,
    /// built when it finalizes) and remembers `object` as its Python object.
    pub(crate) fn adopt(
        &self,
        py: Python<'_>,
        carrier: Carrier,
        object: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let _ = self.inner.set(carrier.clone());
        remember(py, &carrier, object)
    }

    /// Remembers the link the core carrier's provider state holds to this very object.
    pub(crate) fn set_link(&self, link: &Arc<InstanceLink>) {
        let _ = self.link.set(Arc::clone(link));
    }

    pub(crate) fn holding(carrier: Carrier) -> PyCarrier {
        let held = PyCarrier::unconstructed();
        let _ = held.inner.set(carrier);
        held
    }

    /// Marks this fresh instance as one the framework constructs for `request`: its
    /// `Carrier.__init__` then checks its arguments against the request and constructs
    /// nothing (the factory does).
    pub(crate) fn expect_fresh(&self, request: FreshRequest) {
        let _ = self.fresh.set((request, AtomicBool::new(false)));
    }

    /// Whether the class's `__init__` reached `Carrier.__init__` for the fresh construction.
    pub(crate) fn fresh_initialized(&self) -> bool {
        self.fresh
            .get()
            .is_some_and(|(_, reached)| reached.load(Ordering::Acquire))
    }

    /// `Carrier.__init__` of a class without a definition: the definition-free path, which
    /// takes no storage arguments (a TypeError naming the class otherwise). Either way the
    /// class is observed as definition-free from then on: a definition can no longer be
    /// registered for it.
    fn construct_definition_free(
        slf: &Bound<'_, Self>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
        name: &str,
    ) -> PyResult<()> {
        let py = slf.py();
        let class = crate::authoring::class_of(&slf.get_type())?;
        crate::finalization::detach(py, || {
            class.observe_definition_free("construct a definition-free carrier")
        })
        .py()?;
        if !args.is_empty() || kwargs.is_some_and(|k| !k.is_empty()) {
            return Err(PyTypeError::new_err(format!(
                "{name} has no carrier definition: definition-free Carrier construction accepts \
                 no storage arguments (call super().__init__() and define the storage hooks, \
                 or register a definition with register_carrier_definition before the class \
                 is first used)"
            )));
        }
        if class.kind() == ClassKind::Dependent {
            let state = crate::legacy_dependent::LegacyDependent::new(name.to_owned(), class);
            let _ = slf.get().dependent.set(state);
            return Ok(());
        }
        // Sealed as a construction seals it: an undeclared class declares nothing from now on.
        crate::finalization::detach(py, || {
            strideweave::carrier::capabilities_for_carrier_class(class)
        });
        let pending = crate::legacy_pending::Pending::new(slf.as_any(), class)?;
        let _ = slf.get().pending.set(pending);
        Ok(())
    }

    /// The core carrier, built now for a definition-free independent instance at its first
    /// use; a Type error when the object was never constructed (a definition-free dependent
    /// instance's own error while it has none).
    pub fn carrier(&self) -> PyResult<&Carrier> {
        if let Some(carrier) = self.inner.get() {
            return Ok(carrier);
        }
        if let Some(pending) = self.pending.get() {
            return Python::attach(|py| {
                let (carrier, instance) = pending.build(py)?;
                if self.inner.set(carrier.clone()).is_ok() {
                    remember(py, &carrier, &instance)?;
                }
                self.inner.get().ok_or_else(|| {
                    PyRuntimeError::new_err("the carrier was built but could not be kept")
                })
            });
        }
        Err(match self.dependent.get() {
            Some(state) => state.no_storage(),
            None => PyTypeError::new_err("this Carrier was not constructed by a carrier class"),
        })
    }
}

/// The one refusal every closed shipped carrier class states when it is subclassed, with
/// `{name}` standing for the class (`strideweave.carriers.base.CLOSED_CARRIER_MESSAGE`).
pub const CLOSED_CARRIER_MESSAGE: &str = "{name} is a closed carrier implementation and cannot \
     be subclassed; write a sibling Carrier class instead (definition-free, or with a \
     CarrierDefinition), composing the shipped carriers where it needs their storage";

/// The `TypeError` of subclassing the closed class whose subclass is being defined: the
/// refusal names the closed parent.
pub fn closed_class(subclass: &Bound<'_, PyType>) -> PyErr {
    let parent = subclass
        .getattr("__mro__")
        .ok()
        .and_then(|mro| mro.get_item(1).ok())
        .and_then(|parent| parent.getattr("__name__").ok())
        .and_then(|name| name.extract::<String>().ok())
        .unwrap_or_else(|| "this carrier class".to_owned());
    PyTypeError::new_err(CLOSED_CARRIER_MESSAGE.replace("{name}", &parent))
}

/// Remembers `object` as the Python object of `carrier`.
fn remember(py: Python<'_>, carrier: &Carrier, object: &Bound<'_, PyAny>) -> PyResult<()> {
    let weak = PyWeakrefReference::new(object)?.unbind();
    let mut table = objects();
    table.objects.insert(carrier.id(), weak);
    if table.objects.len() >= table.prune_at {
        table
            .objects
            .retain(|_, weak| weak.bind(py).upgrade().is_some());
        table.prune_at = (table.objects.len() * 2).max(64);
    }
    Ok(())
}

/// Builds the Python object of a freshly constructed carrier of class `T`.
pub(crate) fn construct<T: PyClass<BaseType = PyCarrier> + Default>(
    carrier: Carrier,
) -> PyClassInitializer<T> {
    PyClassInitializer::from(PyCarrier::holding(carrier)).add_subclass(T::default())
}

/// Registers the object just made by a constructor, so the core's carrier maps back to it.
pub(crate) fn registered<T: PyClass<BaseType = PyCarrier> + Default>(
    py: Python<'_>,
    carrier: Carrier,
) -> PyResult<Py<PyAny>> {
    let object = Py::new(py, construct::<T>(carrier.clone()))?.into_any();
    remember(py, &carrier, object.bind(py))?;
    Ok(object)
}

/// The Python object of `carrier`: the live one if there is one, else a new object of the
/// Python class that matches the carrier's exact class.
pub fn wrap(py: Python<'_>, carrier: &Carrier) -> PyResult<Py<PyAny>> {
    let existing = objects()
        .objects
        .get(&carrier.id())
        .map(|w| w.clone_ref(py));
    if let Some(weak) = existing {
        if let Some(object) = weak.bind(py).upgrade() {
            if let Ok(held) = object.cast::<PyCarrier>() {
                if held.get().inner.get().is_some_and(|c| c.same_as(carrier)) {
                    return Ok(object.unbind());
                }
            }
        }
    }
    if let Some(instance) = crate::authoring::instance_of(py, carrier) {
        if let Ok(held) = instance.bind(py).cast::<PyCarrier>() {
            let _ = held.get().inner.set(carrier.clone());
        }
        remember(py, carrier, instance.bind(py))?;
        return Ok(instance);
    }
    let carrier = carrier.clone();
    match carrier.class().name() {
        "CPU" => registered::<PyCpu>(py, carrier),
        "Generic" => registered::<PyGeneric>(py, carrier),
        "FileBacked" => registered::<PyFileBacked>(py, carrier),
        "Evictable" => registered::<PyEvictable>(py, carrier),
        "TiledEvictable" => {
            let link = crate::residency::policy_link(&carrier);
            let object = registered::<crate::tiled::PyTiledEvictable>(py, carrier)?;
            if let Some(link) = link {
                object.bind(py).cast::<PyCarrier>()?.get().set_link(&link);
            }
            Ok(object)
        }
        "BlockDeviceCarrier" => {
            registered::<crate::block_device::PyBlockDeviceCarrier>(py, carrier)
        }
        "Metal" | "Gpu" | "GpuHost" => crate::gpu::wrap_device_carrier(py, carrier),
        _ => {
            let object = Py::new(py, PyCarrier::holding(carrier.clone()))?.into_any();
            remember(py, &carrier, object.bind(py))?;
            Ok(object)
        }
    }
}

/// The core carrier of a Python carrier argument; `what` names the argument.
///
/// The object is remembered as the carrier's Python object (when none is live), so the core
/// handing this carrier back later (`t.carrier`) yields this very object.
pub fn expect_carrier(object: &Bound<'_, PyAny>, what: &str) -> PyResult<Carrier> {
    let held = object.cast::<PyCarrier>().map_err(|_| {
        PyTypeError::new_err(format!(
            "{what} must be a Carrier instance, got {}",
            type_name(object)
        ))
    })?;
    let carrier = held.get().carrier()?.clone();
    let py = object.py();
    let known = objects()
        .objects
        .get(&carrier.id())
        .map(|weak| weak.clone_ref(py));
    let live = known.and_then(|weak| weak.bind(py).upgrade());
    if live.is_none() {
        remember(py, &carrier, object)?;
    }
    Ok(carrier)
}

/// A slot index argument: an `int` (by `operator.index`); a negative one is out of range
/// (`IndexError`), as an index past the end is.
fn slot_index(index: &Bound<'_, PyAny>) -> PyResult<usize> {
    if let Ok(int) = index.extract::<i64>() {
        if int < 0 && !index.is_instance_of::<PyBool>() {
            return Err(pyo3::exceptions::PyIndexError::new_err(format!(
                "Carrier index out of range: {int} is negative"
            )));
        }
    }
    to_index(index, "Carrier index")
}

/// `True` or `False`, as Python writes a bool.
fn py_bool(flag: bool) -> &'static str {
    if flag {
        "True"
    } else {
        "False"
    }
}

/// An optional `bool` argument (not merely truthy), `default` when absent; `what` names it.
pub(crate) fn bool_arg(
    flag: Option<&Bound<'_, PyAny>>,
    default: bool,
    what: &str,
) -> PyResult<bool> {
    let Some(flag) = flag else {
        return Ok(default);
    };
    flag.cast::<PyBool>().map(|b| b.is_true()).map_err(|_| {
        PyTypeError::new_err(format!("{what} must be a bool, got {}", type_name(flag)))
    })
}

/// An optional `DType` argument (`None` keeps the prototype's); `what` names it.
fn optional_dtype(dtype: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Option<DType>> {
    match dtype.filter(|d| !d.is_none()) {
        None => Ok(None),
        Some(dtype) => dtype_arg(dtype, what).map(Some),
    }
}

pub(crate) fn dtype_arg(dtype: &Bound<'_, PyAny>, what: &str) -> PyResult<DType> {
    dtype.cast::<PyDType>().map(|d| d.get().inner).map_err(|_| {
        PyTypeError::new_err(format!("{what} must be a DType, got {}", type_name(dtype)))
    })
}

/// The values of an iterable of `bool`, `int` and `float`, consumed once; `what` names the
/// argument in the error, with the position of a refused value.
pub(crate) fn values_arg(values: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<Value>> {
    let iterator = values.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "{what} must be an iterable of bool, int or float, got {}",
            type_name(values)
        ))
    })?;
    iterator
        .enumerate()
        .map(|(k, item)| to_value(&item?, &format!("{what}[{k}]")))
        .collect()
}

#[pymethods]
impl PyCarrier {
    /// The references this object owns, for Python's garbage collector: its facet object,
    /// and the one its core carrier's state holds back to it while this object holds the
    /// carrier's only handle (crate::instance_link).
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        if let Some(facet) = self.facet.get() {
            visit.call(facet)?;
        }
        if let Some(link) = self.link.get() {
            InstanceLink::visit(link, self.inner.get(), &visit)?;
        }
        Ok(())
    }

    /// Breaks the cycle through the core carrier of an unreachable object; nothing of the
    /// storage provider is called (the state is dropped with the carrier, as for a carrier
    /// that was never released).
    fn __clear__(&self) {
        if let Some(link) = self.link.get() {
            InstanceLink::clear(link, self.inner.get());
        }
    }

    #[new]
    #[classmethod]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn py_new(
        cls: &Bound<'_, PyType>,
        _args: &Bound<'_, PyTuple>,
        _kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        if cls.is(cls.py().get_type::<PyCarrier>()) {
            return Err(PyTypeError::new_err(
                "Carrier cannot be constructed directly: construct a carrier class such as CPU, \
                 Generic or FileBacked, or a Carrier subclass with a registered definition",
            ));
        }
        Ok(PyCarrier::unconstructed())
    }

    /// `MyCarrier(slots, *, dtype, mutable=True)` for a Carrier subclass written in Python
    /// with a registered definition: builds the carrier through its storage provider, whose
    /// callbacks receive this very object. A shipped class is built by its constructor, and
    /// its initializer does nothing.
    #[pyo3(signature = (*args, **kwargs))]
    fn __init__(
        slf: &Bound<'_, Self>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<()> {
        if slf.get().inner.get().is_some() {
            return Ok(());
        }
        let class = slf.get_type();
        let name = class.name()?.to_string();
        let defined =
            crate::authoring::known_class(&class).is_some_and(|c| c.is_definition_backed());
        if !defined && slf.get().fresh.get().is_none() {
            return Self::construct_definition_free(slf, args, kwargs, &name);
        }
        let mut slots = None;
        let mut dtype = None;
        let mut mutable = true;
        if args.len() > 1 {
            return Err(PyTypeError::new_err(format!(
                "{name}() takes one positional argument (slots), got {}",
                args.len()
            )));
        }
        if let Some(first) = args.iter().next() {
            slots = Some(to_index(&first, &format!("{name} slots"))?);
        }
        if let Some(kwargs) = kwargs {
            for (key, value) in kwargs.iter() {
                let key: String = key.extract()?;
                match key.as_str() {
                    "slots" if slots.is_none() => {
                        slots = Some(to_index(&value, &format!("{name} slots"))?)
                    }
                    "dtype" => dtype = Some(crate::authoring::dtype_of(&value)?),
                    "mutable" => {
                        mutable = value
                            .cast::<PyBool>()
                            .map_err(|_| {
                                PyTypeError::new_err(format!(
                                    "{name} mutable must be a bool, got {}",
                                    type_name(&value)
                                ))
                            })?
                            .is_true()
                    }
                    other => {
                        return Err(PyTypeError::new_err(format!(
                            "{name}() got an unexpected keyword argument {other:?}"
                        )))
                    }
                }
            }
        }
        let slots = slots
            .ok_or_else(|| PyTypeError::new_err(format!("{name}() missing the argument slots")))?;
        let dtype = dtype.ok_or_else(|| {
            PyTypeError::new_err(format!("{name}() missing the keyword argument dtype"))
        })?;
        if let Some((request, reached)) = slf.get().fresh.get() {
            let asked = (request.slots(), request.dtype(), request.mutable());
            if (slots, dtype, mutable) != asked {
                return Err(PyValueError::new_err(format!(
                    "{name}.__init__ passed (slots={slots}, dtype={dtype}, mutable={}) to \
                     Carrier.__init__, but the framework is constructing a {name} of \
                     (slots={}, dtype={}, mutable={}): pass the arguments it received on",
                    py_bool(mutable),
                    asked.0,
                    asked.1,
                    py_bool(asked.2)
                )));
            }
            reached.store(true, Ordering::Release);
            return Ok(());
        }
        let carrier = crate::authoring::construct(slf.as_any(), slots, dtype, mutable)?;
        let _ = slf.get().inner.set(carrier.clone());
        remember(slf.py(), &carrier, slf.as_any())?;
        Ok(())
    }

    /// Runs the framework's dispatch of `operation_name` on this carrier: the class's hook
    /// (a definition-free class's `_dispatch_op`, a definition-backed class's definition),
    /// checked fresh and tagged with the name and the exact class. For a definition-free
    /// Python class, the `Operation` its hook returned; otherwise the dispatched operation.
    fn dispatch_op(&self, py: Python<'_>, operation_name: &str) -> PyResult<Py<PyAny>> {
        let carrier = self.carrier()?;
        let _ = crate::legacy::take_dispatched();
        let operation =
            crate::finalization::detach(py, || carrier.dispatch_op(operation_name)).py()?;
        match crate::legacy::take_dispatched() {
            Some(object) => Ok(object),
            None => crate::legacy::dispatched(py, operation),
        }
    }

    /// The dtype of every slot.
    fn dtype(&self, py: Python<'_>) -> PyResult<Py<PyDType>> {
        crate::dtype::wrap(py, self.carrier()?.dtype())
    }

    /// The number of slots (0 once released).
    fn size(&self, py: Python<'_>) -> PyResult<usize> {
        let carrier = self.carrier()?;
        Ok(crate::finalization::detach(py, || carrier.size()))
    }

    /// The version: one more per successful public write.
    #[getter]
    fn version(&self) -> PyResult<u64> {
        Ok(self.carrier()?.version())
    }

    /// Whether the carrier was released.
    fn is_released(&self) -> PyResult<bool> {
        Ok(self.carrier()?.is_released())
    }

    /// Whether another party holds this carrier: a dependent carrier that owns it, or a
    /// pending move that claims it (as source or destination) until its terminal outcome.
    fn is_owned(&self) -> PyResult<bool> {
        let carrier = self.carrier()?;
        Ok(carrier.is_owned() || carrier.is_claimed())
    }

    /// Whether writes are allowed now.
    fn is_mutable(&self) -> PyResult<bool> {
        Ok(self.carrier()?.is_mutable())
    }

    /// The exact class name the core knows this carrier by.
    #[getter]
    fn class_name(&self) -> PyResult<&'static str> {
        Ok(self.carrier()?.class().name())
    }

    /// Whether this carrier's class can store `dtype` (answered also after release).
    fn supports_storage_dtype(&self, py: Python<'_>, dtype: &Bound<'_, PyAny>) -> PyResult<bool> {
        let dtype = dtype_arg(dtype, "supports_storage_dtype dtype")?;
        let carrier = self.carrier()?;
        crate::finalization::detach(py, || carrier.supports_storage_dtype(dtype)).py()
    }

    /// The value at physical slot `index` (`carrier[index]` reads the same).
    fn get_value(&self, py: Python<'_>, index: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let index = slot_index(index)?;
        let carrier = self.carrier()?;
        let value = crate::finalization::detach(py, || carrier.get(index)).py()?;
        from_value(py, value)
    }

    /// Writes `value` to physical slot `index` through the framework (one version step;
    /// `carrier[index] = value` writes the same).
    fn set_value(
        &self,
        py: Python<'_>,
        index: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let index = slot_index(index)?;
        let value = to_value(value, "value")?;
        let carrier = self.carrier()?;
        crate::finalization::detach(py, || carrier.set(index, value)).py()
    }

    /// `carrier[index]`: the value at physical slot `index` (an `int`, by `operator.index`).
    fn __getitem__(&self, py: Python<'_>, index: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.get_value(py, index)
    }

    /// `carrier[index] = value`: one framework write of physical slot `index`.
    fn __setitem__(
        &self,
        py: Python<'_>,
        index: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.set_value(py, index, value)
    }

    /// Releases the storage; idempotent.
    fn release(&self, py: Python<'_>) -> PyResult<()> {
        let carrier = self.carrier()?;
        crate::finalization::detach(py, || carrier.release()).py()
    }

    /// `scatter(to_scatter, scatter_onto, mapping, mapping_offset=0)`: writes element `i` of
    /// the tensor `to_scatter` to slot `scatter_onto.offset + mapping_offset + mapping(i)` of
    /// this carrier, which must back `scatter_onto`; one version step, and nothing written
    /// when any check fails (docs/carriers.md, "Scatter").
    #[pyo3(signature = (to_scatter, scatter_onto, mapping, mapping_offset=None))]
    fn scatter(
        &self,
        py: Python<'_>,
        to_scatter: &Bound<'_, PyAny>,
        scatter_onto: &Bound<'_, PyAny>,
        mapping: &Bound<'_, PyAny>,
        mapping_offset: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let source = crate::tensor::expect_tensor(to_scatter, "scatter to_scatter")?;
        let destination = crate::tensor::expect_tensor(scatter_onto, "scatter scatter_onto")?;
        let mapping = crate::layout::expect_layout(mapping, "scatter mapping")?;
        let mapping_offset = match mapping_offset {
            Some(offset) => to_index(offset, "scatter mapping_offset")?,
            None => 0,
        };
        let carrier = self.carrier()?;
        crate::finalization::detach(py, || {
            carrier.scatter(&source, &destination, &mapping, mapping_offset)
        })
        .py()
    }

    /// The plans this carrier executes (its instance reach, or its class's declaration), in
    /// the deterministic capability order; only those of `operation_name` when given.
    #[pyo3(signature = (operation_name=None))]
    fn operation_capabilities(
        &self,
        py: Python<'_>,
        operation_name: Option<&str>,
    ) -> PyResult<Py<PyTuple>> {
        if let Some(state) = self.dependent.get() {
            return state.capabilities(py, operation_name);
        }
        if let Some(class) = self.pending_class() {
            let capabilities = crate::finalization::detach(py, || {
                strideweave::carrier::capabilities_for_carrier_class(class)
            });
            return crate::capabilities::class_capability_tuple(
                py,
                class,
                capabilities.iter(),
                operation_name,
            );
        }
        let carrier = self.carrier()?;
        let capabilities = crate::finalization::detach(py, || carrier.capabilities());
        crate::capabilities::class_capability_tuple(
            py,
            carrier.class(),
            capabilities.iter(),
            operation_name,
        )
    }

    /// Whether this carrier executes exactly `plan`.
    #[pyo3(name = "supports_operation_plan")]
    fn supports_plan(&self, py: Python<'_>, plan: &Bound<'_, PyAny>) -> PyResult<bool> {
        let plan = crate::capabilities::plan_arg(plan, "supports_operation_plan plan")?;
        if let Some(state) = self.dependent.get() {
            return Ok(state.matching(py, &plan)?.is_some());
        }
        if let Some(class) = self.pending_class() {
            return Ok(crate::finalization::detach(py, || {
                strideweave::carrier::supports_operation_plan(class, &plan)
            }));
        }
        let carrier = self.carrier()?;
        Ok(crate::finalization::detach(py, || {
            carrier.supports_operation_plan(&plan)
        }))
    }

    /// Why this carrier does not execute `plan`, or `None` when it does.
    #[pyo3(name = "unsupported_plan_reason")]
    fn unsupported_reason(
        &self,
        py: Python<'_>,
        plan: &Bound<'_, PyAny>,
    ) -> PyResult<Option<String>> {
        let plan = crate::capabilities::plan_arg(plan, "unsupported_plan_reason plan")?;
        if let Some(state) = self.dependent.get() {
            return state.reason(py, &plan);
        }
        if let Some(class) = self.pending_class() {
            return Ok(crate::finalization::detach(py, || {
                strideweave::carrier::unsupported_plan_reason(class, &plan)
            }));
        }
        let carrier = self.carrier()?;
        Ok(crate::finalization::detach(py, || {
            carrier.unsupported_plan_reason(&plan)
        }))
    }

    /// The capability authorizing `plan` on this carrier, or `UnsupportedOperationPlan`.
    fn require_operation_plan(
        &self,
        py: Python<'_>,
        plan: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyOperationCapability>> {
        let plan = crate::capabilities::plan_arg(plan, "require_operation_plan plan")?;
        if let Some(state) = self.dependent.get() {
            if let Some(found) = state.matching(py, &plan)? {
                return Ok(found);
            }
            let reason = state.reason(py, &plan)?.unwrap_or_default();
            return Err(strideweave::Error::UnsupportedOperationPlan(
                strideweave::UnsupportedOperationPlan::new(plan.operation(), [reason]),
            ))
            .py();
        }
        if let Some(class) = self.pending_class() {
            let inner = crate::finalization::detach(py, || {
                strideweave::carrier::require_capability(class, &plan)
            })
            .py()?;
            return crate::capabilities::capability_object(py, class, &inner);
        }
        let carrier = self.carrier()?;
        let found = crate::finalization::detach(py, || carrier.matching_capability(&plan));
        match found {
            Some(inner) => crate::capabilities::capability_object(py, carrier.class(), &inner),
            None => {
                let reason =
                    crate::finalization::detach(py, || carrier.unsupported_plan_reason(&plan))
                        .unwrap_or_default();
                Err(strideweave::Error::UnsupportedOperationPlan(
                    strideweave::UnsupportedOperationPlan::new(plan.operation(), [reason]),
                ))
                .py()
            }
        }
    }

    /// The facet registered under exactly `facet_type`, or `None`.
    fn facet(slf: &Bound<'_, Self>, facet_type: &Bound<'_, PyAny>) -> PyResult<Option<Py<PyAny>>> {
        let py = slf.py();
        let facet_type = facet_type_arg(facet_type)?;
        let this = slf.get();
        let carrier = this.carrier()?;
        if let Some(facets) = carrier.facet::<crate::authoring::PythonFacets>() {
            return Ok(facets.find(py, &facet_type));
        }
        if !facet_type.is(py.get_type::<crate::tiled::PyTiledResidencyFacet>())
            || carrier.facet::<TileResidency>().is_none()
        {
            return Ok(None);
        }
        if let Some(facet) = this.facet.get() {
            return Ok(Some(facet.clone_ref(py)));
        }
        let made = Py::new(
            py,
            PyClassInitializer::from(PyCarrierFacet).add_subclass(
                crate::tiled::PyTiledResidencyFacet {
                    carrier: carrier.clone(),
                },
            ),
        )?
        .into_any();
        Ok(Some(this.facet.get_or_init(|| made).clone_ref(py)))
    }

    /// The facet registered under exactly `facet_type`, or `NotImplementedError`.
    fn require_facet(slf: &Bound<'_, Self>, facet_type: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        match PyCarrier::facet(slf, facet_type)? {
            Some(facet) => Ok(facet),
            None => {
                let name = facet_type
                    .cast::<PyType>()
                    .ok()
                    .and_then(|t| t.name().ok())
                    .map(|n| n.to_string())
                    .unwrap_or_default();
                let class = slf.get().carrier()?.class().name();
                Err(PyNotImplementedError::new_err(format!(
                    "{class} carriers register no {name} facet"
                )))
            }
        }
    }

    /// A fresh carrier of the same exact class holding `values` (an iterable of `bool`,
    /// `int` and `float`, consumed once, each normalized to the dtype): `dtype=None` keeps
    /// this carrier's dtype. A Python carrier class's `__init__` runs for it (see the
    /// documentation of framework-made carriers).
    #[pyo3(signature = (values, *, mutable=None, dtype=None))]
    fn new_like(
        &self,
        py: Python<'_>,
        values: &Bound<'_, PyAny>,
        mutable: Option<&Bound<'_, PyAny>>,
        dtype: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let carrier = self.carrier()?;
        let values = values_arg(values, "new_like values")?;
        let mutable = bool_arg(mutable, true, "new_like mutable")?;
        let dtype = optional_dtype(dtype, "new_like dtype")?;
        let made =
            crate::finalization::detach(py, || carrier.new_like(&values, mutable, dtype)).py()?;
        wrap(py, &made)
    }

    /// A fresh carrier of the same exact class with `size` slots, zeroed unless `empty`:
    /// `dtype=None` keeps this carrier's dtype. A non-integer size is a TypeError, a negative
    /// one a ValueError.
    #[pyo3(signature = (size, *, mutable=None, dtype=None, empty=None))]
    fn allocate_like(
        &self,
        py: Python<'_>,
        size: &Bound<'_, PyAny>,
        mutable: Option<&Bound<'_, PyAny>>,
        dtype: Option<&Bound<'_, PyAny>>,
        empty: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let carrier = self.carrier()?;
        let size = to_index(size, "allocate_like size")?;
        let mutable = bool_arg(mutable, true, "allocate_like mutable")?;
        let dtype = optional_dtype(dtype, "allocate_like dtype")?;
        let empty = bool_arg(empty, false, "allocate_like empty")?;
        let made =
            crate::finalization::detach(py, || carrier.allocate_like(size, mutable, dtype, empty))
                .py()?;
        wrap(py, &made)
    }

    fn __repr__(&self) -> PyResult<String> {
        let carrier = self.carrier()?;
        Ok(format!(
            "{}(size={}, dtype={})",
            carrier.class().name(),
            carrier.size(),
            carrier.dtype()
        ))
    }
}

fn facet_type_arg<'py>(facet_type: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyType>> {
    let py = facet_type.py();
    let class = facet_type.cast::<PyType>().map_err(|_| {
        PyTypeError::new_err(format!(
            "facet_type must be a CarrierFacet subclass, got {}",
            type_name(facet_type)
        ))
    })?;
    let base = py.get_type::<PyCarrierFacet>();
    if class.is(&base) || !class.is_subclass(&base)? {
        return Err(PyTypeError::new_err(format!(
            "facet_type must be a CarrierFacet subclass, got {}",
            class.name()?
        )));
    }
    Ok(class.clone())
}

/// The CPU carrier: Float32, Int32 or Bool slots in host memory.
#[pyclass(name = "CPU", module = "strideweave", extends = PyCarrier, subclass, frozen)]
#[derive(Default)]
pub struct PyCpu;

#[pymethods]
impl PyCpu {
    /// A shipped carrier class is closed: defining a subclass is a `TypeError` with the one
    /// refusal every closed class states (`CLOSED_CARRIER_MESSAGE`).
    #[classmethod]
    #[pyo3(signature = (**_kwargs))]
    fn __init_subclass__(
        cls: &Bound<'_, pyo3::types::PyType>,
        _kwargs: Option<&Bound<'_, pyo3::types::PyDict>>,
    ) -> PyResult<()> {
        Err(crate::carrier::closed_class(cls))
    }

    #[new]
    #[pyo3(signature = (size, *, mutable=true, dtype=None, empty=false))]
    fn py_new(
        size: &Bound<'_, PyAny>,
        mutable: bool,
        dtype: Option<&Bound<'_, PyAny>>,
        empty: bool,
    ) -> PyResult<PyClassInitializer<Self>> {
        let size = to_index(size, "CPU size")?;
        let dtype = match dtype {
            None => DType::FLOAT32,
            Some(dtype) => dtype_arg(dtype, "CPU dtype")?,
        };
        let carrier = Cpu::carrier(size, dtype, mutable, empty).py()?;
        Ok(construct::<PyCpu>(carrier))
    }

    /// A CPU carrier holding `values`, each normalized to `dtype`.
    #[staticmethod]
    #[pyo3(signature = (values, *, dtype=None, mutable=true))]
    fn from_values(
        py: Python<'_>,
        values: &Bound<'_, PyAny>,
        dtype: Option<&Bound<'_, PyAny>>,
        mutable: bool,
    ) -> PyResult<Py<PyAny>> {
        let dtype = match dtype {
            None => DType::FLOAT32,
            Some(dtype) => dtype_arg(dtype, "CPU dtype")?,
        };
        let values = values_arg(values, "CPU.from_values values")?;
        let carrier = Cpu::from_values(&values, dtype, mutable).py()?;
        registered::<PyCpu>(py, carrier)
    }

    /// The address of the first slot, `None` once released.
    fn pointer(slf: PyRef<'_, Self>) -> PyResult<Option<usize>> {
        let carrier = slf.as_super().carrier()?;
        Ok(carrier.downcast_ref::<Cpu>().and_then(Cpu::pointer))
    }
}

/// The reference carrier: any storable dtype, values normalized on every write.
#[pyclass(name = "Generic", module = "strideweave", extends = PyCarrier, subclass, frozen)]
#[derive(Default)]
pub struct PyGeneric;

#[pymethods]
impl PyGeneric {
    /// A shipped carrier class is closed: defining a subclass is a `TypeError` with the one
    /// refusal every closed class states (`CLOSED_CARRIER_MESSAGE`).
    #[classmethod]
    #[pyo3(signature = (**_kwargs))]
    fn __init_subclass__(
        cls: &Bound<'_, pyo3::types::PyType>,
        _kwargs: Option<&Bound<'_, pyo3::types::PyDict>>,
    ) -> PyResult<()> {
        Err(crate::carrier::closed_class(cls))
    }

    #[new]
    #[pyo3(signature = (values, *, mutable=true, dtype))]
    fn py_new(
        values: &Bound<'_, PyAny>,
        mutable: bool,
        dtype: &Bound<'_, PyAny>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let dtype = dtype_arg(dtype, "Generic dtype")?;
        let values = values_arg(values, "Generic values")?;
        Ok(construct::<PyGeneric>(
            Generic::carrier(&values, dtype, mutable).py()?,
        ))
    }
}

/// A carrier whose slots live in a raw file (deleted on release).
#[pyclass(name = "FileBacked", module = "strideweave", extends = PyCarrier, subclass, frozen)]
#[derive(Default)]
pub struct PyFileBacked;

#[pymethods]
impl PyFileBacked {
    /// A shipped carrier class is closed: defining a subclass is a `TypeError` with the one
    /// refusal every closed class states (`CLOSED_CARRIER_MESSAGE`).
    #[classmethod]
    #[pyo3(signature = (**_kwargs))]
    fn __init_subclass__(
        cls: &Bound<'_, pyo3::types::PyType>,
        _kwargs: Option<&Bound<'_, pyo3::types::PyDict>>,
    ) -> PyResult<()> {
        Err(crate::carrier::closed_class(cls))
    }

    #[new]
    #[pyo3(signature = (filename=None, *, mutable=true, dtype))]
    fn py_new(
        filename: Option<&Bound<'_, PyAny>>,
        mutable: bool,
        dtype: &Bound<'_, PyAny>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let dtype = dtype_arg(dtype, "FileBacked dtype")?;
        let filename = match filename {
            None => None,
            Some(name) => Some(name.extract::<String>().map_err(|_| {
                PyTypeError::new_err(format!(
                    "FileBacked filename must be a str, got {}",
                    type_name(name)
                ))
            })?),
        };
        Ok(construct::<PyFileBacked>(
            FileBacked::carrier(filename.as_deref(), dtype, mutable).py()?,
        ))
    }

    /// The file's path, `None` once released.
    #[getter]
    fn path(slf: PyRef<'_, Self>) -> PyResult<Option<String>> {
        let carrier = slf.as_super().carrier()?;
        Ok(carrier
            .downcast_ref::<FileBacked>()
            .and_then(FileBacked::path)
            .map(|path| path.to_string_lossy().into_owned()))
    }
}

/// A two-tier carrier: a primary tier that can be evicted to a secondary one.
#[pyclass(name = "Evictable", module = "strideweave", extends = PyCarrier, subclass, frozen)]
#[derive(Default)]
pub struct PyEvictable;

#[pymethods]
impl PyEvictable {
    /// A shipped carrier class is closed: defining a subclass is a `TypeError` with the one
    /// refusal every closed class states (`CLOSED_CARRIER_MESSAGE`).
    #[classmethod]
    #[pyo3(signature = (**_kwargs))]
    fn __init_subclass__(
        cls: &Bound<'_, pyo3::types::PyType>,
        _kwargs: Option<&Bound<'_, pyo3::types::PyDict>>,
    ) -> PyResult<()> {
        Err(crate::carrier::closed_class(cls))
    }

    #[new]
    fn py_new(
        primary: &Bound<'_, PyAny>,
        secondary: &Bound<'_, PyAny>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let primary = expect_carrier(primary, "Evictable primary")?;
        let secondary = expect_carrier(secondary, "Evictable secondary")?;
        let carrier = Evictable::carrier(&primary, &secondary).py()?;
        Ok(construct::<PyEvictable>(carrier))
    }

    /// Moves the contents to the secondary tier.
    fn evict(slf: PyRef<'_, Self>) -> PyResult<()> {
        Evictable::evict(slf.as_super().carrier()?).py()
    }

    /// Moves the contents back to the primary tier.
    fn promote(slf: PyRef<'_, Self>) -> PyResult<()> {
        Evictable::promote(slf.as_super().carrier()?).py()
    }

    /// Whether the contents are on the secondary tier.
    fn is_evicted(slf: PyRef<'_, Self>) -> PyResult<bool> {
        Evictable::is_evicted(slf.as_super().carrier()?).py()
    }

    /// The primary tier.
    #[getter]
    fn primary(slf: PyRef<'_, Self>, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let tier = Evictable::primary(slf.as_super().carrier()?).py()?;
        wrap(py, &tier)
    }

    /// The secondary tier.
    #[getter]
    fn secondary(slf: PyRef<'_, Self>, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let tier = Evictable::secondary(slf.as_super().carrier()?).py()?;
        wrap(py, &tier)
    }
}

/// The open marker base of carrier-specific facets, looked up by exact type.
#[pyclass(name = "CarrierFacet", module = "strideweave", subclass, frozen)]
pub struct PyCarrierFacet;

#[pymethods]
impl PyCarrierFacet {
    /// Takes (and ignores) any arguments, so a subclass's `__init__` may have its own.
    #[new]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn py_new(_args: &Bound<'_, PyTuple>, _kwargs: Option<&Bound<'_, PyDict>>) -> Self {
        PyCarrierFacet
    }
}

/// The core class of one of the extension module's carrier classes (the shipped ones, and
/// strideweave-wgpu's Gpu and GpuHost); `None` for any other class.
pub fn native_core_class(
    py: Python<'_>,
    class: &Bound<'_, PyType>,
) -> PyResult<Option<strideweave::CarrierClass>> {
    use strideweave::CarrierClass;
    Ok(if class.is(py.get_type::<PyCpu>()) {
        Some(CarrierClass::of::<Cpu>())
    } else if class.is(py.get_type::<PyGeneric>()) {
        Some(CarrierClass::of::<Generic>())
    } else if class.is(py.get_type::<PyFileBacked>()) {
        Some(CarrierClass::of::<FileBacked>())
    } else if class.is(py.get_type::<PyEvictable>()) {
        Some(CarrierClass::of::<Evictable>())
    } else if class.is(py.get_type::<crate::tiled::PyTiledEvictable>()) {
        Some(TiledEvictable::class().py()?)
    } else if class.is(py.get_type::<crate::block_device::PyBlockDeviceCarrier>()) {
        Some(CarrierClass::of::<strideweave::carriers::BlockDeviceCarrier>())
    } else {
        crate::gpu::device_core_class(py, class)?
    })
}

/// Whether `class` is one of the extension module's shipped carrier classes (Gpu and GpuHost,
/// strideweave-wgpu's definition-backed classes, are not).
pub fn is_native_class(py: Python<'_>, class: &Bound<'_, PyType>) -> bool {
    [
        py.get_type::<PyCpu>(),
        py.get_type::<PyGeneric>(),
        py.get_type::<PyFileBacked>(),
        py.get_type::<PyEvictable>(),
        py.get_type::<crate::tiled::PyTiledEvictable>(),
        py.get_type::<crate::block_device::PyBlockDeviceCarrier>(),
    ]
    .iter()
    .any(|native| class.is(native))
        || crate::gpu::is_metal_class(py, class)
}

/// One executable operation plan a carrier declares.
#[pyclass(name = "OperationCapability", module = "strideweave", frozen)]
pub struct PyOperationCapability {
    pub(crate) inner: strideweave::operation::OperationCapability,
}

#[pymethods]
impl PyOperationCapability {
    /// Fields are immutable: assignment is a `dataclasses.FrozenInstanceError`.
    fn __setattr__(&self, py: Python<'_>, name: &str, _value: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    /// Fields cannot be deleted either: a `dataclasses.FrozenInstanceError`.
    fn __delattr__(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    /// The original's `OperationCapability(operation, operands, compute, accumulation,
    /// accumulator_dtype, output)`: exactly the plan of these fields, its operands
    /// `OperandCapability` values (every field required; `accumulation` and
    /// `accumulator_dtype` may be `None`). `OperationCapability.from_plan(plan)` builds the
    /// same from a plan; `resolve_operation_plan` resolves a built-in's plan.
    #[new]
    #[pyo3(signature = (operation, operands, compute, accumulation, accumulator_dtype, output))]
    fn py_new(
        operation: &Bound<'_, PyAny>,
        operands: &Bound<'_, PyAny>,
        compute: &Bound<'_, PyAny>,
        accumulation: &Bound<'_, PyAny>,
        accumulator_dtype: &Bound<'_, PyAny>,
        output: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        let plan = crate::planning::plan_from_fields(
            "OperationCapability",
            operation,
            operands,
            compute,
            accumulation,
            accumulator_dtype,
            output,
            |item| {
                item.cast::<crate::planning::PyOperandCapability>()
                    .ok()
                    .map(|c| c.get().inner)
            },
            "OperandCapability",
        )?;
        Ok(PyOperationCapability {
            inner: strideweave::operation::OperationCapability::from_plan(plan),
        })
    }

    /// The capability of exactly `plan` (an `OperationPlan`): how a kernel pattern lists the
    /// plans of a custom operation, which central planning does not resolve.
    #[staticmethod]
    fn from_plan(plan: &Bound<'_, PyAny>) -> PyResult<Self> {
        let plan = crate::custom_ops::expect_plan(plan, "OperationCapability.from_plan plan")?;
        Ok(PyOperationCapability {
            inner: strideweave::operation::OperationCapability::from_plan(plan),
        })
    }

    /// The operation's name.
    #[getter]
    fn operation(&self) -> String {
        self.inner.operation().to_owned()
    }

    /// The operands, in order: `OperandCapability` values.
    #[getter]
    fn operands(&self, py: Python<'_>) -> PyResult<Py<PyTuple>> {
        let items = self
            .inner
            .plan()
            .operands()
            .iter()
            .map(|operand| Py::new(py, crate::planning::PyOperandCapability { inner: *operand }))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(PyTuple::new(py, items)?.unbind())
    }

    /// The compute arithmetic.
    #[getter]
    fn compute(&self) -> crate::custom_ops::PyArithmetic {
        crate::custom_ops::PyArithmetic::of(self.inner.plan().compute())
    }

    /// The accumulation of a reduction, else `None`.
    #[getter]
    fn accumulation(&self) -> Option<crate::custom_ops::PyAccumulation> {
        self.inner
            .plan()
            .accumulation()
            .map(crate::custom_ops::PyAccumulation::of)
    }

    /// The accumulator dtype of a reduction, else `None`.
    #[getter]
    fn accumulator_dtype(&self, py: Python<'_>) -> PyResult<Option<Py<PyDType>>> {
        self.inner
            .plan()
            .accumulator_dtype()
            .map(|dtype| crate::dtype::wrap(py, dtype))
            .transpose()
    }

    /// The output dtype.
    #[getter]
    fn output(&self, py: Python<'_>) -> PyResult<Py<PyDType>> {
        crate::dtype::wrap(py, self.inner.plan().output())
    }

    /// Whether `plan` (an `OperationPlan` or `OperationCapability`) is exactly this
    /// capability's plan: every field takes part.
    fn matches(&self, plan: &Bound<'_, PyAny>) -> PyResult<bool> {
        let plan = crate::custom_ops::expect_plan(plan, "OperationCapability.matches plan")?;
        Ok(self.inner.matches(&plan))
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<PyOperationCapability>()
            .is_ok_and(|other| other.get().inner.matches(self.inner.plan()))
    }

    fn __hash__(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        self.inner.to_string().hash(&mut hasher);
        hasher.finish()
    }

    /// The plan as unsupported-plan reasons quote it.
    fn __str__(&self) -> String {
        self.inner.to_string()
    }

    fn __repr__(&self) -> String {
        format!("OperationCapability('{}')", self.inner)
    }
}
