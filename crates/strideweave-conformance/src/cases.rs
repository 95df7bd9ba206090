//! Calls of the built-in operations the suite can build for a plan: the operands' dtypes and
//! weak scalars that resolve to it, and layouts of edge sizes and random strides.

use strideweave::carriers::Generic;
use strideweave::operation::{
    call, resolve_operation_plan, Builtin, Domain, Operand, OperationPlan, OptionValue,
    PlanOperand, ShapeRule,
};
use strideweave::{DType, Layout, Result, Shape, Stride, Tensor, Value};

use crate::support::Rng;

/// Builds one operand tensor: `(dtype, slot values, offset, layout)`.
pub(crate) type MakeTensor<'a> = dyn Fn(DType, &[Value], usize, Layout) -> Result<Tensor> + 'a;

/// One operand of a call: a tensor of a dtype, or a weak scalar.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Arg {
    Tensor(DType),
    Scalar(Value),
}

/// The operands and accumulator request of a call resolving to one plan.
#[derive(Debug, Clone)]
pub(crate) struct Template {
    pub(crate) builtin: Builtin,
    pub(crate) args: Vec<Arg>,
    pub(crate) accumulator: Option<DType>,
}

/// Weak scalars the suite tries for a weak-scalar operand, in order.
const SCALARS: [Value; 4] = [
    Value::Int(2),
    Value::Float(0.5),
    Value::Bool(true),
    Value::Float(-1.5),
];

fn plan_operands(args: &[Arg]) -> Vec<PlanOperand> {
    args.iter()
        .map(|a| match a {
            Arg::Tensor(d) => PlanOperand::Tensor(*d),
            Arg::Scalar(v) => PlanOperand::Scalar(*v),
        })
        .collect()
}

impl Template {
    /// A call of a built-in that resolves exactly to `plan`, if the suite can build one.
    pub(crate) fn for_plan(plan: &OperationPlan) -> Option<Template> {
        let builtin = Builtin::from_name(plan.operation())?;
        let scalar_positions: Vec<usize> = plan
            .operands()
            .iter()
            .enumerate()
            .filter(|(_, o)| o.dtype().is_none())
            .map(|(i, _)| i)
            .collect();
        let combos = SCALARS.len().pow(scalar_positions.len() as u32);
        let mut accumulators = vec![None];
        if let Some(acc) = plan.accumulator_dtype() {
            accumulators.push(Some(acc));
        }
        for accumulator in accumulators {
            for combo in 0..combos {
                let mut pick = combo;
                let args: Vec<Arg> = plan
                    .operands()
                    .iter()
                    .map(|o| match o.dtype() {
                        Some(d) => Arg::Tensor(d),
                        None => {
                            let v = SCALARS[pick % SCALARS.len()];
                            pick /= SCALARS.len();
                            Arg::Scalar(v)
                        }
                    })
                    .collect();
                if let Ok(resolved) =
                    resolve_operation_plan(plan.operation(), &plan_operands(&args), accumulator)
                {
                    if &resolved == plan {
                        return Some(Template {
                            builtin,
                            args,
                            accumulator,
                        });
                    }
                }
            }
        }
        None
    }

    /// The plan this template resolves to, when planning accepts it.
    pub(crate) fn plan(&self) -> Result<OperationPlan> {
        resolve_operation_plan(
            self.builtin.name(),
            &plan_operands(&self.args),
            self.accumulator,
        )
    }

    /// The call's options.
    pub(crate) fn options(&self) -> Vec<(&'static str, OptionValue)> {
        match self.accumulator {
            Some(acc) => vec![("accumulator_dtype", OptionValue::DType(acc))],
            None => Vec::new(),
        }
    }

    /// The tensor operands' positions.
    pub(crate) fn tensor_positions(&self) -> Vec<usize> {
        (0..self.args.len())
            .filter(|&i| matches!(self.args[i], Arg::Tensor(_)))
            .collect()
    }

    /// The geometries the suite runs this call on: one placement per operand (scalars
    /// ignore theirs), from one element up, dense and strided.
    pub(crate) fn geometries(&self) -> Vec<Vec<Placement>> {
        let n = self.args.len();
        let same = |p: Placement| vec![p; n];
        match self.builtin.shape_rule() {
            ShapeRule::ReduceMode1 => vec![
                same(Placement::dense(&[1, 1])),
                same(Placement::dense(&[4, 3])),
                same(Placement::strided(&[1, 5], &[1, 0], 2, 1)),
                same(Placement::strided(&[5, 2], &[1, 0], 1, 3)),
            ],
            ShapeRule::Contract => [(1, 1, 1), (3, 2, 4), (2, 5, 3)]
                .into_iter()
                .enumerate()
                .map(|(i, (rows, cols, k))| {
                    if i == 0 {
                        vec![Placement::dense(&[rows, k]), Placement::dense(&[cols, k])]
                    } else {
                        vec![
                            Placement::strided(&[rows, k], &[1, 0], 1, i),
                            Placement::strided(&[cols, k], &[0, 1], 2, 1),
                        ]
                    }
                })
                .collect(),
            _ => vec![
                same(Placement::dense(&[1])),
                same(Placement::dense(&[7])),
                (0..n)
                    .map(|i| Placement::strided(&[7], &[0], 2, 1 + i))
                    .collect(),
                same(Placement::dense(&[3, 4])),
                (0..n)
                    .map(|i| Placement::strided(&[3, 4], &[1, 0], 1 + i % 2, 2))
                    .collect(),
                (0..n)
                    .map(|i| Placement::strided(&[2, 3, 2], &[2, 0, 1], 2, i))
                    .collect(),
                // Broadcast operands (stride 0): the first along mode 1, the others dense;
                // the last along mode 0 at an offset, the others gapped; every operand a
                // single slot read five times.
                (0..n)
                    .map(|i| {
                        let placement = Placement::dense(&[3, 4]);
                        if i == 0 {
                            placement.broadcasting(&[1])
                        } else {
                            placement
                        }
                    })
                    .collect(),
                (0..n)
                    .map(|i| {
                        if i + 1 == n {
                            Placement::strided(&[4, 3], &[0, 1], 1, 2).broadcasting(&[0])
                        } else {
                            Placement::strided(&[4, 3], &[0, 1], 2, 1)
                        }
                    })
                    .collect(),
                (0..n)
                    .map(|i| Placement::strided(&[5], &[0], 1, 1 + i).broadcasting(&[0]))
                    .collect(),
            ],
        }
    }

    /// The slot values of the operand at `position` under `placement`, inside the operation's
    /// domain (positive for `log` and `sqrt`, a non-zero divisor for `div`).
    pub(crate) fn slot_values(
        &self,
        position: usize,
        placement: &Placement,
        rng: &mut Rng,
    ) -> Result<Vec<Value>> {
        let builtin = self.builtin;
        slot_values(self.args[position], placement, rng, |v| {
            domain(builtin, position, v)
        })
    }

    /// The call's operands: the tensors `make(dtype, slots, offset, layout)` builds, the
    /// scalars as they are.
    pub(crate) fn operands(
        &self,
        geometry: &[Placement],
        slots: &[Vec<Value>],
        make: &MakeTensor<'_>,
    ) -> Result<Vec<Operand>> {
        operands(&self.args, geometry, slots, make)
    }

    /// The call on Generic carriers: the reference result.
    pub(crate) fn reference(
        &self,
        geometry: &[Placement],
        slots: &[Vec<Value>],
    ) -> Result<Vec<Tensor>> {
        let operands = self.operands(geometry, slots, &generic_tensor)?;
        call(self.builtin.name(), operands, &self.options())
    }

    /// `op(Float32 (3,4):(4,1)@2, 0.5)`: the call as failure messages print it.
    pub(crate) fn describe(&self, geometry: &[Placement]) -> String {
        let args = describe(&self.args, geometry);
        let acc = self
            .accumulator
            .map_or_else(String::new, |d| format!(", accumulator_dtype = {d}"));
        format!("{}({}{acc})", self.builtin.name(), args.join(", "))
    }
}

/// The operands of a call of `args` under `geometry` over the slot values `slots`: the
/// tensors `make(dtype, slots, offset, layout)` builds, the scalars as they are. Built-in
/// templates and declared custom cases both build their calls with it.
pub(crate) fn operands(
    args: &[Arg],
    geometry: &[Placement],
    slots: &[Vec<Value>],
    make: &MakeTensor<'_>,
) -> Result<Vec<Operand>> {
    args.iter()
        .enumerate()
        .map(|(i, arg)| match arg {
            Arg::Scalar(v) => Ok(Operand::Scalar(*v)),
            Arg::Tensor(d) => {
                Ok(make(*d, &slots[i], geometry[i].offset, geometry[i].layout()?)?.into())
            }
        })
        .collect()
}

/// An operand tensor on a Generic carrier: how references are built.
pub(crate) fn generic_tensor(
    dtype: DType,
    values: &[Value],
    offset: usize,
    layout: Layout,
) -> Result<Tensor> {
    Tensor::new(Generic::carrier(values, dtype, true)?, offset, layout)
}

/// Each operand of `args` under `geometry` as messages print it: `Float32 (3,4):(4,1)@2`, or
/// `scalar 0.5`.
pub(crate) fn describe(args: &[Arg], geometry: &[Placement]) -> Vec<String> {
    args.iter()
        .enumerate()
        .map(|(i, a)| match a {
            Arg::Tensor(d) => match geometry[i].layout() {
                Ok(layout) => format!("{d} {layout}@{}", geometry[i].offset),
                Err(error) => format!("{d} <{error}>"),
            },
            Arg::Scalar(v) => format!("scalar {v}"),
        })
        .collect()
}

/// Random slot values of the operand `arg` under `placement`, each mapped by `domain`
/// (none for a scalar).
pub(crate) fn slot_values(
    arg: Arg,
    placement: &Placement,
    rng: &mut Rng,
    domain: impl Fn(Value) -> Value,
) -> Result<Vec<Value>> {
    let Arg::Tensor(dtype) = arg else {
        return Ok(Vec::new());
    };
    let slots = placement.offset + placement.layout()?.cosize();
    Ok(rng.values(dtype, slots).into_iter().map(domain).collect())
}

/// `value` moved inside the domain of `builtin` (its entry's) at operand `position`.
fn domain(builtin: Builtin, position: usize, value: Value) -> Value {
    match (builtin.domain(), value) {
        (Domain::Positive, Value::Float(x)) => Value::Float(x.abs() + 0.125),
        (Domain::NonZeroDivisor, Value::Float(x)) if position == 1 && x == 0.0 => Value::Float(1.0),
        _ => value,
    }
}

/// Where one operand lives: extents, the order its strides grow in, a gap factor (1 is
/// dense) and the offset into its carrier.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Placement {
    pub(crate) extents: Vec<usize>,
    pub(crate) order: Vec<usize>,
    pub(crate) gap: usize,
    pub(crate) offset: usize,
    /// The modes broadcast with stride 0 (every coordinate of such a mode reads the same
    /// slots); the other modes' strides grow in `order`.
    pub(crate) broadcast: Vec<usize>,
}

impl Placement {
    pub(crate) fn dense(extents: &[usize]) -> Placement {
        Placement {
            extents: extents.to_vec(),
            order: (0..extents.len()).collect(),
            gap: 1,
            offset: 0,
            broadcast: Vec::new(),
        }
    }

    pub(crate) fn strided(
        extents: &[usize],
        order: &[usize],
        gap: usize,
        offset: usize,
    ) -> Placement {
        Placement {
            extents: extents.to_vec(),
            order: order.to_vec(),
            gap,
            offset,
            broadcast: Vec::new(),
        }
    }

    /// This placement with the modes `modes` broadcast (stride 0).
    pub(crate) fn broadcasting(mut self, modes: &[usize]) -> Placement {
        self.broadcast = modes.to_vec();
        self
    }

    pub(crate) fn shape(&self) -> Result<Shape> {
        Ok(Shape::flat(&self.extents)?)
    }

    pub(crate) fn layout(&self) -> Result<Layout> {
        let mut strides = vec![0; self.extents.len()];
        let mut running = self.gap;
        for &k in self.order.iter().filter(|k| !self.broadcast.contains(k)) {
            strides[k] = running;
            running *= self.extents[k];
        }
        Ok(Layout::new(self.shape()?, Stride::flat(&strides)?)?)
    }

    pub(crate) fn size(&self) -> usize {
        self.extents.iter().product()
    }

    /// Whether the operand is dense and canonical at offset 0 (a kernel may decline the
    /// other placements at run time, never these).
    pub(crate) fn is_dense(&self) -> bool {
        self.gap == 1
            && self.offset == 0
            && self.broadcast.is_empty()
            && self.order.iter().enumerate().all(|(i, &k)| i == k)
    }
}

/// Whether every operand of `geometry` is dense and canonical.
pub(crate) fn dense(geometry: &[Placement]) -> bool {
    geometry.iter().all(Placement::is_dense)
}
