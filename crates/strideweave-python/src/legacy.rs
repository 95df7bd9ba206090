//! Definition-free carrier classes written in Python (seed: "Definition-free carriers retain
//! the existing extension path"): a `Carrier` subclass with no registered definition supplies
//! the legacy storage hooks as methods, a dispatch hook (`_dispatch_op`) returning a fresh
//! `Operation`, and gets its capabilities from `register_operation_capabilities` and its moves
//! from `register_move_operation`.
//!
//! The instance's `Carrier.__init__()`, called with no arguments, builds its core carrier: a
//! definition-free body of the class's own core class whose hooks call the instance's methods.
//! `dtype()` and `_is_mutable()` are read once there (the framework owns the dtype and the
//! mutability from then on), and so is `size()` (the framework owns the extent; `_allocate`
//! grows an empty destination).

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyList, PyTuple, PyType};
use strideweave::carrier::{CarrierClass, DefinitionFreeCarrier};
use strideweave::operation::{Operand, Operation, OperationCapability, ResolvedInvocation};
use strideweave::{Carrier, DType, Error, Result, Tensor, Value};

use crate::callback_error::park;
use crate::carrier::PyCarrier;
use crate::convert::{from_value, to_value, type_name};
use crate::errors::IntoPyResult;
use crate::instance_link::InstanceLink;
use crate::tensor::PyTensor;

/// The core body of a definition-free Python carrier: the link to its instance, whose methods
/// are the hooks.
pub struct PyLegacyBody {
    pub(crate) link: Arc<InstanceLink>,
    class: CarrierClass,
    /// The extent, owned by the framework: read from `size()` at construction, set again when
    /// `_allocate` grows the carrier.
    extent: AtomicUsize,
    /// A definition-free `DependentCarrier`'s capabilities, frozen by its
    /// `_finalize_dependent_capabilities()`; `None` for an independent class, whose
    /// declaration answers.
    snapshot: Option<Arc<[OperationCapability]>>,
}

impl PyLegacyBody {
    /// Calls the instance's method `name` with `args` (and `kwargs`); a Python exception is
    /// the parked core error.
    fn call<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        args: impl pyo3::call::PyCallArgs<'py>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> Result<Py<PyAny>> {
        let label = format!("{}.{name}", self.class);
        let instance = self.link.instance(py)?;
        instance
            .bind(py)
            .call_method(name, args, kwargs)
            .map(Bound::unbind)
            .map_err(|error| park(py, &label, error))
    }

    /// Whether the instance's class defines the optional hook `name`.
    fn defines(&self, py: Python<'_>, name: &str) -> Result<bool> {
        let instance = self.link.instance(py)?;
        Ok(instance.bind(py).hasattr(name).unwrap_or(false))
    }

    /// A `None` answer of the hook `name`, or a Type error naming it.
    fn none(&self, py: Python<'_>, name: &str, answer: &Py<PyAny>) -> Result<()> {
        if answer.bind(py).is_none() {
            return Ok(());
        }
        Err(Error::Type(format!(
            "{}.{name} must return None, got {}",
            self.class,
            type_name(answer.bind(py))
        )))
    }

    /// The core carrier of what a factory hook `name` returned.
    fn made(&self, py: Python<'_>, name: &str, made: &Py<PyAny>) -> Result<Carrier> {
        let made = made.bind(py);
        let held = made.cast::<PyCarrier>().map_err(|_| {
            Error::Type(format!(
                "{}.{name} must return a Carrier, got {}",
                self.class,
                type_name(made)
            ))
        })?;
        held.get().carrier().cloned().map_err(|_| {
            Error::Type(format!(
                "{}.{name} returned a {} that was never constructed",
                self.class,
                type_name(made)
            ))
        })
    }
}

impl DefinitionFreeCarrier for PyLegacyBody {
    const NAME: &'static str = "Python carrier";

    fn carrier_class(&self) -> CarrierClass {
        self.class
    }

    fn supports_storage_dtype(&self, dtype: DType) -> bool {
        self.try_supports_storage_dtype(dtype)
            .unwrap_or_else(|error| {
                crate::callback_error::discard(&error);
                false
            })
    }

    /// `_supports_storage_dtype(dtype)` when the class defines it, else whether `dtype` is the
    /// instance's `dtype()`.
    fn try_supports_storage_dtype(&self, dtype: DType) -> Result<bool> {
        crate::finalization::attach(|py| {
            let wrapped = crate::dtype::wrap(py, dtype)
                .map_err(|e| park(py, "_supports_storage_dtype", e))?;
            if !self.defines(py, "_supports_storage_dtype")? {
                let own = self.call(py, "dtype", (), None)?;
                return Ok(own.bind(py).is(wrapped.bind(py)));
            }
            let answer = self.call(py, "_supports_storage_dtype", (wrapped,), None)?;
            answer
                .bind(py)
                .cast::<PyBool>()
                .map(|b| b.is_true())
                .map_err(|_| {
                    Error::Type(format!(
                        "{}._supports_storage_dtype must return a bool, got {}",
                        self.class,
                        type_name(answer.bind(py))
                    ))
                })
        })
    }

    fn size(&self) -> usize {
        self.extent.load(Ordering::Acquire)
    }

    /// `get_value(index)`, which must give a bool, int or float.
    fn read(&self, index: usize, _dtype: DType) -> Result<Value> {
        crate::finalization::attach(|py| {
            let answer = self.call(py, "get_value", (index,), None)?;
            to_value(answer.bind(py), "get_value's result").map_err(|_| {
                Error::Type(format!(
                    "{}.get_value must return a bool, int or float, got {}",
                    self.class,
                    type_name(answer.bind(py))
                ))
            })
        })
    }

    /// `set_value(index, value)`, which must return None.
    fn write(&self, index: usize, value: Value, _dtype: DType) -> Result<()> {
        crate::finalization::attach(|py| {
            let value = from_value(py, value).map_err(|e| park(py, "set_value", e))?;
            let answer = self.call(py, "set_value", (index, value), None)?;
            self.none(py, "set_value", &answer)
        })
    }

    /// `_release()` when the class defines it.
    fn release(&self) -> Result<()> {
        crate::finalization::attach(|py| {
            if !self.defines(py, "_release")? {
                return Ok(());
            }
            let answer = self.call(py, "_release", (), None)?;
            self.none(py, "_release", &answer)
        })
    }

    /// Never called: the class's own `new_like` makes complete carriers
    /// ([`new_like_carrier`](Self::new_like_carrier)).
    fn new_like(&self, _values: &[Value], _dtype: DType) -> Result<Self> {
        Err(Error::Runtime(format!(
            "{} makes its fresh carriers through its own new_like",
            self.class
        )))
    }

    /// Never called: the class's own `allocate_like` makes complete carriers.
    fn allocate_like(&self, _size: usize, _dtype: DType, _empty: bool) -> Result<Self> {
        Err(Error::Runtime(format!(
            "{} makes its fresh carriers through its own allocate_like",
            self.class
        )))
    }

    /// `new_like(values, mutable=...)` (with `dtype=` when another dtype is asked for).
    fn new_like_carrier(
        &self,
        values: &[Value],
        dtype: DType,
        mutable: bool,
    ) -> Option<Result<Carrier>> {
        Some(crate::finalization::attach(|py| {
            let list = values
                .iter()
                .map(|value| from_value(py, *value))
                .collect::<PyResult<Vec<_>>>()
                .and_then(|items| PyList::new(py, items))
                .map_err(|e| park(py, "new_like", e))?;
            let kwargs = self
                .factory_options(py, dtype, mutable, None)
                .map_err(|e| park(py, "new_like", e))?;
            let made = self.call(py, "new_like", (list,), Some(&kwargs))?;
            self.made(py, "new_like", &made)
        }))
    }

    /// `allocate_like(size, mutable=..., dtype=..., empty=...)`.
    fn allocate_like_carrier(
        &self,
        size: usize,
        dtype: DType,
        empty: bool,
        mutable: bool,
    ) -> Option<Result<Carrier>> {
        Some(crate::finalization::attach(|py| {
            let kwargs = self
                .factory_options(py, dtype, mutable, Some(empty))
                .map_err(|e| park(py, "allocate_like", e))?;
            let made = self.call(py, "allocate_like", (size,), Some(&kwargs))?;
            self.made(py, "allocate_like", &made)
        }))
    }

    /// An empty carrier grows as a move destination when the class defines `_allocate`.
    fn grows_as_destination(&self) -> bool {
        crate::finalization::attach(|py| self.defines(py, "_allocate")).unwrap_or(false)
    }

    /// `_allocate(slots)`, then the new extent.
    fn set_extent(&self, slots: usize, _dtype: DType) -> Result<()> {
        crate::finalization::attach(|py| {
            let answer = self.call(py, "_allocate", (slots,), None)?;
            self.none(py, "_allocate", &answer)
        })?;
        self.extent.store(slots, Ordering::Release);
        Ok(())
    }

    fn instance_capabilities(&self) -> Option<Arc<[OperationCapability]>> {
        self.snapshot.clone()
    }

    /// `_dispatch_op(name)`, which must return a fresh `Operation`; a class without the hook
    /// runs no operation (NotImplemented).
    fn dispatch_op(&self, name: &str) -> Result<Operation> {
        crate::finalization::attach(|py| {
            if !self.defines(py, "_dispatch_op")? {
                return Err(Error::NotImplemented(format!(
                    "{} does not support operation '{name}': it defines no _dispatch_op",
                    self.class
                )));
            }
            let answer = self.call(py, "_dispatch_op", (name,), None)?;
            let operation = answer.bind(py).cast::<PyOperation>().map_err(|_| {
                Error::Type(format!(
                    "{}._dispatch_op must return an Operation, got {}",
                    self.class,
                    type_name(answer.bind(py))
                ))
            })?;
            let core = PyOperation::bind_core(operation, self.class)?;
            LAST_DISPATCHED.with(|last| *last.borrow_mut() = Some(answer.clone_ref(py)));
            Ok(core)
        })
    }
}

impl PyLegacyBody {
    /// The keyword arguments of a factory call: `mutable`, `dtype` when it is not the
    /// instance's own, and `empty` for `allocate_like`.
    fn factory_options<'py>(
        &self,
        py: Python<'py>,
        dtype: DType,
        mutable: bool,
        empty: Option<bool>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let kwargs = PyDict::new(py);
        kwargs.set_item("mutable", mutable)?;
        let wrapped = crate::dtype::wrap(py, dtype)?;
        let instance = self
            .link
            .instance(py)
            .map_err(|e| PyTypeError::new_err(e.to_string()))?;
        let own = instance.bind(py).call_method0("dtype")?;
        if empty.is_some() || !own.is(wrapped.bind(py)) {
            kwargs.set_item("dtype", wrapped)?;
        }
        if let Some(empty) = empty {
            kwargs.set_item("empty", empty)?;
        }
        Ok(kwargs)
    }
}

thread_local! {
    /// The Python operation the last dispatch hook on this thread returned, for
    /// `Carrier.dispatch_op` to hand back the very object.
    static LAST_DISPATCHED: RefCell<Option<Py<PyAny>>> = const { RefCell::new(None) };
}

/// The Python `Operation` the dispatch hook that just ran on this thread returned.
pub fn take_dispatched() -> Option<Py<PyAny>> {
    LAST_DISPATCHED.with(|last| last.borrow_mut().take())
}

/// Builds the core carrier of `instance`, a definition-free Python carrier whose class is
/// `class`: reads `dtype()`, `_is_mutable()` (False when the class does not define it) and
/// `size()` once, and links the instance. `snapshot` is a dependent instance's frozen
/// capabilities (`None` for an independent class).
pub fn construct(
    instance: &Bound<'_, PyAny>,
    class: CarrierClass,
    snapshot: Option<Arc<[OperationCapability]>>,
) -> PyResult<Carrier> {
    let py = instance.py();
    let name = class.name();
    let dtype = instance.call_method0("dtype")?;
    let dtype = crate::authoring::dtype_of(&dtype).map_err(|_| {
        PyTypeError::new_err(format!(
            "{name}.dtype() must return a DType, got {}",
            type_name(&dtype)
        ))
    })?;
    let mutable = if instance.hasattr("_is_mutable")? {
        let answer = instance.call_method0("_is_mutable")?;
        answer.cast::<PyBool>().map(|b| b.is_true()).map_err(|_| {
            PyTypeError::new_err(format!(
                "{name}._is_mutable() must return a bool, got {}",
                type_name(&answer)
            ))
        })?
    } else {
        false
    };
    let size = instance.call_method0("size")?;
    if size.is_instance_of::<PyBool>() || !size.is_instance_of::<PyInt>() {
        return Err(PyTypeError::new_err(format!(
            "{name}.size() must return an int, got {}",
            type_name(&size)
        )));
    }
    let size: usize = size.extract().map_err(|_| {
        pyo3::exceptions::PyValueError::new_err(format!(
            "{name}.size() must return a non-negative int that fits a slot count"
        ))
    })?;
    let link = InstanceLink::new(instance.clone().unbind());
    let body = PyLegacyBody {
        link: Arc::clone(&link),
        class,
        extent: AtomicUsize::new(size),
        snapshot,
    };
    let carrier = crate::finalization::detach(py, || Carrier::new(body, dtype, mutable)).py()?;
    // Only a carrier that exists links its object: a refused construction leaves the
    // instance as it was, free to be constructed again.
    instance.cast::<PyCarrier>()?.get().set_link(&link);
    Ok(carrier)
}

/// The Python instance behind a definition-free Python carrier.
pub fn instance_of(py: Python<'_>, carrier: &Carrier) -> Option<Py<PyAny>> {
    carrier
        .downcast_ref::<PyLegacyBody>()
        .and_then(|body| body.link.instance(py).ok())
}

/// `strideweave.operation.Operation`: one dispatched computation. A definition-free carrier's
/// `_dispatch_op(name)` returns a fresh instance of a subclass whose `_forward(*operands)`
/// computes the operation and returns its result Tensor (or a tuple of them); the framework
/// dispatches it once, tags it with the operation's name and the exact carrier class, and runs
/// it through the pipeline's gate and publication check.
#[pyclass(name = "Operation", module = "strideweave.operation", subclass, frozen)]
pub struct PyOperation {
    core: OnceLock<Operation>,
}

#[pymethods]
impl PyOperation {
    #[new]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn py_new(_args: &Bound<'_, PyTuple>, _kwargs: Option<&Bound<'_, PyDict>>) -> Self {
        PyOperation {
            core: OnceLock::new(),
        }
    }

    /// Runs this dispatched operation on `operands` (and `options`), bound and resolved
    /// against the operation's definition, through the dispatching carrier's execution: its
    /// result Tensor, or a tuple of them. Records nothing for autograd.
    #[pyo3(signature = (*operands, **options))]
    fn forward(
        &self,
        py: Python<'_>,
        operands: &Bound<'_, PyTuple>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let core = self.core.get().ok_or_else(|| {
            PyTypeError::new_err(
                "this Operation was not dispatched: get one from carrier.dispatch_op(name)",
            )
        })?;
        let name = core.name().unwrap_or_default().to_owned();
        let definition = strideweave::operation::operation_definition(&name).py()?;
        let invocation = crate::custom_ops::resolve_call(py, &definition, operands, options)?;
        let results = crate::finalization::detach(py, || core.forward(&invocation)).py()?;
        let mut objects = results
            .into_iter()
            .map(|result| crate::custom_ops::result_object(py, operands, result))
            .collect::<PyResult<Vec<_>>>()?;
        if objects.len() == 1 {
            return Ok(objects.remove(0).into_any());
        }
        Ok(PyTuple::new(py, objects)?.into_any().unbind())
    }

    /// The name this operation was dispatched for (`None` before its dispatch).
    #[getter]
    fn _operation_name(&self) -> Option<String> {
        self.core.get().and_then(|c| c.name().map(str::to_owned))
    }

    /// The exact carrier class that dispatched it (`None` before its dispatch).
    #[getter]
    fn _dispatch_carrier_class(&self, py: Python<'_>) -> Option<Py<PyType>> {
        let class = self.core.get()?.carrier_class()?;
        crate::authoring::python_class(py, class)
    }
}

/// The Python object of `operation`, dispatched by a carrier whose hook is not Python's.
pub fn dispatched(py: Python<'_>, operation: Operation) -> PyResult<Py<PyAny>> {
    let object = PyOperation {
        core: OnceLock::new(),
    };
    let _ = object.core.set(operation);
    Ok(Py::new(py, object)?.into_any())
}

impl PyOperation {
    /// An operation no carrier has dispatched yet.
    pub(crate) fn undispatched() -> PyOperation {
        PyOperation {
            core: OnceLock::new(),
        }
    }

    /// The core operation of a Python operation the dispatch hook of `class` returned: fresh
    /// (a Type error for one dispatched before), its forward calling `_forward`.
    fn bind_core(operation: &Bound<'_, PyOperation>, class: CarrierClass) -> Result<Operation> {
        let object = operation.clone().unbind();
        let core = Operation::new(move |invocation| forward(&object, invocation));
        if operation.get().core.set(core.clone()).is_err() {
            return Err(Error::Type(format!(
                "{class}._dispatch_op must return a fresh Operation instance; it returned one \
                 already dispatched"
            )));
        }
        Ok(core)
    }
}

/// Runs `_forward(*operands)` of the Python operation `object` on `invocation`: its result
/// Tensor, or tuple or list of Tensors.
fn forward(object: &Py<PyOperation>, invocation: &ResolvedInvocation) -> Result<Vec<Tensor>> {
    crate::finalization::attach(|py| {
        let label = "Operation._forward";
        let operands = invocation
            .call()
            .operands()
            .iter()
            .map(|operand| match operand {
                Operand::Tensor(tensor) => {
                    Py::new(py, crate::tensor::wrap(tensor.clone())).map(Py::into_any)
                }
                Operand::Scalar(value) => from_value(py, *value),
            })
            .collect::<PyResult<Vec<_>>>()
            .and_then(|items| PyTuple::new(py, items))
            .map_err(|e| park(py, label, e))?;
        let result = object
            .bind(py)
            .call_method1("_forward", operands)
            .map_err(|e| park(py, label, e))?;
        if let Ok(tensor) = result.cast::<PyTensor>() {
            return Ok(vec![tensor.get().inner.clone()]);
        }
        let items: Vec<Bound<'_, PyAny>> = if let Ok(tuple) = result.cast::<PyTuple>() {
            tuple.iter().collect()
        } else if let Ok(list) = result.cast::<PyList>() {
            list.iter().collect()
        } else {
            return Err(not_tensors(&result));
        };
        items
            .iter()
            .map(|item| {
                item.cast::<PyTensor>()
                    .map(|t| t.get().inner.clone())
                    .map_err(|_| not_tensors(item))
            })
            .collect()
    })
}

fn not_tensors(result: &Bound<'_, PyAny>) -> Error {
    Error::Type(format!(
        "Operation._forward must return a Tensor or a tuple of Tensors, got {}",
        type_name(result)
    ))
}
