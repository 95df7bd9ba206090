//! Custom operations defined from Python, with a Python backward rule (docs/python.md,
//! Custom operations): the schema records (`OperandKind`, `OperandSpec`, `OptionSpec`,
//! `OperationSchema`), dtype plans (`Arithmetic`, `Accumulation`, `OperandPlan`,
//! `OperationPlan`), the call a resolver sees (`BoundOperationCall`), the backward context
//! (`VJPContext`), `define_operation` and `call`. Each is the core record of the same name
//! underneath, so naming rules, binding, planning, dispatch, result validation and the
//! gradient checks are the core's.
//!
//! The resolver and the backward rule run with the GIL taken back for their duration, on
//! whatever thread the core calls them (the calling thread of the operation or of
//! `backward`). An exception either raises is parked and re-raised as the same object when
//! the error leaves the core (crate::callback_error).

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use strideweave::operation::{
    define_operation as core_define, operation_definition as core_definition, Accumulation,
    Arithmetic, BoundOperationCall, Operand, OperandKind, OperandPlan, OperandSpec,
    OperationDefinition, OperationPlan, OperationSchema, OptionSpec, OptionValue,
    ResolvedInvocation, Vjp, VjpContext,
};
use strideweave::{Error, Tensor};

use crate::callback_error::park;
use crate::convert::{from_value, to_value, type_name};
use crate::dtype::PyDType;
use crate::errors::IntoPyResult;
use crate::invocation::{operand_object, PyOperationDefinition, PyResolvedInvocation};
use crate::prepared::{expect_callable, materialize};
use crate::tensor::{wrap as wrap_tensor, PyTensor};

/// The seed's `OperandKind`: how one operand position binds — a tensor, a weak scalar (a
/// Python number adopting its tensor partner's kind), or either, passed through to the
/// resolver (structural).
#[pyclass(name = "OperandKind", module = "strideweave", frozen, eq, hash)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub enum PyOperandKind {
    /// A Tensor operand.
    #[pyo3(name = "TENSOR")]
    Tensor,
    /// A Python scalar that adopts the tensor's kind.
    #[pyo3(name = "WEAK_SCALAR")]
    WeakScalar,
    /// A Tensor or a scalar, passed through to the resolver.
    #[pyo3(name = "STRUCTURAL")]
    Structural,
}

impl PyOperandKind {
    fn core(self) -> OperandKind {
        match self {
            PyOperandKind::Tensor => OperandKind::Tensor,
            PyOperandKind::WeakScalar => OperandKind::WeakScalar,
            PyOperandKind::Structural => OperandKind::Structural,
        }
    }

    fn of(kind: OperandKind) -> Self {
        match kind {
            OperandKind::Tensor => PyOperandKind::Tensor,
            OperandKind::WeakScalar => PyOperandKind::WeakScalar,
            OperandKind::Structural => PyOperandKind::Structural,
        }
    }
}

#[pymethods]
impl PyOperandKind {
    /// The seed's string value: `"tensor"`, `"weak_scalar"` or `"structural"`.
    #[getter]
    fn value(&self) -> &'static str {
        match self {
            PyOperandKind::Tensor => "tensor",
            PyOperandKind::WeakScalar => "weak_scalar",
            PyOperandKind::Structural => "structural",
        }
    }
}

/// The seed's `Arithmetic`: the arithmetic an operation plan computes in.
#[pyclass(name = "Arithmetic", module = "strideweave", frozen, eq, hash)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub enum PyArithmetic {
    /// IEEE binary32, round to nearest even.
    #[pyo3(name = "BINARY32")]
    Binary32,
    /// Exact 32-bit integers; leaving the range is an `OverflowError`.
    #[pyo3(name = "INT32_EXACT_CHECKED")]
    Int32ExactChecked,
    /// Exact 32-bit integers that cannot leave the range.
    #[pyo3(name = "INT32_EXACT")]
    Int32Exact,
}

impl PyArithmetic {
    pub(crate) fn core(self) -> Arithmetic {
        match self {
            PyArithmetic::Binary32 => Arithmetic::Binary32,
            PyArithmetic::Int32ExactChecked => Arithmetic::Int32ExactChecked,
            PyArithmetic::Int32Exact => Arithmetic::Int32Exact,
        }
    }

    pub(crate) fn of(arithmetic: Arithmetic) -> Self {
        match arithmetic {
            Arithmetic::Binary32 => PyArithmetic::Binary32,
            Arithmetic::Int32ExactChecked => PyArithmetic::Int32ExactChecked,
            Arithmetic::Int32Exact => PyArithmetic::Int32Exact,
        }
    }
}

#[pymethods]
impl PyArithmetic {
    /// The original's string value: `"binary32"`, `"int32_exact_checked"` or
    /// `"int32_exact"`.
    #[getter]
    fn value(&self) -> &'static str {
        self.core().name()
    }

    /// The member itself: an enum member is immutable, so a copy is the member.
    fn __copy__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The member itself, as for `copy.copy` (what `dataclasses.asdict` reaches).
    fn __deepcopy__<'py>(slf: PyRef<'py, Self>, _memo: &Bound<'py, PyAny>) -> PyRef<'py, Self> {
        slf
    }
}

/// The seed's `Accumulation`: how a reduction plan accumulates.
#[pyclass(name = "Accumulation", module = "strideweave", frozen, eq, hash)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub enum PyAccumulation {
    /// In the accumulator dtype, any order.
    #[pyo3(name = "FLOATING")]
    Floating,
    /// Ascending order, rounding to binary32 at each step (sums).
    #[pyo3(name = "SEQUENTIAL_BINARY32")]
    SequentialBinary32,
    /// Ascending order, rounding to binary32 at each step (products).
    #[pyo3(name = "SEQUENTIAL_BINARY32_PRODUCT")]
    SequentialBinary32Product,
    /// The largest value.
    #[pyo3(name = "MAXIMUM")]
    Maximum,
    /// The smallest value.
    #[pyo3(name = "MINIMUM")]
    Minimum,
    /// The position of the first largest value.
    #[pyo3(name = "ARGMAX")]
    Argmax,
    /// The position of the first smallest value.
    #[pyo3(name = "ARGMIN")]
    Argmin,
    /// Exact integers; only the final narrowing is checked.
    #[pyo3(name = "EXACT_INTEGER")]
    ExactInteger,
}

impl PyAccumulation {
    pub(crate) fn core(self) -> Accumulation {
        match self {
            PyAccumulation::Floating => Accumulation::Floating,
            PyAccumulation::SequentialBinary32 => Accumulation::SequentialBinary32,
            PyAccumulation::SequentialBinary32Product => Accumulation::SequentialBinary32Product,
            PyAccumulation::Maximum => Accumulation::Maximum,
            PyAccumulation::Minimum => Accumulation::Minimum,
            PyAccumulation::Argmax => Accumulation::Argmax,
            PyAccumulation::Argmin => Accumulation::Argmin,
            PyAccumulation::ExactInteger => Accumulation::ExactInteger,
        }
    }

    pub(crate) fn of(accumulation: Accumulation) -> Self {
        match accumulation {
            Accumulation::Floating => PyAccumulation::Floating,
            Accumulation::SequentialBinary32 => PyAccumulation::SequentialBinary32,
            Accumulation::SequentialBinary32Product => PyAccumulation::SequentialBinary32Product,
            Accumulation::Maximum => PyAccumulation::Maximum,
            Accumulation::Minimum => PyAccumulation::Minimum,
            Accumulation::Argmax => PyAccumulation::Argmax,
            Accumulation::Argmin => PyAccumulation::Argmin,
            Accumulation::ExactInteger => PyAccumulation::ExactInteger,
        }
    }
}

#[pymethods]
impl PyAccumulation {
    /// The original's string value, e.g. `"sequential_binary32"` or `"exact_integer"`.
    #[getter]
    fn value(&self) -> &'static str {
        self.core().name()
    }

    /// The member itself: an enum member is immutable, so a copy is the member.
    fn __copy__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The member itself, as for `copy.copy` (what `dataclasses.asdict` reaches).
    fn __deepcopy__<'py>(slf: PyRef<'py, Self>, _memo: &Bound<'py, PyAny>) -> PyRef<'py, Self> {
        slf
    }
}

/// The seed's markers: `REQUIRED` (an option without a default) and `NON_DIFFERENTIABLE`
/// (a custom operation without a backward rule). One object each, compared by identity.
#[pyclass(name = "Marker", module = "strideweave", frozen)]
pub struct PyMarker {
    name: &'static str,
}

#[pymethods]
impl PyMarker {
    fn __repr__(&self) -> &'static str {
        self.name
    }
}

const REQUIRED: &str = "REQUIRED";
const NON_DIFFERENTIABLE: &str = "NON_DIFFERENTIABLE";

fn is_marker(object: &Bound<'_, PyAny>, name: &str) -> bool {
    object
        .cast::<PyMarker>()
        .is_ok_and(|marker| marker.get().name == name)
}

/// Adds the two markers to the module.
pub fn add_markers(m: &Bound<'_, PyModule>) -> PyResult<()> {
    for name in [REQUIRED, NON_DIFFERENTIABLE] {
        m.add(name, Py::new(m.py(), PyMarker { name })?)?;
    }
    Ok(())
}

/// A `str` argument; `what` names the field.
fn expect_str(object: &Bound<'_, PyAny>, what: &str) -> PyResult<String> {
    Ok(object
        .cast::<PyString>()
        .map_err(|_| {
            PyTypeError::new_err(format!("{what} must be a str, got {}", type_name(object)))
        })?
        .to_cow()?
        .into_owned())
}

/// A `bool` argument (not merely truthy); `what` names the field.
fn expect_bool(object: &Bound<'_, PyAny>, what: &str) -> PyResult<bool> {
    object.cast::<PyBool>().map(|b| b.is_true()).map_err(|_| {
        PyTypeError::new_err(format!("{what} must be a bool, got {}", type_name(object)))
    })
}

/// An option value: `None`, a `DType`, or a `bool`, `int` or `float`; `what` names it.
fn to_option_value(object: &Bound<'_, PyAny>, what: &str) -> PyResult<OptionValue> {
    if object.is_none() {
        return Ok(OptionValue::None);
    }
    if let Ok(dtype) = object.cast::<PyDType>() {
        return Ok(OptionValue::DType(dtype.get().inner));
    }
    if object.is_instance_of::<PyBool>()
        || object.is_instance_of::<PyInt>()
        || object.is_instance_of::<PyFloat>()
    {
        return Ok(OptionValue::Value(to_value(object, what)?));
    }
    Err(PyTypeError::new_err(format!(
        "{what} must be None, a DType, or a bool, int or float, got {}",
        type_name(object)
    )))
}

/// The Python object of an option value.
fn option_object(py: Python<'_>, value: OptionValue) -> PyResult<Py<PyAny>> {
    match value {
        OptionValue::None => Ok(py.None()),
        OptionValue::DType(dtype) => Ok(crate::dtype::wrap(py, dtype)?.into_any()),
        OptionValue::Value(value) => from_value(py, value),
    }
}

/// The seed's `OperandSpec(name, kind, differentiable=False)`: one operand position of a
/// schema. `differentiable` is allowed on tensor operands only (`ValueError`).
#[pyclass(name = "OperandSpec", module = "strideweave", frozen)]
pub struct PyOperandSpec {
    inner: OperandSpec,
}

#[pymethods]
impl PyOperandSpec {
    /// Fields are immutable: assignment is a `dataclasses.FrozenInstanceError`.
    fn __setattr__(&self, py: Python<'_>, name: &str, _value: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    /// Fields cannot be deleted either: a `dataclasses.FrozenInstanceError`.
    fn __delattr__(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    #[new]
    #[pyo3(signature = (name, kind, differentiable=None))]
    fn py_new(
        name: &Bound<'_, PyAny>,
        kind: &Bound<'_, PyAny>,
        differentiable: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let name = expect_str(name, "OperandSpec name")?;
        let kind = kind.cast::<PyOperandKind>().map_err(|_| {
            PyTypeError::new_err(format!(
                "OperandSpec kind must be an OperandKind, got {}",
                type_name(kind)
            ))
        })?;
        let differentiable = match differentiable {
            None => false,
            Some(flag) => expect_bool(flag, "OperandSpec differentiable")?,
        };
        let inner = OperandSpec::new(&name, kind.get().core(), differentiable).py()?;
        Ok(PyOperandSpec { inner })
    }

    /// The operand's name.
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }

    /// How the operand binds.
    #[getter]
    fn kind(&self) -> PyOperandKind {
        PyOperandKind::of(self.inner.kind())
    }

    /// Whether gradients flow to this operand.
    #[getter]
    fn differentiable(&self) -> bool {
        self.inner.is_differentiable()
    }

    fn __repr__(&self) -> String {
        format!(
            "OperandSpec({:?}, OperandKind.{}, differentiable={})",
            self.inner.name(),
            self.kind().value().to_uppercase(),
            if self.inner.is_differentiable() {
                "True"
            } else {
                "False"
            }
        )
    }
}

/// The seed's `OptionSpec(name, default)`: one option of a schema, with its default value
/// (`None`, a `DType`, or a `bool`, `int` or `float`), or `REQUIRED` when a call must give
/// it. Options are passed to a call by keyword.
#[pyclass(name = "OptionSpec", module = "strideweave", frozen)]
pub struct PyOptionSpec {
    inner: OptionSpec,
}

#[pymethods]
impl PyOptionSpec {
    /// Fields are immutable: assignment is a `dataclasses.FrozenInstanceError`.
    fn __setattr__(&self, py: Python<'_>, name: &str, _value: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    /// Fields cannot be deleted either: a `dataclasses.FrozenInstanceError`.
    fn __delattr__(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    /// `OptionSpec(name, default=REQUIRED)`: an option the call must give unless it has a
    /// default.
    #[new]
    #[pyo3(signature = (name, *args, **kwargs))]
    fn py_new(
        name: &Bound<'_, PyAny>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let name = expect_str(name, "OptionSpec name")?;
        // `default` may be given by position or keyword, and is `REQUIRED` when absent (an
        // explicit `None` is the default value None).
        let keyword = kwargs.map(|k| k.get_item("default")).transpose()?.flatten();
        let extra = kwargs.map_or(0, |k| k.len()) - usize::from(keyword.is_some());
        let given: Vec<Bound<'_, PyAny>> = args.iter().chain(keyword).collect();
        if given.len() > 1 || extra > 0 {
            return Err(PyTypeError::new_err(
                "OptionSpec takes a name and at most one default",
            ));
        }
        let default = match given.first() {
            None => None,
            Some(marker) if is_marker(marker, REQUIRED) => None,
            Some(value) => Some(to_option_value(value, "OptionSpec default")?),
        };
        let inner = OptionSpec::new(&name, default).py()?;
        Ok(PyOptionSpec { inner })
    }

    /// The option's name.
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }

    /// The default value, or the `REQUIRED` marker.
    #[getter]
    fn default(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        match self.inner.default() {
            Some(value) => option_object(py, value),
            None => Ok(py
                .import("strideweave._native")?
                .getattr(REQUIRED)?
                .unbind()),
        }
    }
}

/// The core specs of the Python spec records in `items`, each a `T` (`OperandSpec` or
/// `OptionSpec`, named `record`); another entry is a TypeError naming the schema's `field`.
fn specs_of<T, R>(
    items: &Bound<'_, PyTuple>,
    field: &str,
    record: &str,
    inner: impl Fn(&T) -> R,
) -> PyResult<Vec<R>>
where
    T: pyo3::PyClass<Frozen = pyo3::pyclass::boolean_struct::True> + Sync,
{
    items
        .iter()
        .map(|item| {
            item.cast::<T>().map(|spec| inner(spec.get())).map_err(|_| {
                PyTypeError::new_err(format!(
                    "OperationSchema {field} must hold {record} values, got {}",
                    type_name(&item)
                ))
            })
        })
        .collect()
}

/// The seed's `OperationSchema(operands, options=())`: the operand positions (non-empty,
/// consumed once into a tuple) and options of an operation; names are unique (`ValueError`).
#[pyclass(name = "OperationSchema", module = "strideweave", frozen)]
pub struct PyOperationSchema {
    inner: OperationSchema,
    #[pyo3(get)]
    operands: Py<PyTuple>,
    #[pyo3(get)]
    options: Py<PyTuple>,
}

#[pymethods]
impl PyOperationSchema {
    /// Fields are immutable: assignment is a `dataclasses.FrozenInstanceError`.
    fn __setattr__(&self, py: Python<'_>, name: &str, _value: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    /// Fields cannot be deleted either: a `dataclasses.FrozenInstanceError`.
    fn __delattr__(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    #[new]
    #[pyo3(signature = (operands, options=None))]
    fn py_new(operands: &Bound<'_, PyAny>, options: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let py = operands.py();
        let operand_items = materialize(operands, "OperationSchema operands")?;
        let operand_specs = specs_of(
            &operand_items,
            "operands",
            "OperandSpec",
            |s: &PyOperandSpec| s.inner.clone(),
        )?;
        let option_items = match options {
            None => PyTuple::empty(py),
            Some(options) => materialize(options, "OperationSchema options")?,
        };
        let option_specs = specs_of(
            &option_items,
            "options",
            "OptionSpec",
            |s: &PyOptionSpec| s.inner.clone(),
        )?;
        let inner = OperationSchema::new(operand_specs, option_specs).py()?;
        Ok(PyOperationSchema {
            inner,
            operands: operand_items.unbind(),
            options: option_items.unbind(),
        })
    }
}

/// The seed's `OperandPlan`, spelled as the original's `OperandPlan(role, dtype,
/// convert_to)`: one operand of a plan — its `OperandRole`, its storage dtype (`None` for a
/// weak scalar) and the dtype it is converted to for computing. Immutable and hashable.
#[pyclass(name = "OperandPlan", module = "strideweave", frozen, eq, hash)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PyOperandPlan {
    inner: OperandPlan,
}

#[pymethods]
impl PyOperandPlan {
    /// Fields are immutable: assignment is a `dataclasses.FrozenInstanceError`.
    fn __setattr__(&self, py: Python<'_>, name: &str, _value: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    /// Fields cannot be deleted either: a `dataclasses.FrozenInstanceError`.
    fn __delattr__(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    #[new]
    #[pyo3(signature = (role, dtype, convert_to))]
    fn py_new(
        role: &Bound<'_, PyAny>,
        dtype: &Bound<'_, PyAny>,
        convert_to: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        Ok(PyOperandPlan {
            inner: crate::planning::operand_from_fields(
                "OperandPlan",
                "plan",
                role,
                dtype,
                convert_to,
            )?,
        })
    }

    /// `OperandRole.TENSOR` or `OperandRole.WEAK_SCALAR`.
    #[getter]
    fn role(&self) -> crate::planning::PyOperandRole {
        crate::planning::PyOperandRole::of(self.inner.role())
    }

    /// The operand's dtype, `None` for a weak scalar.
    #[getter]
    fn dtype(&self, py: Python<'_>) -> PyResult<Option<Py<PyDType>>> {
        self.inner
            .dtype()
            .map(|dtype| crate::dtype::wrap(py, dtype))
            .transpose()
    }

    /// The dtype it is converted to for computing.
    #[getter]
    fn convert_to(&self, py: Python<'_>) -> PyResult<Py<PyDType>> {
        crate::dtype::wrap(py, self.inner.convert_to())
    }

    fn __repr__(&self) -> String {
        crate::planning::operand_repr("OperandPlan", &self.inner)
    }
}

/// The seed's `OperationPlan`, spelled as the original's `OperationPlan(operation, operands,
/// compute, accumulation, accumulator_dtype, output)` (every field required; `accumulation`
/// and `accumulator_dtype` are `None` for a plan without them): how an operation computes
/// on given operand dtypes. Immutable
/// and hashable; a custom operation's resolver returns one inside its `ResolvedInvocation`,
/// and `OperationCapability.from_plan(plan)` is the capability a kernel pattern lists for it.
#[pyclass(name = "OperationPlan", module = "strideweave", frozen, eq)]
#[derive(Clone, PartialEq)]
pub struct PyOperationPlan {
    pub(crate) inner: OperationPlan,
}

#[pymethods]
impl PyOperationPlan {
    /// Fields are immutable: assignment is a `dataclasses.FrozenInstanceError`.
    fn __setattr__(&self, py: Python<'_>, name: &str, _value: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    /// Fields cannot be deleted either: a `dataclasses.FrozenInstanceError`.
    fn __delattr__(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

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
        let inner = crate::planning::plan_from_fields(
            "OperationPlan",
            operation,
            operands,
            compute,
            accumulation,
            accumulator_dtype,
            output,
            |item| item.cast::<PyOperandPlan>().ok().map(|p| p.get().inner),
            "OperandPlan",
        )?;
        Ok(PyOperationPlan { inner })
    }

    /// The operation's name.
    #[getter]
    fn operation(&self) -> &str {
        self.inner.operation()
    }

    /// The operand plans, in order.
    #[getter]
    fn operands(&self, py: Python<'_>) -> PyResult<Py<PyTuple>> {
        let items = self
            .inner
            .operands()
            .iter()
            .map(|p| Py::new(py, PyOperandPlan { inner: *p }))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(PyTuple::new(py, items)?.unbind())
    }

    /// The compute arithmetic.
    #[getter]
    fn compute(&self) -> PyArithmetic {
        PyArithmetic::of(self.inner.compute())
    }

    /// The accumulation of a reduction, else `None`.
    #[getter]
    fn accumulation(&self) -> Option<PyAccumulation> {
        self.inner.accumulation().map(PyAccumulation::of)
    }

    /// The accumulator dtype of a reduction, else `None`.
    #[getter]
    fn accumulator_dtype(&self, py: Python<'_>) -> PyResult<Option<Py<PyDType>>> {
        self.inner
            .accumulator_dtype()
            .map(|dtype| crate::dtype::wrap(py, dtype))
            .transpose()
    }

    /// The output dtype.
    #[getter]
    fn output(&self, py: Python<'_>) -> PyResult<Py<PyDType>> {
        crate::dtype::wrap(py, self.inner.output())
    }

    fn __hash__(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        self.inner.hash(&mut hasher);
        hasher.finish()
    }

    /// The plan as unsupported-plan reasons quote it.
    fn __str__(&self) -> String {
        self.inner.to_string()
    }

    fn __repr__(&self) -> String {
        format!("OperationPlan('{}')", self.inner)
    }
}

/// The core plan of a Python `OperationPlan` or `OperationCapability`; `what` names the
/// field.
pub fn expect_plan(object: &Bound<'_, PyAny>, what: &str) -> PyResult<OperationPlan> {
    if let Ok(plan) = object.cast::<PyOperationPlan>() {
        return Ok(plan.get().inner.clone());
    }
    if let Ok(capability) = object.cast::<crate::carrier::PyOperationCapability>() {
        return Ok(capability.get().inner.plan().clone());
    }
    Err(PyTypeError::new_err(format!(
        "{what} must be an OperationPlan, got {}",
        type_name(object)
    )))
}

/// The seed's `BoundOperationCall`: one call bound against its schema, as a custom
/// operation's resolver sees it — the definition, the operands in schema order and every
/// option (defaults filled in). Made by the framework only.
#[pyclass(name = "BoundOperationCall", module = "strideweave", frozen)]
pub struct PyBoundOperationCall {
    pub(crate) inner: BoundOperationCall,
}

#[pymethods]
impl PyBoundOperationCall {
    /// Fields are immutable: assignment is a `dataclasses.FrozenInstanceError`.
    fn __setattr__(&self, py: Python<'_>, name: &str, _value: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    /// Fields cannot be deleted either: a `dataclasses.FrozenInstanceError`.
    fn __delattr__(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    /// The operation being called.
    #[getter]
    fn definition(&self) -> PyOperationDefinition {
        PyOperationDefinition {
            inner: *self.inner.definition(),
        }
    }

    /// The operands in schema order: Tensors and Python scalars.
    #[getter]
    fn operands(&self, py: Python<'_>) -> PyResult<Py<PyTuple>> {
        let items = self
            .inner
            .operands()
            .iter()
            .map(|operand| operand_object(py, operand))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(PyTuple::new(py, items)?.unbind())
    }

    /// The `OperandKind` of each operand position, in schema order.
    #[getter]
    fn operand_kinds(&self, py: Python<'_>) -> PyResult<Py<PyTuple>> {
        let kinds = self
            .inner
            .definition()
            .schema()
            .operands()
            .iter()
            .map(|spec| Py::new(py, PyOperandKind::of(spec.kind())))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(PyTuple::new(py, kinds)?.unbind())
    }

    /// Every option of the schema by name, with the defaults filled in.
    #[getter]
    fn options<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let options = PyDict::new(py);
        for spec in self.inner.definition().schema().options() {
            if let Some(value) = self.inner.option(spec.name()) {
                options.set_item(spec.name(), option_object(py, value)?)?;
            }
        }
        Ok(options)
    }

    fn __repr__(&self) -> String {
        format!("BoundOperationCall('{}')", self.inner.definition().name())
    }
}

/// The seed's `VJPContext`: what a custom operation's backward rule sees of the call it
/// differentiates — the invocation that ran, its outputs (detached) and the operands its
/// resolver listed in `saved_operands`, in that order.
#[pyclass(name = "VJPContext", module = "strideweave", frozen)]
pub struct PyVjpContext {
    inner: VjpContext,
}

#[pymethods]
impl PyVjpContext {
    /// Fields are immutable: assignment is a `dataclasses.FrozenInstanceError`.
    fn __setattr__(&self, py: Python<'_>, name: &str, _value: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    /// Fields cannot be deleted either: a `dataclasses.FrozenInstanceError`.
    fn __delattr__(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    /// The invocation that ran.
    #[getter]
    fn invocation(&self) -> PyResolvedInvocation {
        PyResolvedInvocation {
            inner: self.inner.invocation().clone(),
        }
    }

    /// The outputs it produced, detached from the graph.
    #[getter]
    fn outputs(&self, py: Python<'_>) -> PyResult<Py<PyTuple>> {
        tensors_tuple(py, self.inner.outputs())
    }

    /// The saved operands, in `saved_operands` order.
    #[getter]
    fn saved_operands(&self, py: Python<'_>) -> PyResult<Py<PyTuple>> {
        tensors_tuple(py, self.inner.saved_operands())
    }
}

fn tensors_tuple(py: Python<'_>, tensors: &[Tensor]) -> PyResult<Py<PyTuple>> {
    let items = tensors
        .iter()
        .map(|t| Py::new(py, wrap_tensor(t.clone())))
        .collect::<PyResult<Vec<_>>>()?;
    Ok(PyTuple::new(py, items)?.unbind())
}

/// The core resolver of a Python `resolve(call) -> ResolvedInvocation`.
fn resolver(
    name: String,
    resolve: Py<PyAny>,
) -> impl Fn(&BoundOperationCall) -> strideweave::Result<ResolvedInvocation> + Send + Sync {
    move |call| {
        crate::finalization::attach(|py| {
            let label = format!("'{name}' resolve");
            let bound = Py::new(
                py,
                PyBoundOperationCall {
                    inner: call.clone(),
                },
            )
            .map_err(|e| park(py, &label, e))?;
            let answer = resolve
                .bind(py)
                .call1((bound,))
                .map_err(|e| park(py, &label, e))?;
            answer
                .cast::<PyResolvedInvocation>()
                .map(|invocation| invocation.get().inner.clone())
                .map_err(|_| {
                    Error::Type(format!(
                        "{label} must return a ResolvedInvocation, got {}",
                        type_name(&answer)
                    ))
                })
        })
    }
}

/// The core rule of a Python `vjp(ctx, cotangents) -> gradients`: one gradient (a Tensor
/// or `None`) per differentiable operand, each of its operand's shape and dtype.
fn backward_rule(name: String, vjp: Py<PyAny>) -> Vjp {
    Vjp::rule(move |context, cotangents| {
        crate::finalization::attach(|py| {
            let label = format!("'{name}' vjp");
            let answer =
                call_vjp(py, &vjp, context, cotangents).map_err(|e| park(py, &label, e))?;
            gradients_of(&label, context, &answer)
        })
    })
}

fn call_vjp<'py>(
    py: Python<'py>,
    vjp: &Py<PyAny>,
    context: &VjpContext,
    cotangents: &[Option<Tensor>],
) -> PyResult<Bound<'py, PyAny>> {
    let context = Py::new(
        py,
        PyVjpContext {
            inner: context.clone(),
        },
    )?;
    let cotangents = cotangents
        .iter()
        .map(|c| match c {
            Some(tensor) => Ok(Py::new(py, wrap_tensor(tensor.clone()))?.into_any()),
            None => Ok(py.None()),
        })
        .collect::<PyResult<Vec<_>>>()?;
    vjp.bind(py).call1((context, PyTuple::new(py, cotangents)?))
}

/// Checks what a Python backward rule returned: a tuple or list with one Tensor or `None`
/// per differentiable operand, each gradient of its operand's shape and dtype.
fn gradients_of(
    label: &str,
    context: &VjpContext,
    answer: &Bound<'_, PyAny>,
) -> strideweave::Result<Vec<Option<Tensor>>> {
    let items: Vec<Bound<'_, PyAny>> = if let Ok(tuple) = answer.cast::<PyTuple>() {
        tuple.iter().collect()
    } else if let Ok(list) = answer.cast::<PyList>() {
        list.iter().collect()
    } else {
        return Err(Error::Type(format!(
            "{label} must return a tuple or list of Tensor or None (one per differentiable \
             operand), got {}",
            type_name(answer)
        )));
    };
    let call = context.invocation().call();
    let differentiable: Vec<(usize, &OperandSpec)> = call
        .definition()
        .schema()
        .operands()
        .iter()
        .enumerate()
        .filter(|(_, spec)| spec.is_differentiable())
        .collect();
    if items.len() != differentiable.len() {
        let names: Vec<&str> = differentiable.iter().map(|(_, s)| s.name()).collect();
        return Err(Error::Value(format!(
            "{label} returned {} gradients for {} differentiable operands ({})",
            items.len(),
            differentiable.len(),
            names.join(", ")
        )));
    }
    let mut gradients = Vec::with_capacity(items.len());
    for (item, (index, spec)) in items.iter().zip(&differentiable) {
        if item.is_none() {
            gradients.push(None);
            continue;
        }
        let Ok(tensor) = item.cast::<PyTensor>() else {
            return Err(Error::Type(format!(
                "{label} gradient of operand '{}' must be a Tensor or None, got {}",
                spec.name(),
                type_name(item)
            )));
        };
        let gradient = tensor.get().inner.clone();
        if let Some(operand) = call.operands().get(*index).and_then(Operand::as_tensor) {
            if gradient.shape() != operand.shape() {
                return Err(Error::Value(format!(
                    "{label} gradient of operand '{}' has Shape {}, the operand has Shape {}",
                    spec.name(),
                    gradient.shape(),
                    operand.shape()
                )));
            }
            if gradient.dtype() != operand.dtype() {
                return Err(Error::Type(format!(
                    "{label} gradient of operand '{}' is {}, the operand is {}",
                    spec.name(),
                    gradient.dtype(),
                    operand.dtype()
                )));
            }
        }
        gradients.push(Some(gradient));
    }
    Ok(gradients)
}

/// Defines the custom operation `name` once for the life of the process and returns its
/// `OperationDefinition` (callable: `op(x)` runs it and returns its one result).
///
/// `resolve(call)` receives the `BoundOperationCall` and returns the `ResolvedInvocation`
/// (plan and result specs) for it; `reference(invocation)`, optional, is the seed's
/// carrier-neutral reference: it computes the invocation's results (a Tensor or a tuple of
/// Tensors, on any carrier) for comparing kernels with, within each `ResultSpec`'s `atol` and
/// `rtol` (crate::reference); `vjp(ctx, cotangents)` receives the `VJPContext` and one
/// cotangent (a Tensor or `None`) per result, and returns one gradient (a Tensor or `None`)
/// per differentiable operand; `vjp=NON_DIFFERENTIABLE` declares that there is none. The
/// name rules are the core's (at least two dot-separated identifiers, not under
/// `strideweave` or a built-in's name, not taken: `ValueError`); an omitted `vjp` is a
/// `ValueError`, a `vjp` that is neither callable nor the marker a `TypeError`.
#[pyfunction]
#[pyo3(signature = (name, schema, resolve, reference=None, vjp=None))]
pub fn define_operation(
    py: Python<'_>,
    name: &Bound<'_, PyAny>,
    schema: &Bound<'_, PyAny>,
    resolve: &Bound<'_, PyAny>,
    reference: Option<&Bound<'_, PyAny>>,
    vjp: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyOperationDefinition> {
    let name = expect_str(name, "define_operation name")?;
    let schema = schema
        .cast::<PyOperationSchema>()
        .map(|s| s.get().inner.clone())
        .map_err(|_| {
            PyTypeError::new_err(format!(
                "define_operation schema must be an OperationSchema, got {}",
                type_name(schema)
            ))
        })?;
    let resolve = expect_callable(resolve, "define_operation resolve")?;
    let reference = match reference.filter(|r| !r.is_none()) {
        None => None,
        Some(reference) => Some(
            expect_callable(reference, "define_operation reference").map_err(|_| {
                PyTypeError::new_err(format!(
                    "define_operation reference must be callable or None, got {}",
                    type_name(reference)
                ))
            })?,
        ),
    };
    let rule = match vjp {
        None => {
            return Err(PyValueError::new_err(format!(
                "define_operation '{name}' needs a vjp: a callable backward rule, or \
                 NON_DIFFERENTIABLE"
            )))
        }
        Some(marker) if is_marker(marker, NON_DIFFERENTIABLE) => Vjp::NonDifferentiable,
        Some(rule) => backward_rule(
            name.clone(),
            expect_callable(rule, "define_operation vjp").map_err(|_| {
                PyTypeError::new_err(format!(
                    "define_operation vjp must be callable or NON_DIFFERENTIABLE, got {}",
                    type_name(rule)
                ))
            })?,
        ),
    };
    let resolve = resolver(name.clone(), resolve);
    let core_reference = reference
        .as_ref()
        .map(|reference| crate::reference::reference_fn(name.clone(), reference.clone_ref(py)));
    let inner = crate::finalization::detach(py, || {
        core_define(&name, schema, resolve, core_reference, rule)
    })
    .py()?;
    if let Some(reference) = reference {
        crate::reference::remember(&inner, reference);
    }
    Ok(PyOperationDefinition { inner })
}

/// The definition an `operation` argument names: an `OperationDefinition` or its name.
fn definition_arg(operation: &Bound<'_, PyAny>) -> PyResult<OperationDefinition> {
    if let Ok(definition) = operation.cast::<PyOperationDefinition>() {
        return Ok(definition.get().inner);
    }
    if let Ok(name) = operation.cast::<PyString>() {
        return core_definition(&name.to_cow()?).py();
    }
    Err(PyTypeError::new_err(format!(
        "call operation must be an OperationDefinition or a str, got {}",
        type_name(operation)
    )))
}

/// The options of a call, by name, as the core takes them.
type GivenOptions = Vec<(String, OptionValue)>;

/// The core operands and options of a call of `definition`: `operands` (Tensors and Python
/// scalars, positional) and `options` (by keyword).
fn call_arguments(
    definition: &OperationDefinition,
    operands: &Bound<'_, PyTuple>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<(Vec<Operand>, GivenOptions)> {
    let name = definition.name();
    let operands = operands
        .iter()
        .enumerate()
        .map(|(i, item)| {
            if let Ok(tensor) = item.cast::<PyTensor>() {
                return Ok(Operand::Tensor(tensor.get().inner.clone()));
            }
            if item.is_instance_of::<PyBool>()
                || item.is_instance_of::<PyInt>()
                || item.is_instance_of::<PyFloat>()
            {
                return Ok(Operand::Scalar(to_value(&item, "operand")?));
            }
            Err(PyTypeError::new_err(format!(
                "operand {i} of '{name}' must be a Tensor or a real Python number (bool, int or float), \
                 got {}",
                type_name(&item)
            )))
        })
        .collect::<PyResult<Vec<_>>>()?;
    let mut given: GivenOptions = Vec::new();
    if let Some(options) = options {
        for (key, value) in options.iter() {
            let key = expect_str(&key, "an option name")?;
            let value = to_option_value(&value, &format!("option '{key}' of '{name}'"))?;
            given.push((key, value));
        }
    }
    Ok((operands, given))
}

/// Runs `definition` on `operands` (Tensors and Python scalars, positional) and `options`
/// (by keyword), with the GIL released while the core runs; returns every result.
pub fn run(
    py: Python<'_>,
    definition: &OperationDefinition,
    operands: &Bound<'_, PyTuple>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<Vec<Tensor>> {
    let (operands, given) = call_arguments(definition, operands, options)?;
    crate::finalization::detach(py, || {
        let options: Vec<(&str, OptionValue)> =
            given.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        definition.call(operands, &options)
    })
    .py()
}

/// Binds and resolves a call of `definition` (`OperationDefinition.resolve_call`): the
/// invocation a provider would receive, with no carrier consulted and nothing run.
pub fn resolve_call(
    py: Python<'_>,
    definition: &OperationDefinition,
    operands: &Bound<'_, PyTuple>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<ResolvedInvocation> {
    let (operands, given) = call_arguments(definition, operands, options)?;
    crate::finalization::detach(py, || {
        let options: Vec<(&str, OptionValue)> =
            given.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        definition
            .bind(operands, &options)
            .and_then(|call| definition.resolve(&call))
    })
    .py()
}

/// `definition.bind(*operands, **options)`: the call bound against the definition's schema
/// (the checks and defaults of a call, without resolving or running it).
pub fn bind_call(
    py: Python<'_>,
    definition: &OperationDefinition,
    operands: &Bound<'_, PyTuple>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<PyBoundOperationCall> {
    let (operands, given) = call_arguments(definition, operands, options)?;
    let inner = crate::finalization::detach(py, || {
        let options: Vec<(&str, OptionValue)> =
            given.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        definition.bind(operands, &options)
    })
    .py()?;
    Ok(PyBoundOperationCall { inner })
}

/// `call(operation, *operands, **options)`: runs the operation (an `OperationDefinition`
/// or a registered name) and returns the tuple of its results.
#[pyfunction]
#[pyo3(signature = (operation, /, *operands, **options))]
pub fn call(
    py: Python<'_>,
    operation: &Bound<'_, PyAny>,
    operands: &Bound<'_, PyTuple>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<Py<PyTuple>> {
    let definition = definition_arg(operation)?;
    let results = run(py, &definition, operands, options)?;
    let items = results
        .into_iter()
        .map(|result| result_object(py, operands, result))
        .collect::<PyResult<Vec<_>>>()?;
    Ok(PyTuple::new(py, items)?.unbind())
}

/// The Python object of one result of a call on `operands`: an exact alias of an operand (the
/// same core tensor) is that operand's own object, so its identity and autograd state stay
/// exactly as they were; any other result is a new `Tensor`.
pub fn result_object(
    py: Python<'_>,
    operands: &Bound<'_, PyTuple>,
    result: Tensor,
) -> PyResult<Py<PyTensor>> {
    for operand in operands.iter() {
        if let Ok(tensor) = operand.cast::<PyTensor>() {
            if tensor.get().inner.same_as(&result) {
                return Ok(tensor.clone().unbind());
            }
        }
    }
    Py::new(py, wrap_tensor(result))
}
