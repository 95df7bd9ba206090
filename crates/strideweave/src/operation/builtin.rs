//! The built-in operations: their schemas and how each resolves a call into a dtype plan
//! and canonical result layouts (semantics-operations.md §2b).

use strideweave_layout::{Layout, Shape};

use crate::error::{Error, Result};
use crate::operation::definition::{OperationDefinition, ResolveFn};
use crate::operation::invocation::{BoundOperationCall, ResolvedInvocation, ResultSpec};
use crate::operation::planning::{resolve_operation_plan, PlanOperand};
use crate::operation::schema::{
    OperandKind, OperandSpec, OperationSchema, OptionSpec, OptionValue,
};
use crate::operation::Operand;

/// How the result shape of a built-in follows from its operands.
#[derive(Clone, Copy)]
enum ShapeRule {
    /// Elementwise: the broadcast of the tensor operands' shapes.
    Broadcast,
    /// `reduce_*`: a two-mode input reduced over mode 1, giving mode 0's shape.
    ReduceMode1,
    /// `matmul`: (N,K)·(M,K) → (N,M).
    Contract,
}

/// The operand kinds of a built-in.
#[derive(Clone, Copy)]
enum Arity {
    /// One differentiable tensor `x`.
    Unary,
    /// Two differentiable tensors `lhs`, `rhs`.
    Tensors,
    /// A differentiable tensor `lhs` and a tensor-or-scalar `rhs`.
    TensorAndStructural,
    /// Two tensor-or-scalar operands (`mul`).
    Structural,
    /// Like [`Arity::Tensors`], without gradients (comparisons take `TensorAndStructural`).
    Compare,
}

struct Builtin {
    name: &'static str,
    arity: Arity,
    rule: ShapeRule,
    accumulator_option: bool,
    saved: &'static [usize],
}

const BUILTINS: [Builtin; 21] = [
    Builtin {
        name: "add",
        arity: Arity::Tensors,
        rule: ShapeRule::Broadcast,
        accumulator_option: false,
        saved: &[],
    },
    Builtin {
        name: "sub",
        arity: Arity::Tensors,
        rule: ShapeRule::Broadcast,
        accumulator_option: false,
        saved: &[],
    },
    Builtin {
        name: "mul",
        arity: Arity::Structural,
        rule: ShapeRule::Broadcast,
        accumulator_option: false,
        saved: &[],
    },
    Builtin {
        name: "elementwise_mul",
        arity: Arity::Tensors,
        rule: ShapeRule::Broadcast,
        accumulator_option: false,
        saved: &[0, 1],
    },
    Builtin {
        name: "div",
        arity: Arity::TensorAndStructural,
        rule: ShapeRule::Broadcast,
        accumulator_option: false,
        saved: &[0],
    },
    Builtin {
        name: "neg",
        arity: Arity::Unary,
        rule: ShapeRule::Broadcast,
        accumulator_option: false,
        saved: &[],
    },
    Builtin {
        name: "abs",
        arity: Arity::Unary,
        rule: ShapeRule::Broadcast,
        accumulator_option: false,
        saved: &[0],
    },
    Builtin {
        name: "exp",
        arity: Arity::Unary,
        rule: ShapeRule::Broadcast,
        accumulator_option: false,
        saved: &[0],
    },
    Builtin {
        name: "log",
        arity: Arity::Unary,
        rule: ShapeRule::Broadcast,
        accumulator_option: false,
        saved: &[0],
    },
    Builtin {
        name: "sqrt",
        arity: Arity::Unary,
        rule: ShapeRule::Broadcast,
        accumulator_option: false,
        saved: &[0],
    },
    Builtin {
        name: "tanh",
        arity: Arity::Unary,
        rule: ShapeRule::Broadcast,
        accumulator_option: false,
        saved: &[0],
    },
    Builtin {
        name: "sigmoid",
        arity: Arity::Unary,
        rule: ShapeRule::Broadcast,
        accumulator_option: false,
        saved: &[0],
    },
    Builtin {
        name: "relu",
        arity: Arity::Unary,
        rule: ShapeRule::Broadcast,
        accumulator_option: false,
        saved: &[0],
    },
    Builtin {
        name: "maximum",
        arity: Arity::TensorAndStructural,
        rule: ShapeRule::Broadcast,
        accumulator_option: false,
        saved: &[0],
    },
    Builtin {
        name: "minimum",
        arity: Arity::TensorAndStructural,
        rule: ShapeRule::Broadcast,
        accumulator_option: false,
        saved: &[0],
    },
    Builtin {
        name: "eq",
        arity: Arity::Compare,
        rule: ShapeRule::Broadcast,
        accumulator_option: false,
        saved: &[],
    },
    Builtin {
        name: "lt",
        arity: Arity::Compare,
        rule: ShapeRule::Broadcast,
        accumulator_option: false,
        saved: &[],
    },
    Builtin {
        name: "le",
        arity: Arity::Compare,
        rule: ShapeRule::Broadcast,
        accumulator_option: false,
        saved: &[],
    },
    Builtin {
        name: "reduce_sum",
        arity: Arity::Unary,
        rule: ShapeRule::ReduceMode1,
        accumulator_option: true,
        saved: &[],
    },
    Builtin {
        name: "reduce_max",
        arity: Arity::Unary,
        rule: ShapeRule::ReduceMode1,
        accumulator_option: false,
        saved: &[0],
    },
    Builtin {
        name: "matmul",
        arity: Arity::Tensors,
        rule: ShapeRule::Contract,
        accumulator_option: true,
        saved: &[0, 1],
    },
];

/// The definitions of every built-in operation.
pub(crate) fn definitions() -> Vec<OperationDefinition> {
    BUILTINS.iter().filter_map(|b| definition(b).ok()).collect()
}

fn definition(builtin: &'static Builtin) -> Result<OperationDefinition> {
    let spec = OperandSpec::new;
    let operands = match builtin.arity {
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
    };
    let options = if builtin.accumulator_option {
        vec![OptionSpec::new(
            "accumulator_dtype",
            Some(OptionValue::None),
        )?]
    } else {
        Vec::new()
    };
    let schema = OperationSchema::new(operands, options)?;
    let resolve: Box<ResolveFn> = Box::new(move |call| resolve(builtin, call));
    Ok(OperationDefinition::builtin(builtin.name, schema, resolve))
}

fn resolve(builtin: &Builtin, call: &BoundOperationCall) -> Result<ResolvedInvocation> {
    let name = builtin.name;
    for tensor in call.operands().iter().filter_map(Operand::as_tensor) {
        if tensor.carrier().is_released() {
            return Err(Error::Runtime(format!(
                "cannot compute '{name}': an operand's {} carrier is released",
                tensor.carrier().class()
            )));
        }
    }
    let accumulator = match call.option("accumulator_dtype") {
        Some(OptionValue::DType(dtype)) => Some(dtype),
        Some(OptionValue::None) | None => None,
        Some(other) => {
            return Err(Error::Type(format!(
                "the accumulator_dtype of '{name}' must be a dtype, got {other:?}"
            )))
        }
    };
    let plan_operands: Vec<PlanOperand> = call
        .operands()
        .iter()
        .map(|o| match o {
            Operand::Tensor(t) => PlanOperand::Tensor(t.dtype()),
            Operand::Scalar(v) => PlanOperand::Scalar(*v),
        })
        .collect();
    let plan = resolve_operation_plan(name, &plan_operands, accumulator)?;
    let shapes: Vec<&Shape> = call
        .operands()
        .iter()
        .filter_map(Operand::as_tensor)
        .map(|t| t.shape())
        .collect();
    let shape = match builtin.rule {
        ShapeRule::Broadcast => broadcast_shapes(name, &shapes)?,
        ShapeRule::ReduceMode1 => reduced_shape(name, shapes[0])?,
        ShapeRule::Contract => contracted_shape(name, shapes[0], shapes[1])?,
    };
    let saved = builtin.saved.iter().copied().filter(|&i| {
        call.operands()
            .get(i)
            .and_then(Operand::as_tensor)
            .is_some()
    });
    let result = ResultSpec::canonical(plan.output(), shape);
    ResolvedInvocation::new(call.clone(), plan, [result], saved, None)
}

/// The broadcast of `shapes` (semantics-operations.md §2b): identical nesting profiles, and
/// per leaf equal extents or one of them 1; no rank alignment.
pub(crate) fn broadcast_shapes(name: &str, shapes: &[&Shape]) -> Result<Shape> {
    let Some((first, rest)) = shapes.split_first() else {
        return Err(Error::Type(format!("'{name}' needs a tensor operand")));
    };
    let mut result: Shape = (*first).clone();
    for shape in rest {
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
        result = result.with_leaves(&extents)?;
    }
    Ok(result)
}

fn reduced_shape(name: &str, shape: &Shape) -> Result<Shape> {
    if shape.rank() != 2 {
        return Err(Error::Value(format!(
            "'{name}' reduces mode 1 of a two-mode tensor; Shape {shape} has {} modes",
            shape.rank()
        )));
    }
    Ok(shape.mode(0)?)
}

fn contracted_shape(name: &str, lhs: &Shape, rhs: &Shape) -> Result<Shape> {
    for (side, shape) in [("lhs", lhs), ("rhs", rhs)] {
        if shape.rank() != 2 {
            return Err(Error::Value(format!(
                "'{name}' contracts two-mode tensors; {side} Shape {shape} has {} modes",
                shape.rank()
            )));
        }
    }
    let (k_lhs, k_rhs) = (lhs.mode(1)?.size(), rhs.mode(1)?.size());
    if k_lhs != k_rhs {
        return Err(Error::Value(format!(
            "'{name}' contracts mode 1 of both operands: (N,K)·(M,K); Shape {lhs} has K = {k_lhs} but Shape {rhs} has K = {k_rhs}"
        )));
    }
    let n = Layout::column_major(lhs.mode(0)?);
    let m = Layout::column_major(rhs.mode(0)?);
    Ok(Layout::from_modes(&[n, m])?.shape().clone())
}
