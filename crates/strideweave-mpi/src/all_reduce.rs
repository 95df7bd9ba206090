//! The all-reduce operation `mpi.all_reduce` and [`all_reduce`], its entry point for a
//! tensor on any carrier that can move to the CPU.

use std::time::Duration;

use strideweave::carriers::Cpu;
use strideweave::movement::{copy_to, copy_to_scratch, move_to};
use strideweave::operation::{
    Arithmetic, BoundOperationCall, OperandKind, OperandPlan, OperandSpec, OperationDefinition,
    OperationPlan, OperationSchema, OptionSpec, OptionValue, ResolvedInvocation, ResultSpec, Vjp,
    VjpContext,
};
use strideweave::ops;
use strideweave::{DType, Error, Layout, Result, Shape, Tensor, Value};

use crate::communicator::Communicator;
use crate::host::MpiHost;
use crate::protocol::{Collective, Kind};
use crate::runtime;

/// The name of the all-reduce operation.
pub const OPERATION: &str = "mpi.all_reduce";

/// How [`all_reduce`] combines the ranks' tensors, element by element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reduction {
    /// The sum over the ranks.
    Sum,
    /// The sum over the ranks divided by their number.
    Mean,
}

impl Reduction {
    fn code(self) -> i64 {
        match self {
            Reduction::Sum => 0,
            Reduction::Mean => 1,
        }
    }

    fn from_code(code: i64) -> Result<Reduction> {
        match code {
            0 => Ok(Reduction::Sum),
            1 => Ok(Reduction::Mean),
            other => Err(Error::Value(format!(
                "'{OPERATION}' takes reduction 0 (sum) or 1 (mean), got {other}"
            ))),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Reduction::Sum => "sum",
            Reduction::Mean => "mean",
        }
    }
}

/// The plan of `mpi.all_reduce`: one Float32 tensor to a Float32 tensor.
pub(crate) fn plan() -> Result<OperationPlan> {
    OperationPlan::new(
        OPERATION,
        [OperandPlan::tensor(DType::FLOAT32, DType::FLOAT32)?],
        Arithmetic::Binary32,
        None,
        None,
        DType::FLOAT32,
    )
}

/// Defines `mpi.all_reduce`: operand `x` (differentiable), options `communicator` (the id of
/// a live [`Communicator`]), `reduction` (0 sum, 1 mean) and `timeout_ms`.
pub(crate) fn define() -> Result<OperationDefinition> {
    let schema = OperationSchema::new(
        [OperandSpec::new("x", OperandKind::Tensor, true)?],
        [
            OptionSpec::new("communicator", None)?,
            OptionSpec::new(
                "reduction",
                Some(OptionValue::Value(Value::Int(Reduction::Sum.code()))),
            )?,
            OptionSpec::new("timeout_ms", None)?,
        ],
    )?;
    let resolve = |call: &BoundOperationCall| -> Result<ResolvedInvocation> {
        let x = call.tensor(0)?;
        if x.dtype() != DType::FLOAT32 {
            return Err(Error::Type(format!(
                "'{OPERATION}' reduces Float32 tensors, got {}",
                x.dtype()
            )));
        }
        Options::of(call)?;
        let result = ResultSpec::canonical(DType::FLOAT32, x.shape().clone());
        ResolvedInvocation::new(call.clone(), plan()?, [result], [], None)
    };
    strideweave::operation::define_operation(OPERATION, schema, resolve, None, Vjp::rule(vjp))
}

/// The options of one call.
struct Options {
    communicator: i64,
    reduction: Reduction,
    timeout: Duration,
}

impl Options {
    fn of(call: &BoundOperationCall) -> Result<Options> {
        let int = |name: &str| -> Result<i64> {
            match call.option(name) {
                Some(OptionValue::Value(Value::Int(v))) => Ok(v),
                other => Err(Error::Type(format!(
                    "'{OPERATION}' needs an integer option '{name}', got {other:?}"
                ))),
            }
        };
        let timeout_ms = int("timeout_ms")?;
        let timeout = u64::try_from(timeout_ms)
            .ok()
            .filter(|&ms| ms > 0)
            .map(Duration::from_millis)
            .ok_or_else(|| {
                Error::Value(format!(
                    "'{OPERATION}' needs a positive timeout_ms, got {timeout_ms}"
                ))
            })?;
        Ok(Options {
            communicator: int("communicator")?,
            reduction: Reduction::from_code(int("reduction")?)?,
            timeout,
        })
    }

    fn for_call(&self) -> [(&'static str, OptionValue); 3] {
        [
            (
                "communicator",
                OptionValue::Value(Value::Int(self.communicator)),
            ),
            (
                "reduction",
                OptionValue::Value(Value::Int(self.reduction.code())),
            ),
            (
                "timeout_ms",
                OptionValue::Value(Value::Int(
                    i64::try_from(self.timeout.as_millis().max(1)).unwrap_or(i64::MAX),
                )),
            ),
        ]
    }
}

/// What every rank must pass alike, one `key: value` per line.
fn describe(shape: &Shape, dtype: DType, reduction: Reduction) -> String {
    format!(
        "shape: {shape}\ndtype: {dtype}\nreduction: {}",
        reduction.name()
    )
}

/// The kernel of `mpi.all_reduce` on an MpiHost tensor: the collective over its elements,
/// into a fresh MpiHost carrier.
pub(crate) fn forward(invocation: &ResolvedInvocation) -> Result<Vec<Tensor>> {
    let x = invocation.call().tensor(0)?;
    let options = Options::of(invocation.call())?;
    let comm = Communicator::lookup(options.communicator, options.timeout)?;
    let spec = invocation
        .results()
        .first()
        .ok_or_else(|| Error::Value(format!("'{OPERATION}' resolved to no result")))?;
    let host = x.carrier().downcast_ref::<MpiHost>().ok_or_else(|| {
        Error::Type(format!(
            "'{OPERATION}' runs on MpiHost tensors, got one on {}",
            x.carrier().class()
        ))
    })?;
    let description = describe(x.shape(), x.dtype(), options.reduction);
    let size = x.size();
    let slots = host.read();
    let compact = *x.layout() == Layout::column_major(x.shape().clone());
    let gathered: Result<Option<Vec<f32>>> = if compact {
        Ok(None)
    } else {
        (0..size)
            .map(|ordinal| {
                let slot = x.offset() + x.layout().index_of(ordinal)?;
                slots.get(slot).copied().ok_or_else(|| {
                    Error::Index(format!(
                        "slot {slot} of an MpiHost carrier of {} slots",
                        slots.len()
                    ))
                })
            })
            .collect::<Result<Vec<f32>>>()
            .map(Some)
    };
    // Every element of the receive buffer is written by the reduction, so a kept buffer's
    // stale contents never show.
    let receive = match crate::host::recycled(size) {
        Some(buffer) => Ok(buffer),
        None => zeroed(size),
    };
    let mut runtime = runtime::lock();
    let mut collective = Collective::start(&mut runtime, &comm, Kind::AllReduce, &description)?;
    let (gathered, receive) = match (gathered, receive) {
        (Ok(gathered), Ok(receive)) => {
            collective.agree(None)?;
            (gathered, receive)
        }
        (Err(error), _) | (_, Err(error)) => {
            collective.agree(Some(error))?;
            return Err(Error::Runtime(format!(
                "'{OPERATION}': a local failure was not reported"
            )));
        }
    };
    let send: &[f32] = match &gathered {
        Some(values) => values,
        None => slots.get(x.offset()..x.offset() + size).ok_or_else(|| {
            Error::Index(format!(
                "elements {}..{} of an MpiHost carrier of {} slots",
                x.offset(),
                x.offset() + size,
                slots.len()
            ))
        })?,
    };
    let mut reduced = collective.sum_f32(send, receive)?;
    drop(runtime);
    drop(slots);
    if options.reduction == Reduction::Mean {
        let ranks = comm.size() as f32;
        reduced.iter_mut().for_each(|v| *v /= ranks);
    }
    Ok(vec![spec.tensor(MpiHost::from_vec(reduced)?)?])
}

/// `size` zeroed floats, or a Memory error.
fn zeroed(size: usize) -> Result<Vec<f32>> {
    let mut values = Vec::new();
    values.try_reserve_exact(size).map_err(|_| {
        Error::Memory(format!(
            "cannot allocate {size} Float32 values for '{OPERATION}'"
        ))
    })?;
    values.resize(size, 0.0);
    Ok(values)
}

/// The rule of `mpi.all_reduce`. With `y_k` the output on rank `k` and the objective the sum
/// over ranks of each rank's loss, `∂/∂x_r Σ_k L_k = Σ_k g_k` for a sum (`y_k = Σ_r x_r`)
/// and `(1/n) Σ_k g_k` for a mean: the same all-reduce of the cotangents `g_k`.
fn vjp(context: &VjpContext, cotangents: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
    let Some(Some(g)) = cotangents.first() else {
        return Ok(vec![None]);
    };
    let options = Options::of(context.invocation().call())?;
    let g = if g.carrier().downcast_ref::<MpiHost>().is_some() {
        g.clone()
    } else {
        stage(g)?
    };
    let definition = crate::registration::setup()?;
    let mut results = definition.call(vec![g.into()], &options.for_call())?;
    Ok(vec![results.pop()])
}

/// `tensor` copied onto a fresh MpiHost carrier (through the CPU when it lives elsewhere).
fn stage(tensor: &Tensor) -> Result<Tensor> {
    if tensor.carrier().downcast_ref::<MpiHost>().is_some() {
        return Ok(tensor.clone());
    }
    if tensor.carrier().downcast_ref::<Cpu>().is_some() {
        return copy_to(tensor, &MpiHost::empty()?);
    }
    let cosize = tensor.layout().cosize();
    let on_cpu = copy_to(tensor, &Cpu::carrier(cosize, tensor.dtype(), true, true)?)?;
    move_to(&on_cpu, &MpiHost::empty()?)
}

/// Reduces `tensor` element by element across every rank of `comm`, which must all call it
/// with tensors of the same shape and dtype and the same `reduction`: each rank gets the sum
/// (or mean) of all the ranks' tensors.
///
/// The tensor may live on any carrier that can move to the CPU; the result is a fresh
/// compact tensor on the CPU, or on [`MpiHost`] when `tensor` is on MpiHost (which spares
/// the two bulk copies). Only Float32 is reduced. The call is differentiable: its backward
/// pass is the same all-reduce of the cotangents, so every rank must run its backward pass
/// through it too (with the objective being the sum of the ranks' losses). A tensor that
/// requires gradients on a carrier with no route back from the CPU (a Gpu tensor) must be
/// detached first.
///
/// Ranks that pass different shapes, dtypes or reductions each get a Value error saying what
/// differed on which ranks; a rank that cannot take part (its tensor cannot be moved, for
/// example) still tells the others, which get a Runtime error naming it. A rank that exited
/// or stalls makes the others fail with a Runtime error naming it within the communicator's
/// timeout plus its grace period (docs/distributed.md, Faults).
///
/// # Errors
/// As above; Runtime when MPI is unusable; the errors of moving the tensor.
pub fn all_reduce(tensor: &Tensor, reduction: Reduction, comm: &Communicator) -> Result<Tensor> {
    let definition = crate::registration::setup()?;
    let staged = if tensor.dtype() == DType::FLOAT32 {
        stage(tensor)
    } else {
        Err(Error::Type(format!(
            "all_reduce reduces Float32 tensors, got {}",
            tensor.dtype()
        )))
    };
    let staged = match staged {
        Ok(staged) => staged,
        Err(error) => {
            // Take part anyway, so that the other ranks learn why instead of waiting.
            let description = describe(tensor.shape(), tensor.dtype(), reduction);
            let mut runtime = runtime::lock();
            let mut collective =
                Collective::start(&mut runtime, comm, Kind::AllReduce, &description)?;
            collective.agree(Some(error))?;
            return Err(Error::Runtime(
                "all_reduce: a local failure was not reported".into(),
            ));
        }
    };
    let options = Options {
        communicator: comm.id(),
        reduction,
        timeout: comm.timeout(),
    };
    let mut results = definition.call(vec![staged.clone().into()], &options.for_call())?;
    let reduced = results
        .pop()
        .ok_or_else(|| Error::Runtime(format!("'{OPERATION}' returned no result")))?;
    if tensor.carrier().downcast_ref::<MpiHost>().is_some() {
        return Ok(reduced);
    }
    let on_cpu = copy_to_scratch(
        &reduced,
        &Cpu::carrier(reduced.size(), DType::FLOAT32, true, true)?,
    )?;
    if !on_cpu.requires_grad() {
        return Ok(on_cpu);
    }
    // The recorded copy's backward moves its cotangent to MpiHost, which needs an injective
    // cotangent; a following reduce_sum, say, hands back a broadcast one. An identity
    // `mul(·, 1)` in between turns any cotangent into a compact one (only when recording).
    ops::mul(&on_cpu, 1.0)
}
