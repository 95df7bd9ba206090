//! The tiled operations: TiledEvictable's [`CompositeProvider`], computing the six central
//! operations on raw tiled operands tile by tile through the primary tier's public dispatch
//! (docs/tiers.md, Operations on raw tiled operands: the six central operations, with a dense
//! result on the primary tier's class).

use std::sync::Arc;

use crate::autograd::no_grad;
use crate::carrier::{Carrier, CarrierClass};
use crate::carriers::extension::{
    CompositePreparation, CompositeProvider, PreparedComposite, ProviderResult, Submitted,
    Unsupported,
};
use crate::carriers::tiled::tile_copy::Tier;
use crate::carriers::tiled::tile_stream::{pieces_for, Fetch, StreamCounters, TileStream};
use crate::carriers::tiled::tile_table::TileTable;
use crate::carriers::tiled::tiled_operand::TiledOperand;
use crate::carriers::tiled::tiled_work::{Work, WorkKind};
use crate::carriers::tiled::{
    ResidencyPurpose as Purpose, TileLocation, TileProgress, TileResidency,
};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::operation::{
    call, Builtin, Operand, OperationCapability, OptionValue, ResolvedInvocation,
};
use crate::tensor::Tensor;

/// The operations a TiledEvictable executes on raw tiled operands: those with a kind of
/// tiled work.
fn is_tiled(name: &str) -> bool {
    Builtin::from_name(name).and_then(work_kind).is_some()
}

/// How many work items stream ahead when no capacity bounds them: one computing, one queued,
/// one staging.
const UNBOUNDED_DEPTH: usize = 3;

/// The composite provider of the TiledEvictable definition.
pub(crate) fn composite() -> CompositeProvider {
    CompositeProvider::new(capabilities, result_carriers, prepare)
}

/// The primary tier of the TiledEvictable `carrier`.
fn primary_of(carrier: &Carrier) -> Result<Carrier> {
    Ok(TileResidency::table(carrier)?
        .token(Tier::Primary)
        .carrier()
        .clone())
}

/// The primary tier's plans for the six operations whose output dtype both tiers store
/// (called once per instance by the framework, which sorts and freezes the answer).
fn capabilities(carrier: &Carrier) -> Result<Vec<OperationCapability>> {
    let table = TileResidency::table(carrier)?;
    let primary = table.token(Tier::Primary).carrier();
    let secondary = table.token(Tier::Secondary).carrier();
    // A tier's failing dtype answer propagates (it never reads as "not stored").
    let mut kept = Vec::new();
    for capability in primary.capabilities().iter() {
        let output = capability.plan().output();
        if is_tiled(capability.operation())
            && primary.supports_storage_dtype(output)?
            && secondary.supports_storage_dtype(output)?
        {
            kept.push(capability.clone());
        }
    }
    Ok(kept)
}

/// Every result is a dense tensor on the primary tier's class.
fn result_carriers(
    carrier: &Carrier,
    invocation: &ResolvedInvocation,
) -> Result<Vec<CarrierClass>> {
    let class = primary_of(carrier)?.class();
    Ok(vec![class; invocation.results().len()])
}

/// Checks the operands and plans the work, before anything runs; the work itself is the
/// prepared submission.
fn prepare(carrier: &Carrier, invocation: &ResolvedInvocation) -> Result<CompositePreparation> {
    let name = invocation.call().definition().name();
    if !is_tiled(name) {
        let tiled: Vec<&str> = Builtin::ALL
            .into_iter()
            .filter(|b| work_kind(*b).is_some())
            .map(Builtin::name)
            .collect();
        return Ok(CompositePreparation::Unsupported(Unsupported::new(
            format!("TiledEvictable executes only {tiled:?} on raw tiled operands"),
        )?));
    }
    let tensors: Vec<(usize, Tensor)> = invocation
        .call()
        .operands()
        .iter()
        .enumerate()
        .filter_map(|(position, operand)| Some((position, operand.as_tensor()?.clone())))
        .collect();
    let mut operands = Vec::new();
    for (position, tensor) in &tensors {
        operands.push(TiledOperand::new(tensor, name, *position)?);
    }
    let primary = primary_of(carrier)?;
    for (k, operand) in operands.iter().enumerate() {
        let class = operand.tier(Tier::Primary).class();
        if class != primary.class() {
            return Err(Error::Type(format!(
                "'{name}' on raw TiledEvictable operands needs one primary tier class: operand \
                 tensor {k} computes on {class}, the first on {}",
                primary.class()
            )));
        }
    }
    let work = Work::plan(invocation, &operands)?;
    drop(operands);
    let invocation = invocation.clone();
    let progress = TileResidency::table(carrier)?.policy().cloned();
    Ok(CompositePreparation::Composite(PreparedComposite::new(
        move || {
            let _grad = no_grad();
            let operands = streamed_operands(&tensors, name_of(&invocation), Purpose::Operation)?;
            let depth = prefetch_depth(&operands, work.items());
            let result = execute(
                &invocation,
                &operands,
                &work,
                depth,
                &primary,
                |p| match &progress {
                    Some(policy) => policy.try_on_progress(p),
                    None => Ok(()),
                },
            )?;
            Ok(Submitted::Ready(ProviderResult::new([result])?))
        },
    )))
}

fn name_of(invocation: &ResolvedInvocation) -> &str {
    invocation.call().definition().name()
}

/// The operands of streamed work (`purpose`: a tiled operation or its backward), snapshotted
/// for it after the residency plan of each distinct operand carrier has run (see
/// [`TileResidency::run_streamed_plan`]); `tensors` are the operation's tensor operands with
/// their positions.
pub(crate) fn streamed_operands(
    tensors: &[(usize, Tensor)],
    operation: &str,
    purpose: Purpose,
) -> Result<Vec<TiledOperand>> {
    let mut planned: Vec<Arc<TileTable>> = Vec::new();
    for (_, tensor) in tensors {
        let table = TileResidency::table(tensor.carrier())?;
        if planned.iter().any(|done| Arc::ptr_eq(done, &table)) {
            continue;
        }
        TileResidency::run_streamed_plan(tensor.carrier(), purpose)?;
        planned.push(table);
    }
    tensors
        .iter()
        .map(|(position, tensor)| TiledOperand::new(tensor, operation, *position))
        .collect()
}

/// How many items may be in flight: bounded, per operand carrier with a
/// [`primary_capacity`](crate::carriers::ResidencyPolicy::primary_capacity) (carriers sharing
/// one policy object share its capacity), by the capacity left after their resident tiles
/// divided by the tiles one item stages for them; at least 1.
pub(crate) fn prefetch_depth(operands: &[TiledOperand], items: &[Vec<Fetch>]) -> usize {
    prefetch_depth_with(operands, items, (0, 0))
}

/// [`prefetch_depth`] when each item in flight also holds `extra` tiles of its own on the
/// primary tier (an item's result tile), and the computation holds `held` more beside the
/// stream (a backward's transients and partial gradient tiles), both counted against every
/// bounded capacity.
pub(crate) fn prefetch_depth_with(
    operands: &[TiledOperand],
    items: &[Vec<Fetch>],
    (extra, held): (usize, usize),
) -> usize {
    let mut depth = UNBOUNDED_DEPTH;
    for (k, operand) in operands.iter().enumerate() {
        if operands[..k]
            .iter()
            .any(|other| shares_capacity(other, operand))
        {
            continue;
        }
        let Some(use_) = primary_use(operands, items, k) else {
            continue;
        };
        let per_item = use_.per_item + extra;
        if per_item == 0 {
            continue;
        }
        let free = use_.capacity.saturating_sub(use_.resident + held);
        depth = depth.min(free / per_item);
    }
    depth.max(1)
}

/// Whether two operands count against one capacity: tensor operands over one carrier
/// (`add(x, x)`), or carriers steered by one policy object (a parameter and the gradient its
/// factory made).
pub(crate) fn shares_capacity(a: &TiledOperand, b: &TiledOperand) -> bool {
    Arc::ptr_eq(a.table(), b.table())
        || matches!(
            (a.table().policy(), b.table().policy()),
            (Some(x), Some(y)) if Arc::ptr_eq(x, y)
        )
}

/// What streamed work takes of the primary capacity operand `k` counts against.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PrimaryUse {
    /// The capacity of operand `k`'s policy.
    pub(crate) capacity: usize,
    /// The tiles already on the primary tier of the carriers sharing it.
    pub(crate) resident: usize,
    /// The most tiles of those carriers one item stages.
    pub(crate) per_item: usize,
}

/// The use of the capacity of operand `k`'s policy by `items`; `None` when it has none.
pub(crate) fn primary_use(
    operands: &[TiledOperand],
    items: &[Vec<Fetch>],
    k: usize,
) -> Option<PrimaryUse> {
    let operand = &operands[k];
    let capacity = operand.table().policy()?.primary_capacity()?;
    let sharing: Vec<usize> = (0..operands.len())
        .filter(|&j| shares_capacity(&operands[j], operand))
        .collect();
    let per_item = items
        .iter()
        .map(|item| {
            item.iter()
                .filter(|(j, tile)| sharing.contains(j) && operands[*j].stages(*tile))
                .count()
        })
        .max()
        .unwrap_or(0);
    let mut resident = 0;
    for (j, other) in operands.iter().enumerate() {
        let first = !operands[..j]
            .iter()
            .any(|o| Arc::ptr_eq(o.table(), other.table()));
        if first && sharing.contains(&j) {
            resident += other.resident_tiles();
        }
    }
    Some(PrimaryUse {
        capacity,
        resident,
        per_item,
    })
}

/// The primary tiles a gradient of operand `k` may place while `items` stream at `depth`
/// (each item holding `extra` tiles of its own beside its staged ones, the computation `held`
/// more beside the stream), after `taken` tiles already given to other gradients under the
/// same capacity; `None` without a capacity.
pub(crate) fn primary_room(
    operands: &[TiledOperand],
    items: &[Vec<Fetch>],
    (depth, extra, held): (usize, usize, usize),
    k: usize,
    taken: usize,
) -> Option<usize> {
    let use_ = primary_use(operands, items, k)?;
    let streaming = depth * (use_.per_item + extra);
    Some(
        use_.capacity
            .saturating_sub(use_.resident + streaming + held + taken),
    )
}

/// Runs the planned work: streams the items, computes each, reports progress, assembles the
/// dense result.
fn execute(
    invocation: &ResolvedInvocation,
    operands: &[TiledOperand],
    work: &Work,
    depth: usize,
    primary: &Carrier,
    progress: impl Fn(&TileProgress) -> Result<()>,
) -> Result<Tensor> {
    let name = invocation.call().definition().name();
    if let Some((whole, staged, allocated)) = whole_tensors(operands)? {
        // Every operand is still its full seed tier: one call computes the result.
        let outputs = call(
            name,
            tile_operands(invocation, &whole),
            &call_options(invocation),
        );
        let slots = staged.iter().map(|(_, carrier)| carrier.size()).sum();
        let tiles = operands
            .iter()
            .filter(|operand| operand.whole_stages())
            .map(|operand| operand.grid().tile_count())
            .sum();
        let count = staged.len();
        for (table, carrier) in staged {
            table.keep_whole_staging(carrier);
        }
        let outputs = outputs?;
        progress(
            &TileProgress::new(name, (1, 1), (tiles, slots), 1, count).with_allocated(allocated),
        )?;
        let [result] = <[Tensor; 1]>::try_from(outputs).map_err(|outputs| {
            Error::Runtime(format!(
                "'{name}' returned {} results, expected 1",
                outputs.len()
            ))
        })?;
        let spec = &invocation.results()[0];
        return Tensor::with_shared_layout(
            result.carrier().clone(),
            0,
            Arc::clone(spec.shared_layout()),
        );
    }
    let stream = TileStream::new(operands, depth).with_pieces(pieces(invocation, operands, work));
    let mut state = work.start(invocation, primary)?;
    let total = work.items().len();
    stream.run(work.items(), |index, tiles, counters: StreamCounters| {
        state.compute(index, tiles)?;
        if !counters.item_done {
            return Ok(());
        }
        progress(
            &TileProgress::new(
                name,
                (index + 1, total),
                (counters.staged_tiles, counters.staged_slots),
                depth,
                counters.staged_peak,
            )
            .with_allocated(counters.allocated)
            .with_copies(counters.staged_copies),
        )
    })?;
    state.finish()
}

/// How many pieces each item of `work` is staged and computed in: a Float32-accumulated
/// `reduce_sum` (whose partial sums over mode 1 are added as they come) stages a secondary
/// tile of a canonical operand in pieces of columns small enough to stay in the cache between
/// their copy and their sum ([`pieces_for`]); every other item is computed whole.
fn pieces(invocation: &ResolvedInvocation, operands: &[TiledOperand], work: &Work) -> Vec<usize> {
    let [operand] = operands else {
        return Vec::new();
    };
    let summed = work.kind() == WorkKind::Reduce
        && invocation.plan().accumulator_dtype() == Some(DType::FLOAT32);
    if !summed || !operand.is_canonical() {
        return Vec::new();
    }
    let stride = operand.logical()[0];
    work.items()
        .iter()
        .map(|item| match item[..] {
            [(0, tile)]
                if operand.location(tile) == TileLocation::Secondary && operand.stages(tile) =>
            {
                pieces_for(operand.tile_shape(), stride)
            }
            _ => 1,
        })
        .collect()
}

/// The carriers staged for whole-tensor operands, each with the table whose pool keeps it.
type WholeStaging = Vec<(Arc<TileTable>, Carrier)>;

/// The whole-tensor operands on the primary class, the carriers staged for them and how many
/// of those were allocated (not reused), when every operand can be read whole (see
/// `TiledOperand::whole`); staged carriers are released again when one operand cannot.
fn whole_tensors(operands: &[TiledOperand]) -> Result<Option<(Vec<Tensor>, WholeStaging, usize)>> {
    if operands.iter().any(|o| o.whole_candidate().is_none()) {
        return Ok(None);
    }
    let mut views = Vec::with_capacity(operands.len());
    let mut staged: WholeStaging = Vec::new();
    let mut allocated = 0;
    let release = |staged: &WholeStaging| {
        for (_, carrier) in staged {
            let _ = carrier.release();
        }
    };
    for operand in operands {
        match operand.whole() {
            Ok(Some((view, copy, fresh))) => {
                views.push(view);
                allocated += usize::from(fresh);
                staged.extend(copy.map(|carrier| (Arc::clone(operand.table()), carrier)));
            }
            Ok(None) => {
                release(&staged);
                return Ok(None);
            }
            Err(error) => {
                release(&staged);
                return Err(error);
            }
        }
    }
    Ok(Some((views, staged, allocated)))
}

/// The accumulator option of the call (`reduce_sum`, `matmul`), passed on to every per-tile
/// call; no option otherwise.
pub(crate) fn call_options(invocation: &ResolvedInvocation) -> Vec<(&'static str, OptionValue)> {
    match invocation.call().option("accumulator_dtype") {
        Some(value) if value != OptionValue::None => vec![("accumulator_dtype", value)],
        _ => Vec::new(),
    }
}

/// The operands of a per-tile call: the call's operands with each tensor replaced, in order,
/// by the fetched tile views `tiles`.
pub(crate) fn tile_operands(invocation: &ResolvedInvocation, tiles: &[Tensor]) -> Vec<Operand> {
    let mut next = tiles.iter();
    invocation
        .call()
        .operands()
        .iter()
        .map(|operand| match operand {
            Operand::Tensor(_) => next
                .next()
                .map_or_else(|| operand.clone(), |t| Operand::Tensor(t.clone())),
            other => other.clone(),
        })
        .collect()
}

/// Which kind of tiled work `builtin` is; `None` for the built-ins a TiledEvictable does not
/// execute on raw tiled operands.
pub(crate) fn work_kind(builtin: Builtin) -> Option<WorkKind> {
    match builtin {
        Builtin::Add | Builtin::ElementwiseMul | Builtin::Mul | Builtin::Relu => {
            Some(WorkKind::Elementwise)
        }
        Builtin::ReduceSum => Some(WorkKind::Reduce),
        Builtin::Matmul => Some(WorkKind::Matmul),
        Builtin::Sub
        | Builtin::Div
        | Builtin::Neg
        | Builtin::Abs
        | Builtin::Exp
        | Builtin::Log
        | Builtin::Sqrt
        | Builtin::Tanh
        | Builtin::Sigmoid
        | Builtin::Maximum
        | Builtin::Minimum
        | Builtin::Eq
        | Builtin::Lt
        | Builtin::Le
        | Builtin::ReduceMax
        | Builtin::Select => None,
    }
}
