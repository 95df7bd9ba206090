//! The backward rules of the built-in operations (docs/autograd-design.md, "Rules"). Each
//! computes with `ops` while recording is off (the engine turns it off).

use strideweave_layout::{Layout, Shape};

use crate::autograd::node::BackwardRule;
use crate::dtype::Value;
use crate::error::{Error, Result};
use crate::operation::{Operand, ResolvedInvocation, Vjp, VjpContext};
use crate::ops;
use crate::tensor::Tensor;

/// The rule of the operation `invocation` ran; `None` for an operation without gradients
/// (comparisons, or a custom operation declared non-differentiable).
pub(crate) fn rule_for(
    invocation: &ResolvedInvocation,
    outputs: &[Tensor],
) -> Result<Option<Box<dyn BackwardRule>>> {
    let definition = invocation.call().definition();
    if !definition.is_builtin() {
        return Ok(match definition.vjp() {
            Some(Vjp::Rule(_)) => Some(Box::new(CustomRule {
                invocation: invocation.clone(),
                // Detached, so the node does not own its outputs (no reference cycle).
                outputs: outputs.iter().map(Tensor::detach).collect(),
            })),
            _ => None,
        });
    }
    Ok(match definition.name() {
        "eq" | "lt" | "le" => None,
        _ => Some(Box::new(BuiltinRule {
            invocation: invocation.clone(),
        })),
    })
}

/// Sums a broadcast gradient `g` down to `shape` (same tree, extent-1 leaves where `g` is
/// wider): a two-mode view — the target tree, then the summed leaves — reduced over mode 1.
pub(crate) fn sum_to(g: &Tensor, shape: &Shape) -> Result<Tensor> {
    if g.shape() == shape {
        return Ok(g.clone());
    }
    let mut kept = Vec::new();
    let mut summed_extents = Vec::new();
    let mut summed_strides = Vec::new();
    for ((e, s), &target) in g.layout().leaf_pairs().zip(shape.leaves()) {
        if e == target {
            kept.push(s);
        } else {
            kept.push(0);
            summed_extents.push(e);
            summed_strides.push(s);
        }
    }
    let mode0 = Layout::with_leaf_strides(shape.clone(), &kept)?;
    let mode1 = Layout::from_flat(&summed_extents, &summed_strides)?;
    let view = Tensor::new(
        g.carrier().clone(),
        g.offset(),
        Layout::from_modes(&[mode0, mode1])?,
    )?;
    let summed = ops::reduce_sum(&view)?;
    // reduce_sum yields mode 0's shape, which is `shape`.
    Ok(summed)
}

/// `g` copied across mode 1 of `shape` (a stride-0 view over `g`'s slots).
fn spread_over_mode1(g: &Tensor, shape: &Shape) -> Result<Tensor> {
    let mode1 = shape.mode(1)?;
    let zeros = vec![0; mode1.leaves().len()];
    let layout = Layout::from_modes(&[
        g.layout().clone(),
        Layout::with_leaf_strides(mode1, &zeros)?,
    ])?;
    Tensor::new(g.carrier().clone(), g.offset(), layout)
}

/// The saved `inputs` made computable with the cotangent `g`: an input on another carrier
/// class than `g` is copied by its own carrier into a dense tensor (`x · 1`, an exact copy
/// dispatched on `x`'s carrier) when that lands on `g`'s class.
///
/// This is the case of a dependent carrier whose composite returns its results on another
/// class — raw TiledEvictable operands give dense results on their primary tier's class —
/// so the built-in rules, which combine the cotangent with the saved operands, would otherwise
/// mix two carrier classes (a Type error). Rules that use only the operands' shapes (`add`,
/// `sub`, `reduce_sum`) need no copy; an input whose carrier cannot make one is kept as it is.
fn on_cotangent_class(name: &str, inputs: &[Tensor], g: &Tensor) -> Result<Vec<Tensor>> {
    let class = g.carrier().class();
    let shapes_only =
        matches!(name, "add" | "sub" | "reduce_sum") || inputs.len() == 1 && name == "mul";
    inputs
        .iter()
        .map(|input| {
            if shapes_only || input.carrier().class() == class {
                return Ok(input.clone());
            }
            let one = if input.dtype() == crate::dtype::DType::INT32 {
                Value::Int(1)
            } else {
                Value::Float(1.0)
            };
            Ok(match ops::mul(input, one) {
                Ok(dense) if dense.carrier().class() == class => dense,
                _ => input.clone(),
            })
        })
        .collect()
}

/// The rules of the built-in operations, keyed by name.
struct BuiltinRule {
    invocation: ResolvedInvocation,
}

impl BuiltinRule {
    fn scalar(&self) -> Option<Value> {
        self.invocation
            .call()
            .operands()
            .iter()
            .find_map(Operand::as_scalar)
    }
}

impl BackwardRule for BuiltinRule {
    fn backward(
        &self,
        inputs: &[Tensor],
        grad_outputs: &[Option<Tensor>],
    ) -> Result<Vec<Option<Tensor>>> {
        let name = self.invocation.call().definition().name();
        let Some(Some(g)) = grad_outputs.first() else {
            return Ok(vec![None; inputs.len()]);
        };
        let lowered = on_cotangent_class(name, inputs, g)?;
        let inputs: &[Tensor] = &lowered;
        let x = inputs
            .first()
            .ok_or_else(|| Error::Value(format!("'{name}' saved no input")))?;
        let y = inputs.get(1);
        let pair = |a: Tensor, b: Tensor| -> Result<Vec<Option<Tensor>>> {
            let (lhs, rhs) = (
                x,
                y.ok_or_else(|| Error::Value(format!("'{name}' needs two inputs")))?,
            );
            Ok(vec![
                Some(sum_to(&a, lhs.shape())?),
                Some(sum_to(&b, rhs.shape())?),
            ])
        };
        let one = |grad: Tensor| -> Result<Vec<Option<Tensor>>> {
            Ok(vec![Some(sum_to(&grad, x.shape())?)])
        };
        match (name, y) {
            ("add", Some(_)) => pair(g.clone(), g.clone()),
            ("sub", Some(_)) => pair(g.clone(), ops::neg(g)?),
            ("mul" | "elementwise_mul", Some(rhs)) => pair(ops::mul(g, rhs)?, ops::mul(g, x)?),
            ("mul", None) => one(ops::mul(g, self.scalar().unwrap_or(Value::Float(1.0)))?),
            ("div", Some(rhs)) => {
                let quotient = ops::div(&ops::mul(g, x)?, &ops::elementwise_mul(rhs, rhs)?)?;
                pair(ops::div(g, rhs)?, ops::neg(&quotient)?)
            }
            ("div", None) => one(ops::div(g, self.scalar().unwrap_or(Value::Float(1.0)))?),
            ("neg", _) => one(ops::neg(g)?),
            ("abs", _) => {
                let signed = ops::select(&ops::lt(x, 0.0)?, ops::neg(g)?, g)?;
                one(ops::select(&ops::eq(x, 0.0)?, 0.0, &signed)?)
            }
            ("exp", _) => one(ops::mul(g, &ops::exp(x)?)?),
            ("log", _) => one(ops::div(g, x)?),
            ("sqrt", _) => one(ops::div(g, &ops::mul(&ops::sqrt(x)?, 2.0)?)?),
            ("tanh", _) => {
                // 1 − tanh² = 4 / (eˣ + e⁻ˣ)², which needs no tensor-scalar addition.
                let twice_cosh = ops::add(&ops::exp(x)?, &ops::exp(&ops::neg(x)?)?)?;
                one(ops::div(
                    &ops::mul(g, 4.0)?,
                    &ops::elementwise_mul(&twice_cosh, &twice_cosh)?,
                )?)
            }
            ("sigmoid", _) => {
                let s = ops::sigmoid(x)?;
                one(ops::mul(g, &ops::sub(&s, &ops::elementwise_mul(&s, &s)?)?)?)
            }
            ("relu", _) => one(ops::select(&ops::le(x, 0.0)?, 0.0, g)?),
            ("maximum" | "minimum", _) => {
                let other: Operand = match y {
                    Some(t) => Operand::Tensor(t.clone()),
                    None => Operand::Scalar(self.scalar().unwrap_or(Value::Float(0.0))),
                };
                // Ties go to the left operand: it loses only strictly.
                let left_loses = if name == "maximum" {
                    ops::lt(x, other)?
                } else {
                    // minimum: the left operand wins when it is at most the right one.
                    let wins = ops::le(x, other)?;
                    let to_left = ops::select(&wins, g, 0.0)?;
                    return match y {
                        Some(_) => pair(to_left, ops::select(&wins, 0.0, g)?),
                        None => one(to_left),
                    };
                };
                let to_left = ops::select(&left_loses, 0.0, g)?;
                match y {
                    Some(_) => pair(to_left, ops::select(&left_loses, g, 0.0)?),
                    None => one(to_left),
                }
            }
            ("select", _) => {
                let (a, b) = (ops::select(x, g, 0.0)?, ops::select(x, 0.0, g)?);
                let operands = self.invocation.call().operands();
                let mut grads = vec![None];
                let mut next = 1;
                for (operand, grad) in operands.iter().skip(1).zip([a, b]) {
                    if operand.as_tensor().is_some() {
                        let target = inputs
                            .get(next)
                            .ok_or_else(|| Error::Value("'select' saved too few inputs".into()))?;
                        grads.push(Some(sum_to(&grad, target.shape())?));
                        next += 1;
                    }
                }
                Ok(grads)
            }
            ("reduce_sum", _) => Ok(vec![Some(spread_over_mode1(g, x.shape())?)]),
            ("reduce_max", _) => {
                let maxima = spread_over_mode1(&ops::reduce_max(x)?, x.shape())?;
                let winners = ops::eq(x, &maxima)?;
                Ok(vec![Some(ops::select(
                    &winners,
                    &spread_over_mode1(g, x.shape())?,
                    0.0,
                )?)])
            }
            ("matmul", Some(rhs)) => {
                let accumulator = self.invocation.plan().accumulator_dtype();
                let product = |a: &Tensor, b: &Tensor| match accumulator {
                    Some(acc) => ops::matmul_with(a, b, acc),
                    None => ops::matmul(a, b),
                };
                let d_lhs = product(g, &rhs.permute(&[1, 0])?)?;
                let d_rhs = product(&g.permute(&[1, 0])?, &x.permute(&[1, 0])?)?;
                Ok(vec![Some(d_lhs), Some(d_rhs)])
            }
            _ => Err(Error::NotImplemented(format!(
                "no backward rule for '{name}'"
            ))),
        }
    }
}

/// A custom operation's declared rule, given its context.
struct CustomRule {
    invocation: ResolvedInvocation,
    outputs: Vec<Tensor>,
}

impl BackwardRule for CustomRule {
    fn backward(
        &self,
        inputs: &[Tensor],
        grad_outputs: &[Option<Tensor>],
    ) -> Result<Vec<Option<Tensor>>> {
        let definition = self.invocation.call().definition();
        let Some(Vjp::Rule(rule)) = definition.vjp() else {
            return Ok(vec![None; inputs.len()]);
        };
        let saved = self
            .invocation
            .saved_operands()
            .iter()
            .filter_map(|&i| {
                self.invocation
                    .call()
                    .operands()
                    .get(i)
                    .and_then(Operand::as_tensor)
                    .cloned()
            })
            .collect();
        let context = VjpContext::new(self.invocation.clone(), self.outputs.clone(), saved);
        let per_operand = rule(&context, grad_outputs)?;
        // The rule answers per differentiable operand; the node has one entry per tensor.
        let specs = definition.schema().operands();
        let mut grads = Vec::with_capacity(inputs.len());
        let mut answers = per_operand.into_iter();
        for (spec, operand) in specs.iter().zip(self.invocation.call().operands()) {
            if operand.as_tensor().is_some() {
                grads.push(if spec.is_differentiable() {
                    answers.next().flatten()
                } else {
                    None
                });
            }
        }
        Ok(grads)
    }
}
