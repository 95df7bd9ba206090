//! The Generic reference kernels of the built-in operations (docs/kernel-semantics.md).
//!
//! They work on [`Value`]s, one element at a time: every operand is read by ordinal through
//! its (broadcast) layout, converted to the dtype its operand plan names, computed in the
//! plan's arithmetic, and the results are gathered in result-ordinal order into a fresh
//! carrier of the operands' class. Operands are only read, never written. Every other
//! implementation is compared with these kernels, so they favour clarity over speed and
//! define the exact answer (summation order included).

mod elementwise;
mod matmul;
mod reduce;

use std::fmt;

use strideweave_layout::Layout;

use crate::dtype::{DType, Value};
use crate::error::{Error, Result};
use crate::operation::builtin::kernel::KernelKind;
use crate::operation::{
    Accumulation, Arithmetic, Builtin, Operand, OperandPlan, ResolvedInvocation, ResultSpec,
};
use crate::tensor::Tensor;

/// Executes the built-in operation `builtin` on `invocation` and returns its single fresh
/// result, by the kernel kind of its entry.
///
/// # Errors
/// - [`Error::NotImplemented`] for a plan whose dtypes or arithmetic the reference does not
///   compute;
/// - [`Error::Value`] when the invocation's plan names another operation or its operands do
///   not fit the operation (mode counts, contracted extents);
/// - [`Error::Overflow`] when an Int32 result leaves the Int32 range;
/// - carrier errors (a released operand, an allocation failure) as they occur.
pub(crate) fn execute(builtin: Builtin, invocation: &ResolvedInvocation) -> Result<Tensor> {
    let name = builtin.name();
    if invocation.plan().builtin() != Some(builtin) {
        let planned = invocation.plan().operation();
        return Err(Error::Value(format!(
            "the reference kernel of '{name}' cannot execute a plan of '{planned}'"
        )));
    }
    super::check_bounded_work(name, invocation)?;
    match builtin.spec().kernel {
        KernelKind::Map(function) => elementwise::map(name, function, invocation),
        KernelKind::Test(function) => elementwise::test(name, function, invocation),
        KernelKind::Fold(fold) => reduce::execute(name, fold, invocation),
        KernelKind::Contract => matmul::execute(name, invocation),
        KernelKind::Select => elementwise::select(name, invocation),
    }
}

/// One element converted to the dtype an operand plan computes in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Element {
    /// A binary32 value.
    Float32(f32),
    /// A 32-bit integer.
    Int32(i32),
    /// A boolean.
    Bool(bool),
}

impl Element {
    /// Converts `value` to `dtype` as operand conversion does: Int32 → Float32 is an exact
    /// `as f32` rounding, a (weak) Bool becomes 1.0 or 0.0 in Float32, Int32 is range-checked
    /// (Overflow), and Bool only comes from Bool. Anything else is a Type error, and a dtype
    /// other than Float32, Int32 and Bool is NotImplemented.
    pub(super) fn convert(name: &str, value: Value, dtype: DType) -> Result<Element> {
        let converted = if dtype == DType::FLOAT32 {
            match value {
                Value::Float(x) => Some(Element::Float32(x as f32)),
                Value::Int(i) => Some(Element::Float32(i as f32)),
                Value::Bool(b) => Some(Element::Float32(if b { 1.0 } else { 0.0 })),
            }
        } else if dtype == DType::INT32 {
            match value {
                Value::Int(i) => match i32::try_from(i) {
                    Ok(i) => Some(Element::Int32(i)),
                    Err(_) => {
                        return Err(Error::Overflow(format!(
                            "'{name}': operand value {i} is outside the Int32 range"
                        )))
                    }
                },
                Value::Float(_) | Value::Bool(_) => None,
            }
        } else if dtype == DType::BOOL {
            match value {
                Value::Bool(b) => Some(Element::Bool(b)),
                Value::Float(_) | Value::Int(_) => None,
            }
        } else {
            return Err(Error::NotImplemented(format!(
                "'{name}': the Generic reference does not compute in {dtype}"
            )));
        };
        converted.ok_or_else(|| {
            Error::Type(format!(
                "'{name}': cannot convert the {} operand value {value} to {dtype}",
                value.type_name()
            ))
        })
    }

    /// The element as the value a result slot stores.
    pub(super) fn to_value(self) -> Value {
        match self {
            Element::Float32(x) => Value::Float(f64::from(x)),
            Element::Int32(i) => Value::Int(i64::from(i)),
            Element::Bool(b) => Value::Bool(b),
        }
    }

    /// The name of the element's dtype, for messages.
    pub(super) fn dtype_name(self) -> &'static str {
        match self {
            Element::Float32(_) => DType::FLOAT32.name(),
            Element::Int32(_) => DType::INT32.name(),
            Element::Bool(_) => DType::BOOL.name(),
        }
    }
}

/// Writes the element as its value reads (`1.0`, `-3`, `true`).
impl fmt::Display for Element {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.to_value())
    }
}

/// The Overflow error of an Int32 result outside the range: `'add' overflows Int32: 2147483647
/// + 1`.
pub(super) fn overflow(name: &str, detail: impl fmt::Display) -> Error {
    Error::Overflow(format!("'{name}' overflows Int32: {detail}"))
}

/// The NotImplemented error of a plan whose converted operands (or arithmetic) the operation
/// does not compute on.
pub(super) fn unsupported(
    name: &str,
    operands: &[Element],
    invocation: &ResolvedInvocation,
) -> Error {
    let dtypes: Vec<&str> = operands.iter().map(|e| e.dtype_name()).collect();
    Error::NotImplemented(format!(
        "the Generic reference of '{name}' does not compute on ({}) under the plan {}",
        dtypes.join(", "),
        invocation.plan()
    ))
}

/// Whether `compute` is the arithmetic of elements of `dtype`: Binary32 computes on Float32,
/// the exact integer arithmetics on Int32 (and on Bool, which comparisons read as is).
pub(super) fn compute_matches(compute: Arithmetic, dtype: DType) -> bool {
    match compute {
        Arithmetic::Binary32 => dtype == DType::FLOAT32,
        Arithmetic::Int32ExactChecked | Arithmetic::Int32Exact => {
            dtype == DType::INT32 || dtype == DType::BOOL
        }
    }
}

/// `a + b` for layout indices, an Index error instead of wrapping.
pub(super) fn add_index(name: &str, a: usize, b: usize) -> Result<usize> {
    a.checked_add(b)
        .ok_or_else(|| Error::Index(format!("'{name}': layout index {a} + {b} overflows")))
}

/// A running sum in the accumulator a plan names: binary32 or binary64 for Float32 elements
/// (rounded to Float32 at the end), exact integers for Int32 elements (the final narrowing
/// to Int32 is checked).
#[derive(Debug, Clone, Copy)]
pub(super) enum Sum {
    /// Accumulates in binary32, rounding at every step.
    Binary32(f32),
    /// Accumulates binary32 terms in binary64.
    Binary64(f64),
    /// Accumulates integers exactly.
    Exact(i128),
}

impl Sum {
    /// The empty sum for elements of `element` (the operand plans' `convert_to`) under the
    /// invocation's plan: Float32 elements accumulate in the accumulator dtype (Float32 when
    /// the plan names none, and always for the sequential binary32 accumulation), Int32
    /// elements exactly. The sum starts at the additive identity (−0.0 for floats).
    pub(super) fn for_plan(
        name: &str,
        invocation: &ResolvedInvocation,
        element: DType,
    ) -> Result<Sum> {
        let plan = invocation.plan();
        let sum = if element == DType::FLOAT32 {
            match (plan.accumulation(), plan.accumulator_dtype()) {
                (Some(Accumulation::SequentialBinary32), _) => Some(Sum::Binary32(-0.0)),
                (Some(Accumulation::Floating) | None, None) => Some(Sum::Binary32(-0.0)),
                (Some(Accumulation::Floating) | None, Some(acc)) if acc == DType::FLOAT32 => {
                    Some(Sum::Binary32(-0.0))
                }
                (Some(Accumulation::Floating) | None, Some(acc)) if acc == DType::FLOAT64 => {
                    Some(Sum::Binary64(-0.0))
                }
                _ => None,
            }
        } else if element == DType::INT32 {
            match plan.accumulation() {
                Some(Accumulation::ExactInteger) | None => Some(Sum::Exact(0)),
                _ => None,
            }
        } else {
            None
        };
        sum.ok_or_else(|| {
            Error::NotImplemented(format!(
                "the Generic reference of '{name}' does not sum {element} elements under the plan {plan}"
            ))
        })
    }

    /// Adds a binary32 term (a Type error on an exact sum).
    pub(super) fn add_float(&mut self, name: &str, term: f32) -> Result<()> {
        match self {
            Sum::Binary32(acc) => *acc += term,
            Sum::Binary64(acc) => *acc += f64::from(term),
            Sum::Exact(_) => {
                return Err(Error::Type(format!(
                    "'{name}': a Float32 term {term:?} cannot join an exact integer sum"
                )))
            }
        }
        Ok(())
    }

    /// Adds an integer term (a Type error on a floating sum).
    pub(super) fn add_integer(&mut self, name: &str, term: i64) -> Result<()> {
        match self {
            Sum::Exact(acc) => {
                *acc = acc.checked_add(i128::from(term)).ok_or_else(|| {
                    overflow(name, format!("the exact sum {acc} + {term} leaves i128"))
                })?;
            }
            Sum::Binary32(_) | Sum::Binary64(_) => {
                return Err(Error::Type(format!(
                    "'{name}': an Int32 term {term} cannot join a floating sum"
                )))
            }
        }
        Ok(())
    }

    /// Adds one converted element (Float32 or Int32).
    pub(super) fn add(&mut self, name: &str, element: Element) -> Result<()> {
        match element {
            Element::Float32(x) => self.add_float(name, x),
            Element::Int32(i) => self.add_integer(name, i64::from(i)),
            Element::Bool(b) => Err(Error::Type(format!(
                "'{name}': cannot sum the Bool value {b}"
            ))),
        }
    }

    /// The total as a result element: floats rounded to Float32, integers narrowed to Int32
    /// (an Overflow error naming `what` and the total when it does not fit).
    pub(super) fn finish(self, name: &str, what: impl FnOnce() -> String) -> Result<Element> {
        match self {
            Sum::Binary32(acc) => Ok(Element::Float32(acc)),
            Sum::Binary64(acc) => Ok(Element::Float32(acc as f32)),
            Sum::Exact(acc) => i32::try_from(acc)
                .map(Element::Int32)
                .map_err(|_| overflow(name, format!("{} is {acc}", what()))),
        }
    }
}

/// An empty vector with room for `len` elements, or a Memory error.
pub(super) fn buffer<T>(name: &str, len: usize) -> Result<Vec<T>> {
    crate::limits::reserve(len, || format!("the result elements of '{name}'"))
}

/// A tensor operand as a kernel reads it: slots through a layout, converted to its plan's
/// dtype.
pub(super) struct Reader<'a> {
    name: &'a str,
    tensor: &'a Tensor,
    convert_to: DType,
}

impl<'a> Reader<'a> {
    /// Reads `tensor` converting to `convert_to`.
    pub(super) fn new(name: &'a str, tensor: &'a Tensor, convert_to: DType) -> Reader<'a> {
        Reader {
            name,
            tensor,
            convert_to,
        }
    }

    /// The tensor read.
    pub(super) fn tensor(&self) -> &Tensor {
        self.tensor
    }

    /// The converted element at `index`, a layout index relative to the tensor's offset.
    pub(super) fn at_index(&self, index: usize) -> Result<Element> {
        let slot = self.tensor.offset().checked_add(index).ok_or_else(|| {
            Error::Index(format!(
                "'{}': slot {} + {index} is out of range",
                self.name,
                self.tensor.offset()
            ))
        })?;
        let value = self.tensor.carrier().get(slot)?;
        Element::convert(self.name, value, self.convert_to)
    }

    /// The converted element at the colexicographic `ordinal` of `layout` (the tensor's own
    /// layout or a broadcast of it).
    pub(super) fn at_ordinal(&self, layout: &Layout, ordinal: usize) -> Result<Element> {
        self.at_index(layout.index_of(ordinal)?)
    }
}

/// What every kernel needs from an invocation: the operation name, the single result
/// specification and the tensor whose carrier class makes the result.
pub(super) struct Context<'a> {
    name: &'a str,
    invocation: &'a ResolvedInvocation,
    spec: &'a ResultSpec,
    first: &'a Tensor,
}

impl<'a> Context<'a> {
    /// The context of `invocation` (Value errors for an invocation without a result or a
    /// tensor operand).
    pub(super) fn new(name: &'a str, invocation: &'a ResolvedInvocation) -> Result<Context<'a>> {
        let spec = invocation.results().first().ok_or_else(|| {
            Error::Value(format!("the invocation of '{name}' declares no result"))
        })?;
        let first = invocation
            .call()
            .operands()
            .iter()
            .find_map(Operand::as_tensor)
            .ok_or_else(|| Error::Value(format!("'{name}' has no tensor operand")))?;
        Ok(Context {
            name,
            invocation,
            spec,
            first,
        })
    }

    /// The operation name.
    pub(super) fn name(&self) -> &'a str {
        self.name
    }

    /// The invocation.
    pub(super) fn invocation(&self) -> &'a ResolvedInvocation {
        self.invocation
    }

    /// The result specification.
    pub(super) fn spec(&self) -> &'a ResultSpec {
        self.spec
    }

    /// The number of operands of the call.
    pub(super) fn operand_count(&self) -> usize {
        self.invocation.call().operands().len()
    }

    /// Operand `i` with its operand plan (a Value error when either is missing).
    pub(super) fn operand(&self, i: usize) -> Result<(&'a Operand, &'a OperandPlan)> {
        let operand = self.invocation.call().operands().get(i);
        let plan = self.invocation.plan().operands().get(i);
        match (operand, plan) {
            (Some(operand), Some(plan)) => Ok((operand, plan)),
            _ => Err(Error::Value(format!(
                "'{}' has no operand {i} with an operand plan",
                self.name
            ))),
        }
    }

    /// Operand `i` as a tensor reader (a Value error when it is a scalar).
    pub(super) fn reader(&self, i: usize) -> Result<Reader<'a>> {
        let (operand, plan) = self.operand(i)?;
        let tensor = operand.as_tensor().ok_or_else(|| {
            Error::Value(format!("operand {i} of '{}' must be a tensor", self.name))
        })?;
        Ok(Reader::new(self.name, tensor, plan.convert_to()))
    }

    /// Publishes `values`, given in result-ordinal order, as the single result: a fresh
    /// mutable carrier of the first tensor's class with exactly `cosize` slots of the
    /// result layout, each value at the slot its ordinal maps to.
    pub(super) fn publish(&self, values: Vec<Value>) -> Result<Tensor> {
        let layout = self.spec.layout();
        let dtype = self.spec.dtype();
        if values.len() != layout.size() {
            return Err(Error::Value(format!(
                "'{}' computed {} values for a result of {} elements",
                self.name,
                values.len(),
                layout.size()
            )));
        }
        let slots = if is_canonical(layout) {
            values
        } else {
            let zero = dtype.zero().ok_or_else(|| {
                Error::NotImplemented(format!(
                    "'{}': the Generic reference makes no {dtype} results",
                    self.name
                ))
            })?;
            let cosize = layout.cosize();
            let mut slots = buffer(self.name, cosize)?;
            slots.resize(cosize, zero);
            for (ordinal, value) in values.into_iter().enumerate() {
                let index = layout.index_of(ordinal)?;
                let slot = slots.get_mut(index).ok_or_else(|| {
                    Error::Index(format!(
                        "'{}': result slot {index} is beyond the cosize {cosize}",
                        self.name
                    ))
                })?;
                *slot = value;
            }
            slots
        };
        let carrier = self.first.carrier().new_like(&slots, true, Some(dtype))?;
        Tensor::with_shared_layout(carrier, 0, self.spec.shared_layout().clone())
    }
}

/// Whether `layout` maps ordinal `i` to index `i` (the canonical column-major layout).
fn is_canonical(layout: &Layout) -> bool {
    let mut expected = 1usize;
    for (extent, stride) in layout.leaf_pairs() {
        if extent != 1 && stride != expected {
            return false;
        }
        expected = expected.saturating_mul(extent);
    }
    true
}
