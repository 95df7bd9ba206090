//! Carriers written in Python: the `StorageProvider` and `CarrierDefinition` records,
//! `register_carrier_definition`, and the construction of a registered Python class.
//!
//! A Python carrier class registered with a definition gets a core class of its own
//! (`CarrierClass::mint`); the core's provider state of each carrier is the Python instance
//! itself, so every storage callback receives that exact instance.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt, PyTuple, PyType};
use strideweave::carrier::ClassKind;
use strideweave::carriers::extension::{
    register_carrier_definition as core_register, CarrierDefinition, CarrierFacet, StorageProvider,
};
use strideweave::{Carrier, CarrierClass, DType, Error, Value};

use crate::callback_error::park;
use crate::carrier::{PyCarrier, PyCarrierFacet};
use crate::convert::{from_value, to_value, type_name};
use crate::dtype::PyDType;
use crate::errors::IntoPyResult;

/// The provider state of a carrier of a Python class: its Python instance.
pub struct PyState {
    pub(crate) instance: Py<PyAny>,
}

/// The core class minted for each Python carrier class, by the class object's address (the
/// class object is kept alive here, so the address is never reused).
static CLASSES: LazyLock<Mutex<ClassTable>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// Python carrier class object address → (the class, its core class).
type ClassTable = HashMap<usize, (Py<PyType>, CarrierClass)>;

/// The core class of Python class `class`, minted on first use.
fn class_of(class: &Bound<'_, PyType>) -> PyResult<CarrierClass> {
    let key = class.as_ptr() as usize;
    let mut classes = CLASSES.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, core)) = classes.get(&key) {
        return Ok(*core);
    }
    let name = class.qualname()?.to_string();
    let core = CarrierClass::mint(&name, ClassKind::Independent);
    classes.insert(key, (class.clone().unbind(), core));
    Ok(core)
}

/// The core class already minted for `class`, if any.
fn known_class(class: &Bound<'_, PyType>) -> Option<CarrierClass> {
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
        StorageProvider::new_fallible(
            move |state: &PyState, dtype: DType| {
                Python::attach(|py| {
                    let dtype =
                        crate::dtype::wrap(py, dtype).map_err(|e| park(py, "supports_dtype", e))?;
                    let args = PyTuple::new(py, [state.instance.clone_ref(py), dtype.into_any()])
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
                Python::attach(|py| {
                    let args = PyTuple::new(py, [state.instance.clone_ref(py)])
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
                Python::attach(|py| {
                    let slots = PyInt::new(py, slots).into_any().unbind();
                    let args = PyTuple::new(py, [state.instance.clone_ref(py), slots])
                        .map_err(|e| park(py, "allocate", e))?;
                    let answer = call(py, "allocate", &allocate, args)?;
                    expect_none(py, "allocate", &answer)
                })
            },
            move |state: &mut PyState| {
                Python::attach(|py| {
                    let args = PyTuple::new(py, [state.instance.clone_ref(py)])
                        .map_err(|e| park(py, "release", e))?;
                    let answer = call(py, "release", &release, args)?;
                    expect_none(py, "release", &answer)
                })
            },
            move |state: &PyState, index: usize| {
                Python::attach(|py| {
                    let index = PyInt::new(py, index).into_any().unbind();
                    let args = PyTuple::new(py, [state.instance.clone_ref(py), index])
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
                Python::attach(|py| {
                    let index = PyInt::new(py, index).into_any().unbind();
                    let value = from_value(py, value).map_err(|e| park(py, "write", e))?;
                    let args = PyTuple::new(py, [state.instance.clone_ref(py), index, value])
                        .map_err(|e| park(py, "write", e))?;
                    let answer = call(py, "write", &write, args)?;
                    expect_none(py, "write", &answer)
                })
            },
            |state: &PyState| {
                Python::attach(|py| {
                    let instance = state.instance.bind(py);
                    let class = instance.get_type();
                    let fresh = class
                        .call_method1("__new__", (class.clone(),))
                        .map_err(|e| park(py, "a fresh carrier's __new__", e))?;
                    Ok(PyState {
                        instance: fresh.unbind(),
                    })
                })
            },
        )
        .with_elementwise_fallback(self.elementwise_fallback)
    }
}

/// Materializes a finite iterable once into a tuple; `what` names the field.
fn materialize<'py>(object: &Bound<'py, PyAny>, what: &str) -> PyResult<Bound<'py, PyTuple>> {
    let iterator = object.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "{what} must be an iterable, got {}",
            type_name(object)
        ))
    })?;
    let items = iterator.collect::<PyResult<Vec<_>>>()?;
    PyTuple::new(object.py(), items)
}

/// The seed's `CarrierDefinition`: one carrier implementation, immutable.
///
/// This package accepts the storage provider and facets; `kernels` and `composite` must be
/// `None` and `transfers` empty until the kernel, transfer and composite records exist.
#[pyclass(name = "CarrierDefinition", module = "strideweave", frozen)]
pub struct PyCarrierDefinition {
    storage: Py<PyStorageProvider>,
    #[pyo3(get)]
    transfers: Py<PyTuple>,
    #[pyo3(get)]
    facets: Py<PyTuple>,
}

#[pymethods]
impl PyCarrierDefinition {
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
        if let Some(kernels) = kernels.filter(|k| !k.is_none()) {
            return Err(PyTypeError::new_err(format!(
                "CarrierDefinition kernels must be a KernelProvider or None, got {} \
                 (KernelProvider is not available in this package yet)",
                type_name(kernels)
            )));
        }
        if let Some(composite) = composite.filter(|c| !c.is_none()) {
            return Err(PyTypeError::new_err(format!(
                "CarrierDefinition composite must be a CompositeProvider or None, got {} \
                 (CompositeProvider is not available in this package yet)",
                type_name(composite)
            )));
        }
        let transfers = match transfers {
            None => PyTuple::empty(py),
            Some(routes) => materialize(routes, "CarrierDefinition transfers")?,
        };
        if let Some(route) = transfers.iter().next() {
            return Err(PyTypeError::new_err(format!(
                "CarrierDefinition transfers must hold TransferRoute values, got {} \
                 (TransferRoute is not available in this package yet)",
                type_name(&route)
            )));
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
                    "CarrierDefinition facets hold two facets of the exact class {}",
                    class.name()?
                )));
            }
            seen.push(class);
        }
        Ok(PyCarrierDefinition {
            storage: storage.clone().unbind(),
            transfers: transfers.unbind(),
            facets: facets.unbind(),
        })
    }

    /// The storage provider.
    #[getter]
    fn storage(&self, py: Python<'_>) -> Py<PyStorageProvider> {
        self.storage.clone_ref(py)
    }

    /// Always `None` in this package (no kernel provider yet).
    #[getter]
    fn kernels(&self) -> Option<Py<PyAny>> {
        None
    }

    /// Always `None` in this package (no composite provider yet).
    #[getter]
    fn composite(&self) -> Option<Py<PyAny>> {
        None
    }
}

/// Binds `definition` to exactly `carrier_class` and returns `None`.
///
/// `carrier_class` must be a Carrier subclass written in Python (not `Carrier`, not a
/// shipped class); a class is defined once.
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
    let storage = definition.storage.get().to_core(py);
    let mut core = CarrierDefinition::new(storage);
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
    py.detach(|| core_register(core_class, core)).py()
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
    let state = PyState {
        instance: instance.clone().unbind(),
    };
    py.detach(|| Carrier::create(core_class, state, slots, dtype, mutable))
        .py()
}

/// The Python instance behind a carrier of a Python class.
pub fn instance_of(py: Python<'_>, carrier: &Carrier) -> Option<Py<PyAny>> {
    carrier
        .with_provider_state::<PyState, _>(|state| state.instance.clone_ref(py))
        .ok()
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
