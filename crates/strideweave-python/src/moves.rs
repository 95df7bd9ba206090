//! `strideweave.carriers.move`'s registry from Python: the movement registration of
//! definition-free carrier classes (seed: "Definition-free carriers retain the existing
//! extension path"). A `MoveOperation` subclass copies one exact class pair in its
//! `_copy(tensor, destination, output, element_count)`; `register_move_operation` makes it the
//! pair's route in the core's registry, so `move` and `move_async` use it with the framework's
//! checks, claims, journal and commit.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyTuple, PyType};
use strideweave::carrier::CarrierClass;
use strideweave::movement::{
    register_move_operation as core_register, registered_move_operation as core_registered,
    unregister_move_operation as core_unregister, ElementwiseMoveOperation as CoreElementwise,
    MoveOperation, MoveTarget,
};
use strideweave::{Error, Layout, Result, Tensor, Value};

use crate::callback_error::park;
use crate::convert::{to_index, to_value, type_name};
use crate::errors::IntoPyResult;
use crate::legacy::PyOperation;

/// Exact (source, destination) class pair → the Python operation class registered for it.
type RouteClasses = HashMap<(CarrierClass, CarrierClass), Py<PyType>>;

/// The Python class registered for each exact pair through this binding.
static ROUTES: LazyLock<Mutex<RouteClasses>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// The base of move operations: the copy step of a move between one exact pair of carrier
/// classes. A subclass overrides `_copy(tensor, destination, output, element_count)`.
#[pyclass(name = "MoveOperation", module = "strideweave.carriers.move", extends = PyOperation, subclass, frozen)]
pub struct PyMoveOperation;

#[pymethods]
impl PyMoveOperation {
    #[new]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn py_new(
        _args: &Bound<'_, PyTuple>,
        _kwargs: Option<&Bound<'_, pyo3::types::PyDict>>,
    ) -> PyClassInitializer<Self> {
        PyClassInitializer::from(PyOperation::undispatched()).add_subclass(PyMoveOperation)
    }

    /// Runs this move directly: `move(tensor, destination)` once the pair is checked against
    /// the exact pair the class is registered (or shipped) for, a `TypeError` naming the class
    /// the pair needs otherwise (nothing moved). A class registered for no pair, such as
    /// `ElementwiseMoveOperation`, moves any pair through its route.
    fn forward(
        slf: &Bound<'_, Self>,
        tensor: &Bound<'_, PyAny>,
        destination: &Bound<'_, PyAny>,
    ) -> PyResult<crate::tensor::PyTensor> {
        let py = slf.py();
        let name = slf.get_type().name()?.to_string();
        let source = crate::tensor::expect_tensor(tensor, &format!("{name}.forward tensor"))?;
        let target =
            crate::carrier::expect_carrier(destination, &format!("{name}.forward destination"))?;
        if let Some((from, to)) = registered_pair(py, &slf.get_type()) {
            let have = source.carrier().class();
            if have.name() != from {
                return Err(PyTypeError::new_err(format!(
                    "{name} requires a {from} source, got a tensor on {have}"
                )));
            }
            if target.class().name() != to {
                return Err(PyTypeError::new_err(format!(
                    "{name} requires a {to} destination, got {}",
                    target.class()
                )));
            }
        }
        crate::movement::move_tensor(py, tensor, destination)
    }
}

/// The (source, destination) class names of the pair the move-operation class `class` is
/// registered for here or stands for as a shipped bulk route, if any.
fn registered_pair(py: Python<'_>, class: &Bound<'_, PyType>) -> Option<(String, String)> {
    let registered = ROUTES
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .find(|(_, registered)| registered.bind(py).is(class))
        .map(|((from, to), _)| (from.name().to_owned(), to.name().to_owned()));
    if registered.is_some() {
        return registered;
    }
    let route = [
        "bulk CPU->FileBacked",
        "bulk FileBacked->CPU",
        "bulk CPU->BlockDeviceCarrier",
        "bulk BlockDeviceCarrier->CPU",
    ]
    .into_iter()
    .find(|route| {
        shipped_route_class(py, route).is_some_and(|shipped| shipped.bind(py).is(class))
    })?;
    let (from, to) = route.trim_start_matches("bulk ").split_once("->")?;
    Some((from.to_owned(), to.to_owned()))
}

/// The default route: copies every slot the source layout addresses, one value at a time,
/// through `output`.
#[pyclass(name = "ElementwiseMoveOperation", module = "strideweave.carriers.move", extends = PyMoveOperation, subclass, frozen)]
pub struct PyElementwiseMoveOperation;

#[pymethods]
impl PyElementwiseMoveOperation {
    #[new]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn py_new(
        _args: &Bound<'_, PyTuple>,
        _kwargs: Option<&Bound<'_, pyo3::types::PyDict>>,
    ) -> PyClassInitializer<Self> {
        PyClassInitializer::from(PyOperation::undispatched())
            .add_subclass(PyMoveOperation)
            .add_subclass(PyElementwiseMoveOperation)
    }

    /// Writes `output[i] = tensor[i]` for every element of `tensor`.
    fn _copy(
        &self,
        py: Python<'_>,
        tensor: &Bound<'_, crate::tensor::PyTensor>,
        _destination: &Bound<'_, PyAny>,
        output: &Bound<'_, MoveOutput>,
        _element_count: usize,
    ) -> PyResult<()> {
        let source = tensor.get().inner.clone();
        let values = crate::finalization::detach(py, || source.to_values()).py()?;
        let output = output.get();
        for (ordinal, value) in values.into_iter().enumerate() {
            output.push(ordinal, value)?;
        }
        Ok(())
    }
}

/// The destination of a Python move operation's `_copy` while it runs: `output[i] = value`
/// writes element `i` (an int ordinal, or a coordinate tuple) of the moved tensor's layout
/// into the destination. The writes are checked and applied by the framework when `_copy`
/// returns (journaled, so a failed move leaves the destination as it was); the object refuses
/// writes once `_copy` has returned.
#[pyclass(name = "MoveOutput", module = "strideweave.carriers.move", frozen)]
pub struct MoveOutput {
    layout: Layout,
    open: AtomicBool,
    writes: Mutex<Vec<(usize, Value)>>,
}

impl MoveOutput {
    /// Writes element `ordinal` of the moved tensor.
    fn push(&self, ordinal: usize, value: Value) -> PyResult<()> {
        let slot = self
            .layout
            .index_of(ordinal)
            .map_err(crate::layout::layout_err)?;
        self.write_slot(slot, value)
    }

    /// Records a write of physical `slot` while `_copy` runs.
    fn write_slot(&self, slot: usize, value: Value) -> PyResult<()> {
        if !self.open.load(Ordering::Acquire) {
            return Err(PyRuntimeError::new_err(
                "a MoveOutput takes writes only while its move operation's _copy runs",
            ));
        }
        self.writes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((slot, value));
        Ok(())
    }
}

#[pymethods]
impl MoveOutput {
    /// Writes element `key` (an ordinal, or one coordinate per top-level mode).
    fn __setitem__(&self, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let value = to_value(value, "MoveOutput value")?;
        if key.is_instance_of::<PyTuple>() {
            let coordinate = crate::convert::to_int_tuple(key, "MoveOutput key")?;
            let slot = self
                .layout
                .index(&coordinate)
                .map_err(crate::layout::layout_err)?;
            return self.write_slot(slot, value);
        }
        let ordinal = to_index(key, "MoveOutput key")?;
        if ordinal >= self.layout.size() {
            return Err(pyo3::exceptions::PyIndexError::new_err(format!(
                "MoveOutput element {ordinal} is out of range for {} elements",
                self.layout.size()
            )));
        }
        self.push(ordinal, value)
    }

    /// The number of elements of the moved tensor.
    fn __len__(&self) -> usize {
        self.layout.size()
    }
}

/// The core route of a Python `MoveOperation` subclass.
struct PythonRoute {
    class: Py<PyType>,
    name: String,
}

impl MoveOperation for PythonRoute {
    fn name(&self) -> &str {
        &self.name
    }

    /// Instantiates the class, runs its `_copy` with a fresh [`MoveOutput`], then writes what
    /// it wrote through the framework's target.
    fn copy(&self, source: &Tensor, target: &MoveTarget<'_>, element_count: usize) -> Result<()> {
        let writes = crate::finalization::attach(|py| {
            let label = format!("{}._copy", self.name);
            let output = Py::new(
                py,
                MoveOutput {
                    layout: source.layout().clone(),
                    open: AtomicBool::new(true),
                    writes: Mutex::new(Vec::new()),
                },
            )
            .map_err(|e| park(py, &label, e))?;
            let run = || -> PyResult<Py<PyAny>> {
                let operation = self.class.bind(py).call0()?;
                let tensor = Py::new(py, crate::tensor::wrap(source.clone()))?;
                let destination = crate::carrier::wrap(py, target.carrier())?;
                let answer = operation.call_method1(
                    "_copy",
                    (tensor, destination, output.clone_ref(py), element_count),
                )?;
                Ok(answer.unbind())
            };
            let answer = run().map_err(|e| park(py, &label, e));
            let output = output.get();
            output.open.store(false, Ordering::Release);
            let answer = answer?;
            if !answer.bind(py).is_none() {
                return Err(Error::Type(format!(
                    "{label} must return None, got {}",
                    type_name(answer.bind(py))
                )));
            }
            let writes =
                std::mem::take(&mut *output.writes.lock().unwrap_or_else(PoisonError::into_inner));
            Ok(writes)
        })?;
        writes
            .into_iter()
            .try_for_each(|(slot, value)| target.write(slot, value))
    }
}

/// The class argument `what`, a Carrier class's core class.
fn carrier_class(class: &Bound<'_, PyAny>, what: &str) -> PyResult<CarrierClass> {
    let base = class.py().get_type::<crate::carrier::PyCarrier>();
    let is_carrier_class = class
        .cast::<PyType>()
        .is_ok_and(|class| class.is_subclass(&base).unwrap_or(false));
    if !is_carrier_class {
        return Err(PyTypeError::new_err(format!(
            "{what} must be a Carrier subclass, got {}",
            describe(class)
        )));
    }
    crate::authoring::core_class_of(class, what)
}

/// `register_move_operation(source_class, destination_class, operation_class)`: makes the
/// `MoveOperation` subclass `operation_class` the route of the exact pair. A pair already
/// registered, or with a BlockDeviceCarrier end, is a `ValueError`; a definition-backed end a
/// `RuntimeError` naming `TransferRoute`.
#[pyfunction]
pub fn register_move_operation(
    py: Python<'_>,
    source_class: &Bound<'_, PyAny>,
    destination_class: &Bound<'_, PyAny>,
    operation_class: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let source = carrier_class(source_class, "source_class")?;
    let destination = carrier_class(destination_class, "destination_class")?;
    let operation = operation_class
        .cast::<PyType>()
        .ok()
        .filter(|class| {
            class
                .is_subclass(&py.get_type::<PyMoveOperation>())
                .unwrap_or(false)
        })
        .ok_or_else(|| {
            PyTypeError::new_err(format!(
                "operation_class must be a MoveOperation subclass, got {}",
                describe(operation_class)
            ))
        })?;
    let route: Arc<dyn MoveOperation> = if operation.is(py.get_type::<PyElementwiseMoveOperation>())
    {
        Arc::new(CoreElementwise)
    } else {
        Arc::new(PythonRoute {
            class: operation.clone().unbind(),
            name: operation.name()?.to_string(),
        })
    };
    crate::finalization::detach(py, || core_register(source, destination, route)).py()?;
    ROUTES
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert((source, destination), operation.clone().unbind());
    Ok(())
}

/// `unregister_move_operation(source_class, destination_class)`: removes the pair's route and
/// returns the operation class that was registered (`KeyError` for a pair without one).
#[pyfunction]
pub fn unregister_move_operation(
    py: Python<'_>,
    source_class: &Bound<'_, PyAny>,
    destination_class: &Bound<'_, PyAny>,
) -> PyResult<Py<PyType>> {
    let source = carrier_class(source_class, "source_class")?;
    let destination = carrier_class(destination_class, "destination_class")?;
    let class = operation_class_of(py, source, destination);
    crate::finalization::detach(py, || core_unregister(source, destination)).py()?;
    ROUTES
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(&(source, destination));
    Ok(class.unwrap_or_else(|| py.get_type::<PyMoveOperation>().unbind()))
}

/// `dispatch_move(source_class, destination_class)`: the operation class that moves the exact
/// pair — the registered one, else `ElementwiseMoveOperation`. A pair with a BlockDeviceCarrier
/// end and no route is `NotImplementedError`; a definition-backed end `RuntimeError` (those
/// move through their definition's `TransferRoute`).
#[pyfunction]
pub fn dispatch_move(
    py: Python<'_>,
    source_class: &Bound<'_, PyAny>,
    destination_class: &Bound<'_, PyAny>,
) -> PyResult<Py<PyType>> {
    let source = carrier_class(source_class, "source_class")?;
    let destination = carrier_class(destination_class, "destination_class")?;
    for class in [source, destination] {
        if class.is_definition_backed() {
            return Err(PyRuntimeError::new_err(format!(
                "{class} is a definition-backed carrier class: it moves through its \
                 definition's TransferRoute values, not the move-operation registry"
            )));
        }
    }
    if let Some(class) = operation_class_of(py, source, destination) {
        return Ok(class);
    }
    let block = ["BlockDeviceCarrier"];
    if block.contains(&source.name()) || block.contains(&destination.name()) {
        return Err(pyo3::exceptions::PyNotImplementedError::new_err(format!(
            "no move route from {source} to {destination}: BlockDeviceCarrier moves only to \
             and from CPU"
        )));
    }
    Ok(py.get_type::<PyElementwiseMoveOperation>().unbind())
}

/// The Python operation class of the pair's registered route: the one registered here, or
/// the class named after a shipped bulk route.
fn operation_class_of(
    py: Python<'_>,
    source: CarrierClass,
    destination: CarrierClass,
) -> Option<Py<PyType>> {
    let registered = core_registered(source, destination)?;
    if let Some(class) = ROUTES
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&(source, destination))
    {
        return Some(class.clone_ref(py));
    }
    shipped_route_class(py, registered.name())
}

/// The classes standing for the shipped bulk routes, by their Python names, for the module.
pub fn shipped_route_classes(py: Python<'_>) -> Vec<(&'static str, Py<PyType>)> {
    [
        ("CpuToFileBackedMoveOperation", "bulk CPU->FileBacked"),
        ("FileBackedToCpuMoveOperation", "bulk FileBacked->CPU"),
        (
            "CpuToBlockDeviceMoveOperation",
            "bulk CPU->BlockDeviceCarrier",
        ),
        (
            "BlockDeviceToCpuMoveOperation",
            "bulk BlockDeviceCarrier->CPU",
        ),
    ]
    .into_iter()
    .filter_map(|(name, route)| Some((name, shipped_route_class(py, route)?)))
    .collect()
}

/// The Python class standing for the shipped bulk route named `name`.
fn shipped_route_class(py: Python<'_>, name: &str) -> Option<Py<PyType>> {
    let class = match name {
        "bulk CPU->FileBacked" => "CpuToFileBackedMoveOperation",
        "bulk FileBacked->CPU" => "FileBackedToCpuMoveOperation",
        "bulk CPU->BlockDeviceCarrier" => "CpuToBlockDeviceMoveOperation",
        "bulk BlockDeviceCarrier->CPU" => "BlockDeviceToCpuMoveOperation",
        _ => return None,
    };
    static SHIPPED: LazyLock<Mutex<HashMap<&'static str, Py<PyType>>>> =
        LazyLock::new(|| Mutex::new(HashMap::new()));
    let mut shipped = SHIPPED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(made) = shipped.get(class) {
        return Some(made.clone_ref(py));
    }
    let base = py.get_type::<PyMoveOperation>();
    let made = py
        .get_type::<PyType>()
        .call1((class, (base,), pyo3::types::PyDict::new(py)))
        .ok()?
        .cast_into::<PyType>()
        .ok()?;
    made.setattr("__module__", "strideweave.carriers.move")
        .ok()?;
    shipped.insert(class, made.clone().unbind());
    Some(made.unbind())
}

fn describe(object: &Bound<'_, PyAny>) -> String {
    match object.cast::<PyType>() {
        Ok(class) => class
            .name()
            .map(|n| n.to_string())
            .unwrap_or_else(|_| "a class".to_owned()),
        Err(_) => type_name(object),
    }
}
