//! The built-in operations: their typed identity ([`Builtin`]), the spec each is derived
//! from ([`BuiltinSpec`]), their schemas, and how each resolves a call into a dtype plan and
//! canonical result layouts (docs/operations.md, The central operations). The files beside this one
//! hold the specs and gradient rules by family.

mod arithmetic;
mod comparison;
pub(crate) mod extrema;
mod extremum;
mod identity;
pub(crate) mod kernel;
mod matmul;
mod recent_resolutions;
mod reduction;
mod select;
mod spec;
mod unary;
mod vjp;

pub use identity::{Builtin, BUILTIN_OPERATIONS};
pub(crate) use spec::VjpRule;
pub use spec::{Accuracy, Domain, ShapeRule};
pub(crate) use vjp::BuiltinVjp;

use std::borrow::Cow;
use std::sync::OnceLock;

use strideweave_layout::{Layout, Shape};

use crate::dtype::{DType, Value};
use crate::error::{Error, Result};
use crate::operation::builtin::spec::Arity;
use crate::operation::definition::OperationDefinition;
use crate::operation::invocation::{BoundOperationCall, ResolvedInvocation, ResultSpec};
use crate::operation::plan::OperationPlan;
use crate::operation::planning::{plan_builtin, PlanOperand};
use crate::operation::schema::{
    OperandKind, OperandSpec, OperationSchema, OptionSpec, OptionValue,
};
use crate::operation::Operand;
use crate::tensor::shared_layout::SharedLayout;
use crate::tensor::Tensor;

/// The definitions of every built-in operation.
pub(crate) fn definitions() -> Vec<OperationDefinition> {
    Builtin::ALL
        .into_iter()
        .filter_map(|b| definition(b).ok())
        .collect()
}

/// The definition of one built-in: its schema and a resolver with a plan cache of its own.
fn definition(builtin: Builtin) -> Result<OperationDefinition> {
    let spec = OperandSpec::new;
    let operands = match builtin.spec().arity {
        Arity::Unary => vec![spec("x", OperandKind::Tensor, true)?],
        Arity::Tensors => vec![
            spec("lhs", OperandKind::Tensor, true)?,
            spec("rhs", OperandKind::Tensor, true)?,
        ],
        Arity::TensorAndStructural => vec![
            spec("lhs", OperandKind::Tensor, true)?,
            spec("rhs", OperandKind::Structural, false)?,
        ],
        Arity::Structural => vec![
            spec("lhs", OperandKind::Structural, false)?,
            spec("rhs", OperandKind::Structural, false)?,
        ],
        Arity::Compare => vec![
            spec("lhs", OperandKind::Tensor, false)?,
            spec("rhs", OperandKind::Structural, false)?,
        ],
        Arity::Select => vec![
            spec("cond", OperandKind::Tensor, false)?,
            spec("a", OperandKind::Structural, false)?,
            spec("b", OperandKind::Structural, false)?,
        ],
    };
    let options = if builtin.spec().family.takes_accumulator() {
        vec![OptionSpec::new(
            "accumulator_dtype",
            Some(OptionValue::None),
        )?]
    } else {
        Vec::new()
    };
    let schema = OperationSchema::new(operands, options)?;
    Ok(OperationDefinition::of_builtin(builtin, schema))
}

/// An operand as far as planning can tell it apart: a tensor's dtype, or a weak scalar's
/// kind (an integer scalar also by whether it fits Int32, the one value test planning makes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyOperand {
    /// A tensor of this dtype.
    Tensor(DType),
    /// A weak integer scalar, and whether it fits Int32.
    Int {
        /// Whether the value lies in the Int32 range.
        fits_int32: bool,
    },
    /// A weak float scalar.
    Float,
    /// A weak bool scalar.
    Bool,
}

impl KeyOperand {
    /// The key of one operand of a call.
    fn of(operand: &Operand) -> KeyOperand {
        match operand {
            Operand::Tensor(t) => KeyOperand::Tensor(t.dtype()),
            Operand::Scalar(Value::Int(i)) => KeyOperand::Int {
                fits_int32: i32::try_from(*i).is_ok(),
            },
            Operand::Scalar(Value::Float(_)) => KeyOperand::Float,
            Operand::Scalar(Value::Bool(_)) => KeyOperand::Bool,
        }
    }
}

/// The most operands a [`PlanKey`] holds (no built-in takes more).
const KEY_OPERANDS: usize = 3;

/// Everything a built-in's plan depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PlanKey {
    /// The operands' keys, in order (`None` past the last operand).
    operands: [Option<KeyOperand>; KEY_OPERANDS],
    /// The requested accumulator dtype.
    accumulator: Option<DType>,
}

impl PlanKey {
    /// The key of a call's operands and accumulator request (`None` when there are more
    /// operands than a key holds: such calls are planned, and fail, without the cache).
    fn of(operands: &[Operand], accumulator: Option<DType>) -> Option<PlanKey> {
        let mut key = PlanKey {
            operands: [None; 3],
            accumulator,
        };
        if operands.len() > key.operands.len() {
            return None;
        }
        for (slot, operand) in key.operands.iter_mut().zip(operands) {
            *slot = Some(KeyOperand::of(operand));
        }
        Some(key)
    }
}

/// How many distinct plans one built-in remembers (the shipped dtypes give far fewer).
const PLAN_CACHE_CAPACITY: usize = 64;

/// The plans one built-in resolved successfully, by [`PlanKey`]: planning is
/// value-independent, so a key seen before yields the same plan again. Failures are not kept
/// (their messages quote the operands' values).
///
/// The slots fill in order and are never emptied, so the filled ones are always a prefix: a
/// look-up reads them without a lock and stops at the first empty one.
pub(crate) struct PlanCache {
    plans: [OnceLock<(PlanKey, OperationPlan)>; PLAN_CACHE_CAPACITY],
}

impl Default for PlanCache {
    fn default() -> Self {
        PlanCache {
            plans: std::array::from_fn(|_| OnceLock::new()),
        }
    }
}

impl PlanCache {
    /// The plan remembered for `key`.
    fn get(&self, key: &PlanKey) -> Option<OperationPlan> {
        self.plans
            .iter()
            .map_while(OnceLock::get)
            .find(|(k, _)| k == key)
            .map(|(_, plan)| plan.clone())
    }

    /// Remembers `plan` for `key` (while there is room and `key` is new) and returns the plan
    /// kept for `key`: the first empty slot takes it, in static memory (the cache lives as
    /// long as the process, and holds at most [`PLAN_CACHE_CAPACITY`] plans), so the clones
    /// every later call takes cost no reference count; a slot another thread filled first
    /// is checked and passed. With no room left, `plan` itself.
    fn insert(&self, key: PlanKey, plan: OperationPlan) -> OperationPlan {
        for slot in &self.plans {
            let (held, kept) = slot.get_or_init(|| (key, plan.clone().into_static()));
            if *held == key {
                return kept.clone();
            }
        }
        plan
    }
}

/// Resolves a call of `builtin`: its plan (from `plans` when seen before), the result shape
/// by the built-in's shape rule, and the operands saved for its gradient.
pub(crate) fn resolve(
    builtin: Builtin,
    plans: &PlanCache,
    call: BoundOperationCall,
) -> Result<ResolvedInvocation> {
    let name = builtin.name();
    let spec = builtin.spec();
    // Only a family that takes the option has it in its schema.
    let requested = if spec.family.takes_accumulator() {
        call.option("accumulator_dtype")
    } else {
        None
    };
    let accumulator = match requested {
        Some(OptionValue::DType(dtype)) => Some(dtype),
        Some(OptionValue::None) | None => None,
        Some(other) => {
            return Err(Error::Type(format!(
                "the accumulator_dtype of '{name}' must be a dtype, got {other:?}"
            )))
        }
    };
    let key = PlanKey::of(call.operands(), accumulator);
    let mut layouts: recent_resolutions::OperandLayouts<'_> = [None; KEY_OPERANDS];
    for (slot, operand) in layouts.iter_mut().zip(call.operands()) {
        *slot = operand.as_tensor().map(Tensor::shared_layout);
    }
    let remembered = key.and_then(|key| recent_resolutions::find(builtin, &key, &layouts));
    let (plan, result) = match remembered {
        Some(resolution) => resolution,
        None => {
            let (plan, result) = resolve_anew(builtin, plans, &call, key, accumulator)?;
            if let Some(key) = key {
                recent_resolutions::remember(builtin, key, &layouts, &plan, &result);
            }
            (plan, result)
        }
    };
    let is_tensor = layouts.map(|layout| layout.is_some());
    let saved = spec
        .saved
        .iter()
        .copied()
        .filter(move |&i| is_tensor.get(i).copied().unwrap_or(false));
    Ok(ResolvedInvocation::of_builtin(call, plan, result, saved))
}

/// The plan (from `plans` when seen before) and the result specification of a call of
/// `builtin` that this thread has not resolved recently.
fn resolve_anew(
    builtin: Builtin,
    plans: &PlanCache,
    call: &BoundOperationCall,
    key: Option<PlanKey>,
    accumulator: Option<DType>,
) -> Result<(OperationPlan, ResultSpec)> {
    let name = builtin.name();
    let spec = builtin.spec();
    let plan = match key.and_then(|key| plans.get(&key)) {
        Some(plan) => plan,
        None => {
            let plan_operands: Vec<PlanOperand> = call
                .operands()
                .iter()
                .map(|o| match o {
                    Operand::Tensor(t) => PlanOperand::Tensor(t.dtype()),
                    Operand::Scalar(v) => PlanOperand::Scalar(*v),
                })
                .collect();
            let plan = plan_builtin(builtin, &plan_operands, accumulator)?;
            match key {
                Some(key) => plans.insert(key, plan),
                None => plan,
            }
        }
    };
    let mut shapes = call
        .operands()
        .iter()
        .filter_map(Operand::as_tensor)
        .map(Tensor::shape);
    let shape = match spec.rule {
        ShapeRule::Broadcast => broadcast_shapes(name, shapes)?,
        ShapeRule::ReduceMode1 => {
            let Some(shape) = shapes.next() else {
                return Err(Error::Type(format!("'{name}' needs a tensor operand")));
            };
            Cow::Owned(reduced_shape(name, shape)?)
        }
        ShapeRule::Contract => {
            let (Some(lhs), Some(rhs)) = (shapes.next(), shapes.next()) else {
                return Err(Error::Type(format!("'{name}' needs two tensor operands")));
            };
            Cow::Owned(contracted_shape(name, lhs, rhs)?)
        }
    };
    let result = ResultSpec::shared(plan.output(), result_layout(call, shape));
    Ok((plan, result))
}

/// The canonical layout of `shape`: the first tensor operand's when it already is that
/// layout (shared, not rebuilt), else the shared canonical layout of `shape`.
fn result_layout(call: &BoundOperationCall, shape: Cow<'_, Shape>) -> SharedLayout {
    match first_tensor(call).filter(|t| is_column_major_of(t.layout(), &shape)) {
        Some(t) => t.shared_layout().clone(),
        None => crate::tensor::canonical_layouts::canonical_layout(shape.into_owned()),
    }
}

/// The first tensor operand of `call`.
fn first_tensor(call: &BoundOperationCall) -> Option<&Tensor> {
    call.operands().iter().find_map(Operand::as_tensor)
}

/// Whether `layout` is exactly `Layout::column_major(shape)`.
fn is_column_major_of(layout: &Layout, shape: &Shape) -> bool {
    layout.is_column_major() && (std::ptr::eq(layout.shape(), shape) || layout.shape() == shape)
}

/// The broadcast of `shapes` (docs/operations.md, Broadcasting): identical nesting profiles, and
/// per leaf equal extents or one of them 1; no rank alignment.
fn broadcast_shapes<'a>(
    name: &str,
    shapes: impl IntoIterator<Item = &'a Shape>,
) -> Result<Cow<'a, Shape>> {
    let mut shapes = shapes.into_iter();
    let Some(first) = shapes.next() else {
        return Err(Error::Type(format!("'{name}' needs a tensor operand")));
    };
    // Borrowed while every shape so far equals the first: the usual case allocates nothing.
    let mut result: Cow<'a, Shape> = Cow::Borrowed(first);
    for shape in shapes {
        if std::ptr::eq(shape, &*result) || *shape == *result {
            // Identical shapes broadcast to themselves.
            continue;
        }
        if shape.profile() != result.profile() {
            return Err(Error::Value(format!(
                "'{name}' cannot broadcast Shape {result} with Shape {shape}: their nesting differs"
            )));
        }
        let mut extents = Vec::with_capacity(shape.leaves().len());
        for (&a, &b) in result.leaves().iter().zip(shape.leaves()) {
            extents.push(match (a, b) {
                _ if a == b => a,
                (1, b) => b,
                (a, 1) => a,
                _ => {
                    return Err(Error::Value(format!(
                        "'{name}' cannot broadcast Shape {result} with Shape {shape}: extents {a} and {b}"
                    )))
                }
            });
        }
        result = Cow::Owned(result.with_leaves(&extents)?);
    }
    Ok(result)
}

/// The result shape of a reduction over mode 1: mode 0 of a two-mode `shape`.
fn reduced_shape(name: &str, shape: &Shape) -> Result<Shape> {
    if shape.rank() != 2 {
        return Err(Error::Value(format!(
            "'{name}' reduces mode 1 of a two-mode tensor; Shape {shape} has {} modes",
            shape.rank()
        )));
    }
    Ok(shape.mode(0)?)
}

/// The result shape of `matmul`: (N,K)·(M,K) → (N,M).
fn contracted_shape(name: &str, lhs: &Shape, rhs: &Shape) -> Result<Shape> {
    for (side, shape) in [("lhs", lhs), ("rhs", rhs)] {
        if shape.rank() != 2 {
            return Err(Error::Value(format!(
                "'{name}' contracts two-mode tensors; {side} Shape {shape} has {} modes",
                shape.rank()
            )));
        }
    }
    let mismatch = |k_lhs: usize, k_rhs: usize| {
        Err(Error::Value(format!(
            "'{name}' contracts mode 1 of both operands: (N,K)·(M,K); Shape {lhs} has K = {k_lhs} but Shape {rhs} has K = {k_rhs}"
        )))
    };
    if let ([n, k_lhs], [m, k_rhs], true, true) = (
        lhs.leaves(),
        rhs.leaves(),
        lhs.profile().is_flat(),
        rhs.profile().is_flat(),
    ) {
        // Flat (N,K) and (M,K): the modes are the leaves.
        if k_lhs != k_rhs {
            return mismatch(*k_lhs, *k_rhs);
        }
        return Ok(Shape::flat(&[*n, *m])?);
    }
    let (k_lhs, k_rhs) = (lhs.mode(1)?.size(), rhs.mode(1)?.size());
    if k_lhs != k_rhs {
        return mismatch(k_lhs, k_rhs);
    }
    let n = Layout::column_major(lhs.mode(0)?);
    let m = Layout::column_major(rhs.mode(0)?);
    Ok(Layout::from_modes(&[n, m])?.shape().clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operation::plan::{Arithmetic, OperandPlan};

    fn plan(output: DType) -> Result<OperationPlan> {
        OperationPlan::new(
            "add",
            [OperandPlan::tensor(DType::FLOAT32, DType::FLOAT32)?],
            Arithmetic::Binary32,
            None,
            None,
            output,
        )
    }

    /// A distinct key for each `n < 7³`.
    fn key(n: usize) -> PlanKey {
        let kinds = [
            KeyOperand::Tensor(DType::FLOAT32),
            KeyOperand::Tensor(DType::INT32),
            KeyOperand::Tensor(DType::BOOL),
            KeyOperand::Int { fits_int32: true },
            KeyOperand::Int { fits_int32: false },
            KeyOperand::Float,
            KeyOperand::Bool,
        ];
        PlanKey {
            operands: [
                Some(kinds[n % 7]),
                Some(kinds[n / 7 % 7]),
                Some(kinds[n / 49 % 7]),
            ],
            accumulator: None,
        }
    }

    #[test]
    fn the_plan_cache_keeps_one_static_plan_per_key_while_it_has_room() -> Result<()> {
        let cache = PlanCache::default();
        let given = plan(DType::FLOAT32)?;
        assert!(!given.is_static());
        let kept = cache.insert(key(0), given.clone());
        assert!(kept.is_static());
        assert_eq!(kept, given);
        assert!(!kept.same_as(&given));
        assert!(cache.get(&key(0)).is_some_and(|p| p.same_as(&kept)));
        // The first plan for a key stays; a later one for it is not kept.
        let again = cache.insert(key(0), plan(DType::INT32)?);
        assert!(again.same_as(&kept));
        assert_eq!(again.output(), DType::FLOAT32);
        for n in 1..PLAN_CACHE_CAPACITY {
            assert!(cache.insert(key(n), plan(DType::FLOAT32)?).is_static());
        }
        // A full cache hands the plan back as it was given and keeps nothing.
        let overflow = plan(DType::FLOAT32)?;
        let returned = cache.insert(key(PLAN_CACHE_CAPACITY), overflow.clone());
        assert!(returned.same_as(&overflow) && !returned.is_static());
        assert!(cache.get(&key(PLAN_CACHE_CAPACITY)).is_none());
        assert!(cache.get(&key(PLAN_CACHE_CAPACITY - 1)).is_some());
        Ok(())
    }
}
