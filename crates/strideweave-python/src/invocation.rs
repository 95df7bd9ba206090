//! What a Python kernel or composite provider sees of one call: `OperationDefinition`,
//! `ResolvedInvocation` and `ResultSpec`, read-only views of the core's records, and the
//! `OperationCapability` constructor.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};
use strideweave::operation::{
    operation_definition as core_definition, Operand, OperationCapability, OperationDefinition,
    ResolvedInvocation, ResultSpec,
};

use crate::carrier::PyOperationCapability;
use crate::convert::{from_value, to_index, type_name};
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
    /// Fields are immutable: assignment is a `dataclasses.FrozenInstanceError`.
    fn __setattr__(&self, py: Python<'_>, name: &str, _value: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    /// Fields cannot be deleted either: a `dataclasses.FrozenInstanceError`.
    fn __delattr__(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

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

    /// `bind(*operands, **options)`: the call bound against this definition's schema (the
    /// checks and defaults a call makes, without resolving or running it), as the
    /// `BoundOperationCall` a resolver receives.
    #[pyo3(signature = (*operands, **options))]
    fn bind(
        &self,
        py: Python<'_>,
        operands: &Bound<'_, PyTuple>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<crate::custom_ops::PyBoundOperationCall> {
        crate::custom_ops::bind_call(py, &self.inner, operands, options)
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

    /// Runs the operation on `operands` and `options` and returns its one result (a
    /// `ValueError` for an operation with another number of results: use `call`).
    #[pyo3(signature = (*operands, **options))]
    fn __call__(
        &self,
        py: Python<'_>,
        operands: &Bound<'_, PyTuple>,
        options: Option<&Bound<'_, pyo3::types::PyDict>>,
    ) -> PyResult<Py<PyTensor>> {
        let mut results = crate::custom_ops::run(py, &self.inner, operands, options)?;
        if results.len() != 1 {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "'{}' returned {} results; call(operation, ...) returns them all",
                self.inner.name(),
                results.len()
            )));
        }
        crate::custom_ops::result_object(py, operands, results.remove(0))
    }

    /// The reference implementation `define_operation` was given (the same callable), or
    /// `None` (every built-in, and a custom operation defined without one).
    #[getter]
    fn reference(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        crate::reference::python_reference(py, &self.inner)
    }

    /// Binds and resolves a call on `operands` and `options` without running it: the
    /// `ResolvedInvocation` a provider would receive (the core's binding and resolver; no
    /// carrier is consulted).
    #[pyo3(signature = (*operands, **options))]
    fn resolve_call(
        &self,
        py: Python<'_>,
        operands: &Bound<'_, PyTuple>,
        options: Option<&Bound<'_, pyo3::types::PyDict>>,
    ) -> PyResult<PyResolvedInvocation> {
        let inner = crate::custom_ops::resolve_call(py, &self.inner, operands, options)?;
        Ok(PyResolvedInvocation { inner })
    }

    /// Runs the reference implementation on `invocation` (one of this operation's) and
    /// returns the tuple of its results, checked against the invocation's result specs
    /// (`ProviderContractError` naming the result otherwise); `NotImplementedError` for an
    /// operation without a reference.
    fn run_reference(
        &self,
        py: Python<'_>,
        invocation: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyTuple>> {
        let invocation = invocation.cast::<PyResolvedInvocation>().map_err(|_| {
            PyTypeError::new_err(format!(
                "run_reference invocation must be a ResolvedInvocation, got {}",
                type_name(invocation)
            ))
        })?;
        let results = crate::reference::run_reference(py, &self.inner, &invocation.get().inner)?;
        let items = results
            .into_iter()
            .map(|t| Py::new(py, wrap_tensor(t)))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(PyTuple::new(py, items)?.unbind())
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
    /// Fields are immutable: assignment is a `dataclasses.FrozenInstanceError`.
    fn __setattr__(&self, py: Python<'_>, name: &str, _value: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    /// Fields cannot be deleted either: a `dataclasses.FrozenInstanceError`.
    fn __delattr__(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    /// `ResultSpec(dtype, shape, layout=None, alias_of=None, *, atol=0.0, rtol=0.0)`: a
    /// result of `dtype` with exactly `layout` (default: the column-major layout of
    /// `shape`, which a given layout must have), optionally operand `alias_of` itself, and
    /// the tolerances against a reference (finite and >= 0).
    #[new]
    #[pyo3(signature = (dtype, shape, layout=None, alias_of=None, *, atol=None, rtol=None))]
    fn py_new(
        dtype: &Bound<'_, PyAny>,
        shape: &Bound<'_, PyAny>,
        layout: Option<&Bound<'_, PyAny>>,
        alias_of: Option<&Bound<'_, PyAny>>,
        atol: Option<&Bound<'_, PyAny>>,
        rtol: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let dtype = dtype
            .cast::<PyDType>()
            .map(|d| d.get().inner)
            .map_err(|_| {
                PyTypeError::new_err(format!(
                    "ResultSpec dtype must be a DType, got {}",
                    type_name(dtype)
                ))
            })?;
        let shape =
            crate::layout::to_shape(&crate::layout::integer_tree(shape), "ResultSpec shape")?;
        let mut spec = match layout {
            None => ResultSpec::canonical(dtype, shape),
            Some(layout) => {
                let layout = crate::layout::expect_layout(layout, "ResultSpec layout")?;
                if layout.shape() != &shape {
                    return Err(pyo3::exceptions::PyValueError::new_err(format!(
                        "ResultSpec layout {layout} does not have the result Shape {shape}"
                    )));
                }
                ResultSpec::new(dtype, layout)
            }
        };
        if let Some(index) = alias_of {
            spec = spec.aliasing(to_index(index, "ResultSpec alias_of")?);
        }
        let tolerance = |value: Option<&Bound<'_, PyAny>>, what: &str| -> PyResult<f64> {
            match value {
                None => Ok(0.0),
                Some(v) if v.is_instance_of::<pyo3::types::PyBool>() => Err(PyTypeError::new_err(
                    format!("ResultSpec {what} must be a finite int or float, got bool"),
                )),
                Some(v) => v.extract::<f64>().map_err(|_| {
                    PyTypeError::new_err(format!(
                        "ResultSpec {what} must be a finite int or float, got {}",
                        type_name(v)
                    ))
                }),
            }
        };
        let (atol, rtol) = (tolerance(atol, "atol")?, tolerance(rtol, "rtol")?);
        Ok(PyResultSpec {
            inner: spec.with_tolerance(atol, rtol).py()?,
        })
    }

    /// The result shape.
    #[getter]
    fn shape(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        crate::convert::from_int_tuple(py, &self.inner.shape().to_int_tuple())
    }

    /// The absolute tolerance against the reference.
    #[getter]
    fn atol(&self) -> f64 {
        self.inner.atol()
    }

    /// The relative tolerance against the reference.
    #[getter]
    fn rtol(&self) -> f64 {
        self.inner.rtol()
    }

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
pub(crate) fn operand_object(py: Python<'_>, operand: &Operand) -> PyResult<Py<PyAny>> {
    match operand {
        Operand::Tensor(tensor) => Ok(Py::new(py, wrap_tensor(tensor.clone()))?.into_any()),
        Operand::Scalar(value) => from_value(py, *value),
    }
}

#[pymethods]
impl PyResolvedInvocation {
    /// Fields are immutable: assignment is a `dataclasses.FrozenInstanceError`.
    fn __setattr__(&self, py: Python<'_>, name: &str, _value: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    /// Fields cannot be deleted either: a `dataclasses.FrozenInstanceError`.
    fn __delattr__(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    /// `ResolvedInvocation(call, plan, results, saved_operands=(), kernel_id=None,
    /// mutated_operands=())`: what a custom operation's resolver returns for `call`. The
    /// core checks it (`ValueError`): the plan names the call's operation with one operand
    /// plan per operand of the matching role, at least one result, aliases and saved operands
    /// naming distinct tensor operands, a non-empty kernel id (default: the operation name).
    #[new]
    #[pyo3(signature = (call, plan, results, saved_operands=None, kernel_id=None, mutated_operands=None))]
    fn py_new(
        call: &Bound<'_, PyAny>,
        plan: &Bound<'_, PyAny>,
        results: &Bound<'_, PyAny>,
        saved_operands: Option<&Bound<'_, PyAny>>,
        kernel_id: Option<&Bound<'_, PyAny>>,
        mutated_operands: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let call = call
            .cast::<crate::custom_ops::PyBoundOperationCall>()
            .map(|c| c.get().inner.clone())
            .map_err(|_| {
                PyTypeError::new_err(format!(
                    "ResolvedInvocation call must be a BoundOperationCall, got {}",
                    type_name(call)
                ))
            })?;
        let plan = crate::custom_ops::expect_plan(plan, "ResolvedInvocation plan")?;
        let results = crate::prepared::materialize(results, "ResolvedInvocation results")?
            .iter()
            .map(|item| {
                item.cast::<PyResultSpec>()
                    .map(|s| s.get().inner.clone())
                    .map_err(|_| {
                        PyTypeError::new_err(format!(
                            "ResolvedInvocation results must hold ResultSpec values, got {}",
                            type_name(&item)
                        ))
                    })
            })
            .collect::<PyResult<Vec<_>>>()?;
        let indices = |value: Option<&Bound<'_, PyAny>>, what: &str| match value {
            None => Ok(Vec::new()),
            Some(v) => crate::convert::to_indices(v, what),
        };
        let saved = indices(saved_operands, "ResolvedInvocation saved_operands")?;
        let mutated = indices(mutated_operands, "ResolvedInvocation mutated_operands")?;
        let kernel_id = kernel_id
            .map(|id| {
                id.cast::<PyString>()
                    .map_err(|_| {
                        PyTypeError::new_err(format!(
                            "ResolvedInvocation kernel_id must be a str or None, got {}",
                            type_name(id)
                        ))
                    })
                    .and_then(|id| Ok(id.to_cow()?.into_owned()))
            })
            .transpose()?;
        let inner = ResolvedInvocation::new(call, plan, results, saved, kernel_id.as_deref())
            .and_then(|invocation| invocation.with_mutated_operands(mutated))
            .py()?;
        Ok(PyResolvedInvocation { inner })
    }

    /// The bound call this invocation resolves.
    #[getter]
    fn call(&self) -> crate::custom_ops::PyBoundOperationCall {
        crate::custom_ops::PyBoundOperationCall {
            inner: self.inner.call().clone(),
        }
    }

    /// The operands saved for the backward pass, by operand index.
    #[getter]
    fn saved_operands<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.inner.saved_operands())
    }

    /// The definition of the operation being called.
    #[getter]
    fn definition(&self) -> PyOperationDefinition {
        PyOperationDefinition {
            inner: *self.inner.call().definition(),
        }
    }

    /// The name of the operation being called (its definition's).
    #[getter]
    fn name(&self) -> &str {
        self.inner.call().definition().name()
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
        crate::finalization::detach(py, || invocation.allocate_result(index))
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
