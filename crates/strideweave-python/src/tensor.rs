//! `Tensor`: element access, views, the operators, autograd and `to_list`, over the core's
//! tensor. Operations release the GIL while the core runs them.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyList, PySlice, PyTuple};
use strideweave::operation::Operand;
use strideweave::{ops, IntTuple, SliceKey, Tensor, Value};

use crate::carrier::{expect_carrier, wrap as wrap_carrier};
use crate::convert::{from_int_tuple, from_value, to_index, to_int_tuple, to_value, type_name};
use crate::dtype::PyDType;
use crate::errors::IntoPyResult;
use crate::layout::{expect_layout, to_shape, PyLayout};

/// A tensor: `(carrier, offset, layout, dtype)`.
///
/// `Tensor(carrier, offset, layout)` places the layout's indices at `offset` in the carrier;
/// `t[i, j]` reads and writes one element, a key with a slice makes a view sharing the
/// carrier, and `+ - * / @` call the built-in operations.
#[pyclass(name = "Tensor", module = "strideweave", frozen)]
pub struct PyTensor {
    pub(crate) inner: Tensor,
    /// The `Layout` object `layout` returns: the one the tensor was built with, else made on
    /// first access, so that `t.layout is t.layout` as in the original.
    layout_object: std::sync::OnceLock<Py<PyLayout>>,
}

/// Wraps a core tensor.
pub fn wrap(tensor: Tensor) -> PyTensor {
    PyTensor {
        inner: tensor,
        layout_object: std::sync::OnceLock::new(),
    }
}

/// The core tensor of a Python tensor argument; `what` names it.
pub fn expect_tensor(object: &Bound<'_, PyAny>, what: &str) -> PyResult<Tensor> {
    object
        .cast::<PyTensor>()
        .map(|t| t.get().inner.clone())
        .map_err(|_| {
            PyTypeError::new_err(format!(
                "{what} must be a Tensor, got {}",
                type_name(object)
            ))
        })
}

/// A Tensor or a Python scalar as an operand; `None` when it is neither.
fn operand(object: &Bound<'_, PyAny>) -> Option<Operand> {
    if let Ok(tensor) = object.cast::<PyTensor>() {
        return Some(Operand::Tensor(tensor.get().inner.clone()));
    }
    to_value(object, "operand").ok().map(Operand::Scalar)
}

/// Whether `operand` lets a call keep the GIL: a scalar, or a tensor [`crate::tiny::inline`]
/// accepts.
fn operand_inline(operand: &Operand) -> bool {
    match operand {
        Operand::Tensor(tensor) => crate::tiny::inline(&[tensor]),
        _ => true,
    }
}

/// An operand argument of an operation function, or a Type error naming `what`.
fn expect_operand(object: &Bound<'_, PyAny>, what: &str) -> PyResult<Operand> {
    operand(object).ok_or_else(|| {
        PyTypeError::new_err(format!(
            "{what} must be a real Python number (bool, int or float) or a Tensor, got {}",
            type_name(object)
        ))
    })
}

/// Whether `item` is an element coordinate entry: an int (not bool), or a tuple or list of
/// them.
fn is_coordinate(item: &Bound<'_, PyAny>) -> bool {
    if item.is_instance_of::<PyBool>() {
        return false;
    }
    item.is_instance_of::<PyInt>()
        || item.is_instance_of::<PyTuple>()
        || item.is_instance_of::<PyList>()
}

/// What a subscript key asks for.
enum Key {
    /// One element at this coordinate.
    Element(IntTuple),
    /// A view.
    View(Vec<SliceKey>),
}

fn slice_bound(bound: Bound<'_, PyAny>, what: &str) -> PyResult<Option<i64>> {
    if bound.is_none() {
        return Ok(None);
    }
    if bound.is_instance_of::<PyBool>() || !bound.is_instance_of::<PyInt>() {
        return Err(PyTypeError::new_err(format!(
            "slice {what} must be an int or None, got {}",
            type_name(&bound)
        )));
    }
    Ok(Some(bound.extract::<i64>()?))
}

fn parse_key(tensor: &Tensor, key: &Bound<'_, PyAny>) -> PyResult<Key> {
    let rank = tensor.layout().rank();
    let items: Vec<Bound<'_, PyAny>> = match key.cast::<PyTuple>() {
        Ok(tuple) => tuple.iter().collect(),
        // A list is a coordinate too, entry by entry as a tuple's (`t[[1, 2]]` is `t[1, 2]`),
        // as the original's keys are.
        Err(_) if key.is_instance_of::<PyList>() => key.cast::<PyList>()?.iter().collect(),
        // One `int` is an element: the coordinate of a one-mode tensor, the ordinal (first
        // mode fastest) of a tensor of several modes, as an integer stands for a whole
        // subtree of a layout. Read without gathering the key into a list first (an exact
        // `int` is never a `bool`; other keys take the general path below).
        Err(_) if key.is_exact_instance_of::<PyInt>() => {
            let coordinate = match key.extract::<i64>() {
                Ok(int) => IntTuple::Int(int),
                Err(_) => to_int_tuple(key, "coordinate")?,
            };
            return Ok(Key::Element(coordinate));
        }
        Err(_) => vec![key.clone()],
    };
    if items.len() == rank && items.iter().all(is_coordinate) {
        let coordinate = match items.as_slice() {
            [single] => to_int_tuple(single, "coordinate")?,
            _ => IntTuple::Tuple(
                items
                    .iter()
                    .map(|item| to_int_tuple(item, "coordinate"))
                    .collect::<PyResult<_>>()?,
            ),
        };
        return Ok(Key::Element(coordinate));
    }
    let mut keys = Vec::with_capacity(items.len());
    for item in &items {
        if let Ok(slice) = item.cast::<PySlice>() {
            keys.push(SliceKey::Range {
                start: slice_bound(slice.getattr("start")?, "start")?,
                stop: slice_bound(slice.getattr("stop")?, "stop")?,
                step: slice_bound(slice.getattr("step")?, "step")?,
            });
        } else if item.is_instance_of::<PyInt>() && !item.is_instance_of::<PyBool>() {
            keys.push(SliceKey::Index(item.extract::<i64>()?));
        } else {
            return Err(PyTypeError::new_err(format!(
                "a tensor key holds ints, int tuples and slices, got {}",
                type_name(item)
            )));
        }
    }
    Ok(Key::View(keys))
}

/// The values of a tensor, nested by top-level mode: `to_list()[i][j] == t[i, j]`.
fn nest(
    py: Python<'_>,
    values: &[Value],
    extents: &[usize],
    level: usize,
    base: usize,
    step: usize,
) -> PyResult<Py<PyAny>> {
    if level == extents.len() {
        return from_value(py, values[base]);
    }
    let items = (0..extents[level])
        .map(|i| {
            nest(
                py,
                values,
                extents,
                level + 1,
                base + i * step,
                step * extents[level],
            )
        })
        .collect::<PyResult<Vec<_>>>()?;
    Ok(PyList::new(py, items)?.into_any().unbind())
}

macro_rules! unary_functions {
    ($($(#[$doc:meta])* $name:ident;)*) => {$(
        $(#[$doc])*
        #[pyfunction]
        pub fn $name(py: Python<'_>, x: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
            let x = expect_tensor(x, stringify!($name))?;
            crate::tiny::run(py, crate::tiny::inline(&[&x]), || ops::$name(&x)).py().map(wrap)
        }
    )*};
}

macro_rules! binary_functions {
    ($($(#[$doc:meta])* $name:ident;)*) => {$(
        $(#[$doc])*
        #[pyfunction]
        pub fn $name(py: Python<'_>, lhs: &Bound<'_, PyAny>, rhs: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
            let lhs = expect_tensor(lhs, concat!(stringify!($name), " lhs"))?;
            let rhs = expect_tensor(rhs, concat!(stringify!($name), " rhs"))?;
            let keep = crate::tiny::inline(&[&lhs, &rhs]);
            crate::tiny::run(py, keep, || ops::$name(&lhs, &rhs)).py().map(wrap)
        }
    )*};
}

macro_rules! tensor_operand_functions {
    ($($(#[$doc:meta])* $name:ident;)*) => {$(
        $(#[$doc])*
        #[pyfunction]
        pub fn $name(py: Python<'_>, lhs: &Bound<'_, PyAny>, rhs: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
            let lhs = expect_tensor(lhs, concat!(stringify!($name), " lhs"))?;
            let rhs = expect_operand(rhs, concat!(stringify!($name), " rhs"))?;
            crate::finalization::detach(py, || ops::$name(&lhs, rhs)).py().map(wrap)
        }
    )*};
}

/// The built-in operations' names, in the table's order, and each one's Python signature
/// as the stubs write it, derived from its schema: `((parameter, annotation, default), …)`
/// with `Tensor` for a tensor operand, `Operand` for a tensor-or-scalar one, `Scalar` for
/// a weak scalar, and every option (a dtype request) `Optional[DType]` defaulting to `None`.
/// `tests/python/test_builtin_table.py` checks the functions and the stubs against it.
pub fn builtin_signatures(py: Python<'_>) -> PyResult<(Py<PyTuple>, Py<PyDict>)> {
    use strideweave::operation::{operation_definition, OperandKind, BUILTIN_OPERATIONS};
    let signatures = PyDict::new(py);
    for name in BUILTIN_OPERATIONS {
        let definition = operation_definition(name).py()?;
        let schema = definition.schema();
        let mut parameters: Vec<(String, &str, Option<&str>)> = Vec::new();
        for operand in schema.operands() {
            let annotation = match operand.kind() {
                OperandKind::Tensor => "Tensor",
                OperandKind::Structural => "Operand",
                OperandKind::WeakScalar => "Scalar",
            };
            parameters.push((operand.name().to_owned(), annotation, None));
        }
        for option in schema.options() {
            parameters.push((option.name().to_owned(), "Optional[DType]", Some("None")));
        }
        signatures.set_item(name, PyTuple::new(py, parameters)?)?;
    }
    Ok((
        PyTuple::new(py, BUILTIN_OPERATIONS)?.unbind(),
        signatures.unbind(),
    ))
}

unary_functions! {
    /// `-x`.
    neg;
    /// `|x|`.
    abs;
    /// `e^x`.
    exp;
    /// The natural logarithm.
    log;
    /// The square root.
    sqrt;
    /// The hyperbolic tangent.
    tanh;
    /// `1 / (1 + e^-x)`.
    sigmoid;
    /// `max(x, 0)`.
    relu;
    /// The maximum over mode 1 of a two-mode tensor.
    reduce_max;
}

binary_functions! {
    /// `lhs + rhs`, broadcasting extent-1 leaves.
    add;
    /// `lhs - rhs`, broadcasting.
    sub;
    /// `lhs * rhs` elementwise, broadcasting.
    elementwise_mul;
}

tensor_operand_functions! {
    /// `lhs / rhs`; `rhs` is a Tensor or a scalar.
    div;
    /// The elementwise maximum.
    maximum;
    /// The elementwise minimum.
    minimum;
    /// `lhs == rhs` as Bool.
    eq;
    /// `lhs < rhs` as Bool.
    lt;
    /// `lhs <= rhs` as Bool.
    le;
}

/// `lhs * rhs` where either may be a scalar.
#[pyfunction]
pub fn mul(py: Python<'_>, lhs: &Bound<'_, PyAny>, rhs: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
    let lhs = expect_operand(lhs, "mul lhs")?;
    let rhs = expect_operand(rhs, "mul rhs")?;
    crate::finalization::detach(py, || ops::mul(lhs, rhs))
        .py()
        .map(wrap)
}

/// `a` where `cond` holds, else `b`; `a` and `b` are Tensors or scalars.
#[pyfunction]
pub fn select(
    py: Python<'_>,
    cond: &Bound<'_, PyAny>,
    a: &Bound<'_, PyAny>,
    b: &Bound<'_, PyAny>,
) -> PyResult<PyTensor> {
    let cond = expect_tensor(cond, "select cond")?;
    let a = expect_operand(a, "select a")?;
    let b = expect_operand(b, "select b")?;
    crate::finalization::detach(py, || ops::select(&cond, a, b))
        .py()
        .map(wrap)
}

fn accumulator_arg(accumulator: Option<&Bound<'_, PyAny>>) -> PyResult<Option<strideweave::DType>> {
    accumulator
        .map(|a| {
            a.cast::<PyDType>().map(|d| d.get().inner).map_err(|_| {
                PyTypeError::new_err(format!("accumulator must be a DType, got {}", type_name(a)))
            })
        })
        .transpose()
}

/// The sum over mode 1 of a two-mode tensor, accumulated in `accumulator_dtype` if given.
#[pyfunction]
#[pyo3(signature = (x, accumulator_dtype=None))]
pub fn reduce_sum(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    accumulator_dtype: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyTensor> {
    let x = expect_tensor(x, "reduce_sum x")?;
    let accumulator = accumulator_arg(accumulator_dtype)?;
    crate::finalization::detach(py, || match accumulator {
        None => ops::reduce_sum(&x),
        Some(dtype) => ops::reduce_sum_with(&x, dtype),
    })
    .py()
    .map(wrap)
}

/// `(N,K)·(M,K) → (N,M)`: mode 1 of both is contracted, accumulated in `accumulator_dtype`
/// if given.
#[pyfunction]
#[pyo3(signature = (lhs, rhs, accumulator_dtype=None))]
pub fn matmul(
    py: Python<'_>,
    lhs: &Bound<'_, PyAny>,
    rhs: &Bound<'_, PyAny>,
    accumulator_dtype: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyTensor> {
    let lhs = expect_tensor(lhs, "matmul lhs")?;
    let rhs = expect_tensor(rhs, "matmul rhs")?;
    let accumulator = accumulator_arg(accumulator_dtype)?;
    crate::finalization::detach(py, || match accumulator {
        None => ops::matmul(&lhs, &rhs),
        Some(dtype) => ops::matmul_with(&lhs, &rhs, dtype),
    })
    .py()
    .map(wrap)
}

/// The gradients of `outputs` (weighted by `grad_outputs`) with respect to `inputs`, one
/// entry per input (`None` where unreachable), without touching any `.grad`.
#[pyfunction]
#[pyo3(signature = (outputs, inputs, grad_outputs=None, retain_graph=false))]
pub fn grad(
    py: Python<'_>,
    outputs: &Bound<'_, PyAny>,
    inputs: &Bound<'_, PyAny>,
    grad_outputs: Option<&Bound<'_, PyAny>>,
    retain_graph: bool,
) -> PyResult<Vec<Option<PyTensor>>> {
    let outputs = tensor_list(outputs, "grad outputs")?;
    let inputs = tensor_list(inputs, "grad inputs")?;
    let cotangents = match grad_outputs {
        None => vec![None; outputs.len()],
        Some(given) => optional_tensor_list(given, "grad grad_outputs")?,
    };
    let grads = crate::finalization::detach(py, || {
        strideweave::autograd::grad(&outputs, &inputs, &cotangents, retain_graph)
    })
    .py()?;
    Ok(grads.into_iter().map(|g| g.map(wrap)).collect())
}

fn sequence_items<'py>(object: &Bound<'py, PyAny>, what: &str) -> PyResult<Vec<Bound<'py, PyAny>>> {
    if object.cast::<PyTensor>().is_ok() {
        return Ok(vec![object.clone()]);
    }
    if let Ok(tuple) = object.cast::<PyTuple>() {
        return Ok(tuple.iter().collect());
    }
    if let Ok(list) = object.cast::<PyList>() {
        return Ok(list.iter().collect());
    }
    Err(PyTypeError::new_err(format!(
        "{what} must be a Tensor or a list or tuple of Tensors, got {}",
        type_name(object)
    )))
}

fn tensor_list(object: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<Tensor>> {
    sequence_items(object, what)?
        .iter()
        .map(|item| expect_tensor(item, what))
        .collect()
}

fn optional_tensor_list(object: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<Option<Tensor>>> {
    if object.is_none() {
        return Err(PyTypeError::new_err(format!(
            "{what} must be a Tensor or a list or tuple of Tensors or None, got NoneType"
        )));
    }
    sequence_items(object, what)?
        .iter()
        .map(|item| {
            if item.is_none() {
                Ok(None)
            } else {
                expect_tensor(item, what).map(Some)
            }
        })
        .collect()
}

impl PyTensor {
    fn binary(
        &self,
        py: Python<'_>,
        other: &Bound<'_, PyAny>,
        run: impl FnOnce(&Tensor, &Tensor) -> strideweave::Result<Tensor> + Send,
    ) -> PyResult<Py<PyAny>> {
        let Ok(other) = other.cast::<PyTensor>() else {
            return Ok(py.NotImplemented());
        };
        let rhs = &other.get().inner;
        let keep = crate::tiny::inline(&[&self.inner, rhs]);
        let result = crate::tiny::run(py, keep, || run(&self.inner, rhs)).py()?;
        Ok(Py::new(py, wrap(result))?.into_any())
    }
}

#[pymethods]
impl PyTensor {
    #[new]
    fn py_new(
        py: Python<'_>,
        carrier: &Bound<'_, PyAny>,
        offset: &Bound<'_, PyAny>,
        layout: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        let carrier = expect_carrier(carrier, "Tensor carrier")?;
        let offset = to_index(offset, "Tensor offset")?;
        let given = layout.cast::<PyLayout>().ok().map(|l| l.clone().unbind());
        let layout = expect_layout(layout, "Tensor layout")?;
        let tensor =
            crate::finalization::detach(py, || Tensor::new(carrier, offset, layout)).py()?;
        let wrapped = wrap(tensor);
        if let Some(given) = given {
            let _ = wrapped.layout_object.set(given);
        }
        Ok(wrapped)
    }

    /// A tensor over the first slots of `carrier` with the column-major layout of `shape`.
    #[staticmethod]
    fn compact(
        py: Python<'_>,
        carrier: &Bound<'_, PyAny>,
        shape: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        let carrier = expect_carrier(carrier, "Tensor carrier")?;
        let shape = to_shape(shape, "Tensor shape")?;
        let tensor = crate::finalization::detach(py, || Tensor::compact(carrier, shape)).py()?;
        Ok(wrap(tensor))
    }

    /// The carrier holding the slots (the same object the tensor was built on).
    #[getter]
    fn carrier(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        wrap_carrier(py, self.inner.carrier())
    }

    /// The slot of coordinate 0.
    #[getter]
    fn offset(&self) -> usize {
        self.inner.offset()
    }

    /// The layout from coordinates to slots (relative to `offset`): one object per tensor,
    /// the one it was built with when that was a `Layout`.
    #[getter]
    fn layout(&self, py: Python<'_>) -> PyResult<Py<PyLayout>> {
        if let Some(existing) = self.layout_object.get() {
            return Ok(existing.clone_ref(py));
        }
        let made = Py::new(py, PyLayout::new_from(self.inner.layout().clone()))?;
        Ok(self.layout_object.get_or_init(|| made).clone_ref(py))
    }

    /// The shape as an integer tree.
    #[getter]
    fn shape(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        from_int_tuple(py, &self.inner.shape().to_int_tuple())
    }

    /// The number of elements.
    fn size(&self) -> usize {
        self.inner.size()
    }

    /// The element dtype.
    fn dtype(&self, py: Python<'_>) -> PyResult<Py<PyDType>> {
        crate::dtype::wrap(py, self.inner.dtype())
    }

    /// The carrier's version: it moves by one per successful write through any view.
    #[getter]
    fn version(&self) -> u64 {
        self.inner.version()
    }

    /// Whether writes are allowed.
    fn is_mutable(&self) -> bool {
        self.inner.is_mutable()
    }

    fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        match parse_key(&self.inner, key)? {
            Key::Element(coordinate) => {
                // One slot read: CPU reads never wait on a thread that needs the GIL.
                let keep = crate::tiny::inline(&[&self.inner]);
                let value = crate::tiny::run(py, keep, || self.inner.get(&coordinate)).py()?;
                from_value(py, value)
            }
            Key::View(keys) => Ok(Py::new(py, wrap(self.inner.slice(&keys).py()?))?.into_any()),
        }
    }

    fn __setitem__(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        match parse_key(&self.inner, key)? {
            Key::Element(coordinate) => {
                let value = to_value(value, "the written value")?;
                crate::finalization::detach(py, || self.inner.set(&coordinate, value)).py()
            }
            Key::View(_) => Err(PyTypeError::new_err(
                "a tensor assignment writes one element: give one coordinate per mode",
            )),
        }
    }

    /// The values nested by top-level mode (`to_list()[i][j] == t[i, j]`; a scalar for a
    /// rank-0 tensor).
    fn to_list(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        crate::convert::check_python_list(self.inner.size(), || {
            format!("the list of a Tensor of shape {}", self.inner.shape())
        })?;
        let values = crate::finalization::detach(py, || self.inner.to_values()).py()?;
        let extents: Vec<usize> = (0..self.inner.layout().rank())
            .map(|k| self.inner.layout().mode(k).map(|m| m.size()))
            .collect::<Result<_, _>>()
            .map_err(crate::layout::layout_err)?;
        nest(py, &values, &extents, 0, 0, 1)
    }

    /// The modes reordered: `order[j]` is the mode placed at `j`.
    #[pyo3(signature = (*order))]
    fn permute(&self, order: &Bound<'_, PyTuple>) -> PyResult<Self> {
        let order = order
            .iter()
            .map(|item| to_index(&item, "permute order"))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(wrap(self.inner.permute(&order).py()?))
    }

    /// The same slots under `shape` (the layout must coalesce to one leaf).
    fn reshape(&self, shape: &Bound<'_, PyAny>) -> PyResult<Self> {
        let shape = to_shape(shape, "reshape shape")?;
        Ok(wrap(self.inner.reshape(&shape).py()?))
    }

    /// Extent-1 leaves widened to `shape` with stride 0.
    fn broadcast_to(&self, shape: &Bound<'_, PyAny>) -> PyResult<Self> {
        let shape = to_shape(shape, "broadcast_to shape")?;
        Ok(wrap(self.inner.broadcast_to(&shape).py()?))
    }

    /// Whether gradients are recorded for this tensor.
    #[getter]
    fn get_requires_grad(&self) -> bool {
        self.inner.requires_grad()
    }

    #[setter]
    fn set_requires_grad(&self, requires: &Bound<'_, PyAny>) -> PyResult<()> {
        let requires = requires.cast::<PyBool>().map_err(|_| {
            PyTypeError::new_err(format!(
                "requires_grad must be a bool, got {}",
                type_name(requires)
            ))
        })?;
        self.inner.set_requires_grad(requires.is_true()).py()
    }

    /// The accumulated gradient, `None` before a backward pass reaches this tensor.
    #[getter]
    fn get_grad(&self) -> Option<PyTensor> {
        self.inner.grad().map(wrap)
    }

    #[setter]
    fn set_grad(&self, grad: &Bound<'_, PyAny>) -> PyResult<()> {
        let grad = if grad.is_none() {
            None
        } else {
            Some(expect_tensor(grad, "grad")?)
        };
        self.inner.set_grad(grad).py()
    }

    /// Whether this tensor was not produced by a recorded operation.
    #[getter]
    fn is_leaf(&self) -> bool {
        self.inner.is_leaf()
    }

    /// The name of the operation that recorded this tensor, `None` for a leaf.
    #[getter]
    fn grad_fn(&self) -> Option<String> {
        self.inner.grad_fn().map(|node| node.name().to_owned())
    }

    /// The recorded operation this tensor came from (one object per graph node), `None` for
    /// a leaf. Read-only: the framework owns the graph.
    #[getter]
    fn autograd_ctx(
        &self,
        py: Python<'_>,
    ) -> PyResult<Option<Py<crate::autograd_context::PyAutogradContext>>> {
        self.inner
            .grad_fn()
            .map(|node| crate::autograd_context::context_of(py, node))
            .transpose()
    }

    /// The exact class of this tensor's carrier.
    fn carrier_type(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let object = crate::carrier::wrap(py, self.inner.carrier())?;
        Ok(object.bind(py).get_type().into_any().unbind())
    }

    /// Whether this tensor can take part in gradients (its dtype is differentiable).
    fn is_differentiable(&self) -> bool {
        self.inner.is_differentiable()
    }

    /// Keeps `.grad` for this non-leaf tensor in later backward passes (`retain=True`, the
    /// original's argument; retaining cannot be undone, so `retain=False` is a ValueError).
    #[pyo3(signature = (retain=true))]
    fn retain_grad(&self, retain: bool) -> PyResult<()> {
        if !retain {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "retain_grad(retain=False) is not supported: a tensor keeps .grad once it retains it",
            ));
        }
        self.inner.retain_grad().py()
    }

    /// The same storage without autograd history.
    fn detach(&self) -> Self {
        wrap(self.inner.detach())
    }

    /// Accumulates gradients into the leaves this tensor depends on.
    #[pyo3(signature = (gradient=None, retain_graph=false))]
    fn backward(
        &self,
        py: Python<'_>,
        gradient: Option<&Bound<'_, PyAny>>,
        retain_graph: bool,
    ) -> PyResult<()> {
        let gradient = match gradient {
            None => None,
            Some(g) if g.is_none() => None,
            Some(g) => Some(expect_tensor(g, "backward gradient")?),
        };
        crate::finalization::detach(py, || self.inner.backward(gradient.as_ref(), retain_graph))
            .py()
    }

    fn __add__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binary(py, other, ops::add)
    }

    fn __sub__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binary(py, other, ops::sub)
    }

    fn __matmul__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        self.binary(py, other, ops::matmul)
    }

    fn __mul__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let Some(rhs) = operand(other) else {
            return Ok(py.NotImplemented());
        };
        let keep = crate::tiny::inline(&[&self.inner]) && operand_inline(&rhs);
        let lhs = self.inner.clone();
        let result = crate::tiny::run(py, keep, || ops::mul(lhs, rhs)).py()?;
        Ok(Py::new(py, wrap(result))?.into_any())
    }

    fn __rmul__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let Some(lhs) = operand(other) else {
            return Ok(py.NotImplemented());
        };
        let keep = crate::tiny::inline(&[&self.inner]) && operand_inline(&lhs);
        let rhs = self.inner.clone();
        let result = crate::tiny::run(py, keep, || ops::mul(lhs, rhs)).py()?;
        Ok(Py::new(py, wrap(result))?.into_any())
    }

    fn __truediv__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let Some(rhs) = operand(other) else {
            return Ok(py.NotImplemented());
        };
        let keep = crate::tiny::inline(&[&self.inner]) && operand_inline(&rhs);
        let result = crate::tiny::run(py, keep, || ops::div(&self.inner, rhs)).py()?;
        Ok(Py::new(py, wrap(result))?.into_any())
    }

    fn __neg__(&self, py: Python<'_>) -> PyResult<Self> {
        let keep = crate::tiny::inline(&[&self.inner]);
        crate::tiny::run(py, keep, || ops::neg(&self.inner))
            .py()
            .map(wrap)
    }

    fn __abs__(&self, py: Python<'_>) -> PyResult<Self> {
        let keep = crate::tiny::inline(&[&self.inner]);
        crate::tiny::run(py, keep, || ops::abs(&self.inner))
            .py()
            .map(wrap)
    }

    fn __repr__(&self) -> String {
        format!(
            "Tensor(layout={}, dtype={}, carrier={})",
            self.inner.layout(),
            self.inner.dtype(),
            self.inner.carrier().class().name()
        )
    }

    /// numpy's conversion hook: a read-only view of a CPU Float32 or Int32 tensor whose
    /// layout flattens, else a copy (see `numpy_interop`).
    #[pyo3(signature = (dtype=None, copy=None))]
    fn __array__(
        &self,
        py: Python<'_>,
        dtype: Option<&Bound<'_, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        crate::numpy_interop::to_numpy(py, &self.inner, dtype, copy)
    }

    /// DLPack export: a read-only `dltensor_versioned` capsule over a CPU Float32 or Int32
    /// tensor whose layout flattens, freezing its slots until the consumer lets go (see
    /// `dlpack`).
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__(
        &self,
        py: Python<'_>,
        stream: Option<&Bound<'_, PyAny>>,
        max_version: Option<&Bound<'_, PyAny>>,
        dl_device: Option<&Bound<'_, PyAny>>,
        copy: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        crate::dlpack::export(py, &self.inner, stream, max_version, dl_device, copy)
    }

    /// DLPack's device of the tensor: `(1, 0)`, the CPU, for a CPU carrier.
    fn __dlpack_device__(&self) -> PyResult<(i32, i32)> {
        crate::dlpack::device(&self.inner)
    }

    fn __bool__(&self) -> PyResult<bool> {
        Err(PyValueError::new_err(
            "the truth value of a Tensor is ambiguous: read an element with t[...]",
        ))
    }
}
