//! What a Python kernel or composite provider sees of one call: `OperationDefinition`,
//! `ResolvedInvocation` and `ResultSpec`, read-only views of the core's records, and the
//! `OperationCapability` constructor.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple};
use strideweave::operation::{
    operation_definition as core_definition, Operand, OperationCapability, OperationDefinition,
    PlanOperand, ResolvedInvocation, ResultSpec,
};

use crate::carrier::PyOperationCapability;
use crate::convert::{from_value, to_index, to_value, type_name};
use crate::dtype::PyDType;
use crate::errors::IntoPyResult;
use crate::layout::PyLayout;
use crate::tensor::{wrap as wrap_tensor, PyTensor};

/// A registered operation: the seed's `OperationDefinition` a `KernelPattern` names.
///
/// Obtained with `operation_definition(name)`; two objects naming one definition compare
/// equal.
#[pyclass(name = "OperationDefinition", module = "strideweave", frozen)]
pub struct PyOperationDefinition {
    pub(crate) inner: OperationDefinition,
}

#[pymethods]
impl PyOperationDefinition {
    /// The operation's name.
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }

    /// Whether StrideWeave defines it.
    #[getter]
    fn is_builtin(&self) -> bool {
        self.inner.is_builtin()
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<PyOperationDefinition>()
            .is_ok_and(|other| other.get().inner.same_as(&self.inner))
    }

    fn __hash__(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        self.inner.name().hash(&mut hasher);
        hasher.finish()
    }

    fn __repr__(&self) -> String {
        format!("OperationDefinition('{}')", self.inner.name())
    }
}

/// The registered operation definition named `name` (`NotImplementedError` for an unknown
/// name).
#[pyfunction]
pub fn operation_definition(name: &Bound<'_, PyAny>) -> PyResult<PyOperationDefinition> {
    let name = name.cast::<PyString>().map_err(|_| {
        PyTypeError::new_err(format!(
            "operation_definition name must be a str, got {}",
            type_name(name)
        ))
    })?;
    let inner = core_definition(&name.to_cow()?).py()?;
    Ok(PyOperationDefinition { inner })
}

/// The capability of the built-in `operation` on `operands`: each a `DType` (a tensor of that
/// dtype) or a `bool`, `int` or `float` (a weak scalar), with an optional `accumulator`
/// dtype — the plan central planning resolves for them.
pub fn capability_of(
    operation: &Bound<'_, PyAny>,
    operands: &Bound<'_, PyAny>,
    accumulator: Option<&Bound<'_, PyAny>>,
) -> PyResult<OperationCapability> {
    let name = operation.cast::<PyString>().map_err(|_| {
        PyTypeError::new_err(format!(
            "OperationCapability operation must be a str, got {}",
            type_name(operation)
        ))
    })?;
    let iterator = operands.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "OperationCapability operands must be an iterable of DType or scalar values, got {}",
            type_name(operands)
        ))
    })?;
    let mut plan_operands = Vec::new();
    for item in iterator {
        let item = item?;
        if let Ok(dtype) = item.cast::<PyDType>() {
            plan_operands.push(PlanOperand::Tensor(dtype.get().inner));
            continue;
        }
        let value = to_value(&item, "OperationCapability operand").map_err(|_| {
            PyTypeError::new_err(format!(
                "OperationCapability operands must hold DType or bool, int or float values, \
                 got {}",
                type_name(&item)
            ))
        })?;
        plan_operands.push(PlanOperand::Scalar(value));
    }
    let accumulator = match accumulator.filter(|a| !a.is_none()) {
        None => None,
        Some(dtype) => Some(
            dtype
                .cast::<PyDType>()
                .map(|d| d.get().inner)
                .map_err(|_| {
                    PyTypeError::new_err(format!(
                        "OperationCapability accumulator must be a DType or None, got {}",
                        type_name(dtype)
                    ))
                })?,
        ),
    };
    let plan = strideweave::operation::resolve_operation_plan(
        &name.to_cow()?,
        &plan_operands,
        accumulator,
    )
    .py()?;
    Ok(OperationCapability::from_plan(plan))
}

/// The core capability of a Python `OperationCapability`; `what` names the field.
pub fn expect_capability(object: &Bound<'_, PyAny>, what: &str) -> PyResult<OperationCapability> {
    object
        .cast::<PyOperationCapability>()
        .map(|c| c.get().inner.clone())
        .map_err(|_| {
            PyTypeError::new_err(format!(
                "{what} must hold OperationCapability values, got {}",
                type_name(object)
            ))
        })
}

/// The Python `OperationCapability` of a core capability.
pub fn wrap_capability(py: Python<'_>, inner: OperationCapability) -> PyResult<Py<PyAny>> {
    Ok(Py::new(py, PyOperationCapability { inner })?.into_any())
}

/// One result an invocation declares: its dtype and exact layout.
#[pyclass(name = "ResultSpec", module = "strideweave", frozen)]
pub struct PyResultSpec {
    inner: ResultSpec,
}

#[pymethods]
impl PyResultSpec {
    /// The result dtype.
    #[getter]
    fn dtype(&self, py: Python<'_>) -> PyResult<Py<PyDType>> {
        crate::dtype::wrap(py, self.inner.dtype())
    }

    /// The exact result layout (offset 0 in the result's carrier).
    #[getter]
    fn layout(&self) -> PyLayout {
        PyLayout::new_from(self.inner.layout().clone())
    }

    /// The operand this result is, when it aliases one.
    #[getter]
    fn alias_of(&self) -> Option<usize> {
        self.inner.alias_of()
    }
}

/// One call as a kernel executes it: the operation, its operands, the dtype plan the
/// capability matched, and the results to produce. Read-only; made by the framework.
#[pyclass(name = "ResolvedInvocation", module = "strideweave", frozen)]
pub struct PyResolvedInvocation {
    pub(crate) inner: ResolvedInvocation,
}

/// The Python object of an operand: the Tensor, or the Python scalar.
fn operand_object(py: Python<'_>, operand: &Operand) -> PyResult<Py<PyAny>> {
    match operand {
        Operand::Tensor(tensor) => Ok(Py::new(py, wrap_tensor(tensor.clone()))?.into_any()),
        Operand::Scalar(value) => from_value(py, *value),
    }
}

#[pymethods]
impl PyResolvedInvocation {
    /// The operation being called.
    #[getter]
    fn operation(&self) -> PyOperationDefinition {
        PyOperationDefinition {
            inner: *self.inner.call().definition(),
        }
    }

    /// The operands in schema order: Tensors and weak scalars.
    #[getter]
    fn operands(&self, py: Python<'_>) -> PyResult<Py<PyTuple>> {
        let items = self
            .inner
            .call()
            .operands()
            .iter()
            .map(|operand| operand_object(py, operand))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(PyTuple::new(py, items)?.unbind())
    }

    /// The dtype plan, as the capability it matched.
    #[getter]
    fn plan(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        wrap_capability(
            py,
            OperationCapability::from_plan(self.inner.plan().clone()),
        )
    }

    /// The results to produce, in result order.
    #[getter]
    fn results(&self, py: Python<'_>) -> PyResult<Py<PyTuple>> {
        let items = self
            .inner
            .results()
            .iter()
            .map(|spec| {
                Py::new(
                    py,
                    PyResultSpec {
                        inner: spec.clone(),
                    },
                )
            })
            .collect::<PyResult<Vec<_>>>()?;
        Ok(PyTuple::new(py, items)?.unbind())
    }

    /// The kernel id the resolver chose (the operation name by default).
    #[getter]
    fn kernel_id(&self) -> &str {
        self.inner.kernel_id()
    }

    /// A fresh zeroed result tensor for result `index`, allocated like the first tensor
    /// operand's carrier (so on that exact carrier class) and laid out as the spec says.
    fn allocate_result(&self, py: Python<'_>, index: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
        let index = to_index(index, "allocate_result index")?;
        let invocation = &self.inner;
        py.detach(|| invocation.allocate_result(index))
            .py()
            .map(wrap_tensor)
    }

    fn __repr__(&self) -> String {
        format!("ResolvedInvocation({})", self.inner.plan())
    }
}

/// Wraps a core invocation for a Python callback.
pub fn wrap_invocation(py: Python<'_>, invocation: &ResolvedInvocation) -> PyResult<Py<PyAny>> {
    Ok(Py::new(
        py,
        PyResolvedInvocation {
            inner: invocation.clone(),
        },
    )?
    .into_any())
}
