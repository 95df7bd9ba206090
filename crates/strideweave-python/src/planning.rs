//! Central dtype planning from Python, spelled as the original's
//! `strideweave.carriers.operation_policy` and `operation_capability` spell it
//! (docs/python.md, Module layout): `OperandRole`, the `OperandCapability` record, and
//! `resolve_operation_plan(operation, *operands, accumulator_dtype=None)`. The plans
//! themselves are the core's planner (docs/operations.md, Dtype planning); this module only
//! converts the Python operands and names the Python field at fault.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyList, PyTuple};
use strideweave::operation::{
    resolve_operation_plan as core_resolve, OperandPlan, OperandRole, PlanOperand,
    BUILTIN_OPERATIONS,
};
use strideweave::{DType, Value};

use crate::convert::type_name;
use crate::custom_ops::PyOperationPlan;
use crate::dtype::PyDType;
use crate::errors::IntoPyResult;

/// The original's `OperandRole`: what one operand position of a plan takes — a tensor, or
/// a weak Python scalar (which has no dtype of its own and adopts its tensor partner's
/// kind). `.value` is `"tensor"` or `"weak_scalar"`.
#[pyclass(name = "OperandRole", module = "strideweave", frozen, eq, hash)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub enum PyOperandRole {
    /// A tensor operand.
    #[pyo3(name = "TENSOR")]
    Tensor,
    /// A weak Python scalar operand.
    #[pyo3(name = "WEAK_SCALAR")]
    WeakScalar,
}

impl PyOperandRole {
    /// The Python role of a core role.
    pub fn of(role: OperandRole) -> Self {
        match role {
            OperandRole::Tensor => PyOperandRole::Tensor,
            OperandRole::WeakScalar => PyOperandRole::WeakScalar,
        }
    }
}

#[pymethods]
impl PyOperandRole {
    /// `"tensor"` or `"weak_scalar"`.
    #[getter]
    fn value(&self) -> &'static str {
        match self {
            PyOperandRole::Tensor => "tensor",
            PyOperandRole::WeakScalar => "weak_scalar",
        }
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

/// A simple dtype for the `field` of `record`; anything else is a TypeError naming both.
fn simple_dtype(object: &Bound<'_, PyAny>, record: &str, field: &str) -> PyResult<DType> {
    let dtype = object
        .cast::<PyDType>()
        .map(|d| d.get().inner)
        .map_err(|_| {
            PyTypeError::new_err(format!(
                "{record} {field} must be a SimpleDType, got {}",
                type_name(object)
            ))
        })?;
    if dtype.is_simple() {
        Ok(dtype)
    } else {
        Err(PyTypeError::new_err(format!(
            "{record} {field} must be a SimpleDType, got the category {dtype}"
        )))
    }
}

/// The core operand of the original's three fields `(role, dtype, convert_to)`: a tensor
/// operand names its storage dtype, a weak scalar has none (`dtype` is `None`). `record`
/// (`OperandPlan` or `OperandCapability`) and `noun` (`plan` or `capability`) name what is
/// being built in the messages.
pub fn operand_from_fields(
    record: &str,
    noun: &str,
    role: &Bound<'_, PyAny>,
    dtype: &Bound<'_, PyAny>,
    convert_to: &Bound<'_, PyAny>,
) -> PyResult<OperandPlan> {
    let role = role
        .cast::<PyOperandRole>()
        .map(|r| *r.get())
        .map_err(|_| {
            PyTypeError::new_err(format!(
                "{record} role must be an OperandRole, got {}",
                type_name(role)
            ))
        })?;
    let convert_to = simple_dtype(convert_to, record, "convert_to")?;
    match role {
        PyOperandRole::Tensor => {
            if dtype.is_none() {
                return Err(PyTypeError::new_err(format!(
                    "a tensor operand {noun} needs a storage dtype: {record} dtype is None"
                )));
            }
            let dtype = simple_dtype(dtype, record, "dtype")?;
            OperandPlan::tensor(dtype, convert_to).py()
        }
        PyOperandRole::WeakScalar => {
            if !dtype.is_none() {
                return Err(PyTypeError::new_err(format!(
                    "a weak scalar operand {noun} has no storage dtype: {record} dtype must be \
                     None, got {}",
                    dtype.str()?
                )));
            }
            OperandPlan::weak_scalar(convert_to).py()
        }
    }
}

/// The `repr` of an operand record: `Name(role=OperandRole.TENSOR, dtype=Float32, ...)`.
pub fn operand_repr(record: &str, operand: &OperandPlan) -> String {
    let role = match operand.role() {
        OperandRole::Tensor => "TENSOR",
        OperandRole::WeakScalar => "WEAK_SCALAR",
    };
    let dtype = operand.dtype().map_or("None", |d| d.name());
    format!(
        "{record}(role=OperandRole.{role}, dtype={dtype}, convert_to={})",
        operand.convert_to().name()
    )
}

/// The original's `OperandCapability(role, dtype, convert_to)`: one operand of an
/// `OperationCapability` — the same fields as an `OperandPlan`, as the capability states
/// them. Immutable and hashable.
#[pyclass(name = "OperandCapability", module = "strideweave", frozen, eq, hash)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PyOperandCapability {
    pub(crate) inner: OperandPlan,
}

#[pymethods]
impl PyOperandCapability {
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
        Ok(PyOperandCapability {
            inner: operand_from_fields("OperandCapability", "capability", role, dtype, convert_to)?,
        })
    }

    /// `OperandRole.TENSOR` or `OperandRole.WEAK_SCALAR`.
    #[getter]
    fn role(&self) -> PyOperandRole {
        PyOperandRole::of(self.inner.role())
    }

    /// The tensor operand's storage dtype, `None` for a weak scalar.
    #[getter]
    fn dtype(&self, py: Python<'_>) -> PyResult<Option<Py<PyDType>>> {
        self.inner
            .dtype()
            .map(|dtype| crate::dtype::wrap(py, dtype))
            .transpose()
    }

    /// The dtype the operand is converted to for computing.
    #[getter]
    fn convert_to(&self, py: Python<'_>) -> PyResult<Py<PyDType>> {
        crate::dtype::wrap(py, self.inner.convert_to())
    }

    fn __repr__(&self) -> String {
        operand_repr("OperandCapability", &self.inner)
    }
}

/// One operand of `resolve_operation_plan`: a `DType` is a tensor of that dtype, a `bool`,
/// `int` or `float` a weak scalar; `position` names it in the message.
fn plan_operand(operand: &Bound<'_, PyAny>, position: usize) -> PyResult<PlanOperand> {
    if let Ok(dtype) = operand.cast::<PyDType>() {
        return Ok(PlanOperand::Tensor(dtype.get().inner));
    }
    if let Ok(flag) = operand.cast::<PyBool>() {
        return Ok(PlanOperand::Scalar(Value::Bool(flag.is_true())));
    }
    if operand.is_instance_of::<PyInt>() {
        return Ok(PlanOperand::Scalar(Value::Int(operand.extract::<i64>()?)));
    }
    if operand.is_instance_of::<PyFloat>() {
        return Ok(PlanOperand::Scalar(Value::Float(operand.extract::<f64>()?)));
    }
    Err(PyTypeError::new_err(format!(
        "resolve_operation_plan operand {position} must be a DType (a tensor operand) or a \
         real Python number (a weak scalar), got {}",
        type_name(operand)
    )))
}

/// The original's `resolve_operation_plan(operation, *operands, accumulator_dtype=None)`:
/// the plan central planning resolves for the built-in `operation` on `operands` (a `DType`
/// per tensor operand, a `bool`, `int` or `float` per weak scalar), accumulating in
/// `accumulator_dtype` where the operation takes one (`reduce_sum`, `matmul`). Errors are
/// the planner's: NotImplementedError for an operation or dtype without a plan, TypeError
/// for a wrong arity, role or category dtype, OverflowError for a weak integer outside the
/// Int32 range meeting an Int32 plan.
#[pyfunction]
#[pyo3(signature = (operation, *operands, accumulator_dtype=None))]
pub fn resolve_operation_plan(
    operation: &Bound<'_, PyAny>,
    operands: &Bound<'_, PyTuple>,
    accumulator_dtype: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyOperationPlan> {
    let name: String = operation.extract().map_err(|_| {
        PyTypeError::new_err(format!(
            "resolve_operation_plan operation must be a str, got {}",
            type_name(operation)
        ))
    })?;
    let plan_operands = operands
        .iter()
        .enumerate()
        .map(|(position, operand)| plan_operand(&operand, position))
        .collect::<PyResult<Vec<_>>>()?;
    let accumulator = match accumulator_dtype.filter(|a| !a.is_none()) {
        None => None,
        Some(dtype) => Some(
            dtype
                .cast::<PyDType>()
                .map(|d| d.get().inner)
                .map_err(|_| {
                    PyTypeError::new_err(format!(
                        "resolve_operation_plan accumulator_dtype must be a DType or None, got {}",
                        type_name(dtype)
                    ))
                })?,
        ),
    };
    let inner = core_resolve(&name, &plan_operands, accumulator).py()?;
    Ok(PyOperationPlan { inner })
}

/// The tensor dtypes and weak scalars the signature probe tries: every tensor dtype the
/// planner computes on, and a weak scalar of each kind (a negative integer too).
fn probes(role: OperandRole) -> Vec<PlanOperand> {
    match role {
        OperandRole::Tensor => [DType::FLOAT32, DType::INT32, DType::BOOL]
            .map(PlanOperand::Tensor)
            .to_vec(),
        OperandRole::WeakScalar => [
            Value::Int(3),
            Value::Int(-1),
            Value::Float(0.5),
            Value::Bool(true),
        ]
        .map(PlanOperand::Scalar)
        .to_vec(),
    }
}

/// Every operand-role signature the planner accepts for `operation` (one to three operands),
/// each with the tensor dtypes some plan of that signature takes at each tensor position.
fn signatures_of(operation: &str) -> Vec<(Vec<OperandRole>, Vec<Vec<DType>>)> {
    let mut found = Vec::new();
    for arity in 1..=3u32 {
        for mask in 0..(1u32 << arity) {
            let roles: Vec<OperandRole> = (0..arity)
                .map(|bit| {
                    if mask & (1 << bit) == 0 {
                        OperandRole::Tensor
                    } else {
                        OperandRole::WeakScalar
                    }
                })
                .collect();
            let tensor_positions: Vec<usize> = roles
                .iter()
                .enumerate()
                .filter(|(_, role)| **role == OperandRole::Tensor)
                .map(|(position, _)| position)
                .collect();
            let mut domains: Vec<Vec<DType>> = vec![Vec::new(); tensor_positions.len()];
            let mut combos: Vec<Vec<PlanOperand>> = vec![Vec::new()];
            for role in &roles {
                combos = combos
                    .into_iter()
                    .flat_map(|prefix| {
                        probes(*role).into_iter().map(move |operand| {
                            let mut next = prefix.clone();
                            next.push(operand);
                            next
                        })
                    })
                    .collect();
            }
            let mut accepted = false;
            for combo in &combos {
                if core_resolve(operation, combo, None).is_ok() {
                    accepted = true;
                    for (slot, position) in tensor_positions.iter().enumerate() {
                        if let PlanOperand::Tensor(dtype) = combo[*position] {
                            if !domains[slot].contains(&dtype) {
                                domains[slot].push(dtype);
                            }
                        }
                    }
                }
            }
            if accepted {
                found.push((roles, domains));
            }
        }
    }
    found
}

/// `[(name, [(roles, tensor_domains), ...]), ...]` for every built-in operation, in the
/// planner's order: what `operation_policy.registered_operations()` builds its
/// `OperationSpec` records from.
#[pyfunction]
pub fn _plan_signatures(py: Python<'_>) -> PyResult<Py<PyList>> {
    let result = PyList::empty(py);
    for operation in BUILTIN_OPERATIONS {
        let overloads = PyList::empty(py);
        for (roles, domains) in signatures_of(operation) {
            let roles = roles
                .into_iter()
                .map(|role| PyOperandRole::of(role).into_pyobject(py))
                .collect::<PyResult<Vec<_>>>()?;
            let domains = domains
                .into_iter()
                .map(|domain| {
                    let dtypes = domain
                        .into_iter()
                        .map(|dtype| crate::dtype::wrap(py, dtype))
                        .collect::<PyResult<Vec<_>>>()?;
                    PyTuple::new(py, dtypes)
                })
                .collect::<PyResult<Vec<_>>>()?;
            overloads.append((PyTuple::new(py, roles)?, PyTuple::new(py, domains)?))?;
        }
        result.append((operation, overloads))?;
    }
    Ok(result.unbind())
}

/// A simple dtype or `None` for the optional `field` of `record`.
fn optional_simple_dtype(
    object: &Bound<'_, PyAny>,
    record: &str,
    field: &str,
) -> PyResult<Option<DType>> {
    if object.is_none() {
        return Ok(None);
    }
    let dtype = object
        .cast::<PyDType>()
        .map(|d| d.get().inner)
        .map_err(|_| {
            PyTypeError::new_err(format!(
                "{record} {field} must be a SimpleDType or None, got {}",
                type_name(object)
            ))
        })?;
    if dtype.is_simple() {
        Ok(Some(dtype))
    } else {
        Err(PyTypeError::new_err(format!(
            "{record} {field} must be a SimpleDType or None, got the category {dtype}"
        )))
    }
}

/// The core plan of the original's six fields `(operation, operands, compute,
/// accumulation, accumulator_dtype, output)`, shared by `OperationPlan` and
/// `OperationCapability` (`record`): each operand is extracted by `operand` (the record's
/// operand class is `operand_record`). Each wrong field is a TypeError naming it; an empty
/// name or operand list is the core's ValueError.
#[allow(clippy::too_many_arguments)]
pub fn plan_from_fields(
    record: &str,
    operation: &Bound<'_, PyAny>,
    operands: &Bound<'_, PyAny>,
    compute: &Bound<'_, PyAny>,
    accumulation: &Bound<'_, PyAny>,
    accumulator_dtype: &Bound<'_, PyAny>,
    output: &Bound<'_, PyAny>,
    operand: impl Fn(&Bound<'_, PyAny>) -> Option<OperandPlan>,
    operand_record: &str,
) -> PyResult<strideweave::operation::OperationPlan> {
    let name: String = operation.extract().map_err(|_| {
        PyTypeError::new_err(format!(
            "{record} operation must be a str, got {}",
            type_name(operation)
        ))
    })?;
    let operands = crate::prepared::materialize(operands, &format!("{record} operands"))?
        .iter()
        .map(|item| {
            operand(&item).ok_or_else(|| {
                PyTypeError::new_err(format!(
                    "{record} operands must hold {operand_record} values, got {}",
                    type_name(&item)
                ))
            })
        })
        .collect::<PyResult<Vec<_>>>()?;
    let compute = compute
        .cast::<crate::custom_ops::PyArithmetic>()
        .map(|c| c.get().core())
        .map_err(|_| {
            PyTypeError::new_err(format!(
                "{record} compute must be an Arithmetic, got {}",
                type_name(compute)
            ))
        })?;
    let accumulation = if accumulation.is_none() {
        None
    } else {
        Some(
            accumulation
                .cast::<crate::custom_ops::PyAccumulation>()
                .map(|a| a.get().core())
                .map_err(|_| {
                    PyTypeError::new_err(format!(
                        "{record} accumulation must be an Accumulation or None, got {}",
                        type_name(accumulation)
                    ))
                })?,
        )
    };
    let accumulator_dtype = optional_simple_dtype(accumulator_dtype, record, "accumulator_dtype")?;
    let output = simple_dtype(output, record, "output")?;
    strideweave::operation::OperationPlan::new(
        &name,
        operands,
        compute,
        accumulation,
        accumulator_dtype,
        output,
    )
    .py()
}
