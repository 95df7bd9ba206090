//! The tiled operations: TiledEvictable's [`CompositeProvider`], computing the six central
//! operations on raw tiled operands tile by tile through the primary tier's public dispatch
//! (docs/tiers.md, Operations on raw tiled operands: the six central operations, with a dense
//! result on the primary tier's class).

use std::sync::Arc;

use crate::capacity::Budget;
use crate::tile_copy::Tier;
use crate::tile_stream::{pieces_for, Fetch, StreamCounters, TileStream};
use crate::tile_table::TileTable;
use crate::tiled_operand::TiledOperand;
use crate::tiled_work::{Work, WorkKind};
use crate::{ResidencyPurpose as Purpose, TileLocation, TileProgress, TileResidency};
use strideweave_core::autograd::no_grad;
use strideweave_core::carrier::{Carrier, CarrierClass};
use strideweave_core::dtype::DType;
use strideweave_core::error::{Error, Result};
use strideweave_core::extension::{
    CompositePreparation, CompositeProvider, PreparedComposite, ProviderResult, Submitted,
    Unsupported,
};
use strideweave_core::internal;
use strideweave_core::operation::{
    call, Builtin, Operand, OperationCapability, OptionValue, ResolvedInvocation, ShapeRule,
};
use strideweave_core::parallelism::{with_parallelism, Parallelism};
use strideweave_core::tensor::Tensor;

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
            let pieces = pieces(&invocation, &operands, &work);
            let demand = Demand::new(work.items())
                .in_pieces(&pieces)
                .holding(0, work.held_slots(&invocation));
            let depth = if pieces.iter().any(|&count| count > 1) {
                // A piece is staged to be summed in the cache of the core that copied it: a
                // staging worker would copy it into the other core's cache instead.
                1
            } else {
                prefetch_depth_with(&operands, &demand)
            };
            let result = execute(
                &invocation,
                &operands,
                &work,
                (depth, pieces),
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

/// What streamed work asks of the primary tier beside its staged tiles, in slots.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Demand<'a> {
    /// The work items.
    pub(crate) items: &'a [Vec<Fetch>],
    /// How many pieces each item is staged in (an item not listed: 1).
    pub(crate) pieces: &'a [usize],
    /// The slots each item in flight holds beside its staged tiles (an item's result tile).
    pub(crate) per_item: usize,
    /// The slots the computation holds beside the stream at most (partial output blocks, a
    /// backward's transients and partial gradient tiles).
    pub(crate) held: usize,
}

impl<'a> Demand<'a> {
    /// Items staged whole, holding nothing beside their tiles.
    pub(crate) fn new(items: &'a [Vec<Fetch>]) -> Demand<'a> {
        Demand {
            items,
            pieces: &[],
            per_item: 0,
            held: 0,
        }
    }

    /// The same demand with `per_item` slots per item in flight and `held` beside.
    pub(crate) fn holding(self, per_item: usize, held: usize) -> Demand<'a> {
        Demand {
            per_item,
            held,
            ..self
        }
    }

    /// The same demand with items staged in `pieces`.
    pub(crate) fn in_pieces(self, pieces: &'a [usize]) -> Demand<'a> {
        Demand { pieces, ..self }
    }

    fn pieces_of(&self, item: usize) -> usize {
        self.pieces.get(item).copied().unwrap_or(1).max(1)
    }
}

/// How many items of `demand` may be in flight: bounded, per distinct capacity of the
/// operand carriers' policies (carriers sharing one policy object share its capacity), by
/// the slots that capacity leaves beside everything already on the primary tier under it
/// ([`Budget`]) and the slots `demand` holds beside the stream, divided by the slots one
/// item stages for those carriers plus its own per-item slots; at least 1.
pub(crate) fn prefetch_depth_with(operands: &[TiledOperand], demand: &Demand<'_>) -> usize {
    let mut depth = UNBOUNDED_DEPTH;
    for (k, operand) in operands.iter().enumerate() {
        if operands[..k]
            .iter()
            .any(|other| shares_capacity(other, operand))
        {
            continue;
        }
        let Some(use_) = primary_use(operands, demand, k) else {
            continue;
        };
        let per_item = use_.per_item + demand.per_item;
        if per_item == 0 {
            continue;
        }
        depth = depth.min(use_.budget.free(demand.held) / per_item);
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
    /// The capacity of operand `k`'s policy and what is already held under it.
    pub(crate) budget: Budget,
    /// The most slots one step of the work stages for the operands sharing it.
    pub(crate) per_item: usize,
}

/// The tables of `operands`, each once.
pub(crate) fn operand_tables(operands: &[TiledOperand]) -> Vec<&Arc<TileTable>> {
    let mut tables: Vec<&Arc<TileTable>> = Vec::new();
    for operand in operands {
        if !tables.iter().any(|t| Arc::ptr_eq(t, operand.table())) {
            tables.push(operand.table());
        }
    }
    tables
}

/// The use of the capacity of operand `k`'s policy by `demand`; `None` when it has none.
pub(crate) fn primary_use(
    operands: &[TiledOperand],
    demand: &Demand<'_>,
    k: usize,
) -> Option<PrimaryUse> {
    let operand = &operands[k];
    let budget = Budget::of(operand.table(), &operand_tables(operands))?;
    let sharing: Vec<usize> = (0..operands.len())
        .filter(|&j| shares_capacity(&operands[j], operand))
        .collect();
    let per_item = demand
        .items
        .iter()
        .enumerate()
        .map(|(n, item)| {
            item.iter()
                .filter(|(j, _)| sharing.contains(j))
                .map(|&(j, tile)| operands[j].staged_slots(tile, demand.pieces_of(n)))
                .sum::<usize>()
        })
        .max()
        .unwrap_or(0);
    Some(PrimaryUse { budget, per_item })
}

/// The primary slots a gradient of operand `k` may place while `demand` streams at `depth`,
/// after `taken` slots already given to other gradients under the same capacity; `None`
/// without a capacity.
pub(crate) fn primary_room(
    operands: &[TiledOperand],
    demand: &Demand<'_>,
    depth: usize,
    k: usize,
    taken: usize,
) -> Option<usize> {
    let use_ = primary_use(operands, demand, k)?;
    let streaming = depth * (use_.per_item + demand.per_item);
    Some(use_.budget.free(streaming + demand.held + taken))
}

/// Runs the planned work: streams the items, computes each, reports progress, assembles the
/// dense result.
fn execute(
    invocation: &ResolvedInvocation,
    operands: &[TiledOperand],
    work: &Work,
    (depth, pieces): (usize, Vec<usize>),
    primary: &Carrier,
    progress: impl Fn(&TileProgress) -> Result<()>,
) -> Result<Tensor> {
    let name = invocation.call().definition().name();
    let in_pieces: Vec<bool> = pieces.iter().map(|&count| count > 1).collect();
    let stream = TileStream::new(operands, depth).with_pieces(pieces);
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
        for (table, carrier) in staged {
            table.keep_whole_staging(carrier);
        }
        let outputs = outputs?;
        let mut peak = stream.peak();
        peak.slots = slots;
        progress(
            &TileProgress::new(name, (1, 1), (tiles, slots), 1, peak).with_allocated(allocated),
        )?;
        let [result] = <[Tensor; 1]>::try_from(outputs).map_err(|outputs| {
            Error::Runtime(format!(
                "'{name}' returned {} results, expected 1",
                outputs.len()
            ))
        })?;
        let spec = &invocation.results()[0];
        return internal::result_tensor(result.carrier().clone(), spec);
    }
    let mut state = work.start(invocation, primary)?;
    let total = work.items().len();
    stream.run(work.items(), |index, tiles, counters: StreamCounters| {
        if in_pieces.get(index).copied().unwrap_or(false) {
            // A piece is summed where it was copied, in this core's cache: split over the
            // rayon pool it would be read again from the other core's.
            with_parallelism(Parallelism::Sequential, || {
                state.compute(index, tiles, &stream)
            })?;
        } else {
            state.compute(index, tiles, &stream)?;
        }
        if !counters.item_done {
            return Ok(());
        }
        progress(
            &TileProgress::new(
                name,
                (index + 1, total),
                (counters.staged_tiles, counters.staged_slots),
                depth,
                stream.peak(),
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
/// their copy and their sum ([`pieces_for`]); every other item is computed whole. Work
/// staged in pieces streams at depth 1: each piece is copied on the computing thread and its
/// kernel runs there, sequentially.
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
    // The whole copies made under one capacity must fit in it together.
    let tables = operand_tables(operands);
    for operand in operands.iter().filter(|o| o.whole_stages()) {
        let Some(budget) = Budget::of(operand.table(), &tables) else {
            continue;
        };
        let mut counted: Vec<&Arc<TileTable>> = Vec::new();
        let mut together = 0;
        for other in operands.iter().filter(|o| o.whole_stages()) {
            if shares_capacity(operand, other)
                && !counted.iter().any(|t| Arc::ptr_eq(t, other.table()))
            {
                counted.push(other.table());
                together += other.grid().logical_size();
            }
        }
        if together > budget.free(0) {
            return Ok(None);
        }
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

/// Which kind of tiled work `builtin` is, from its entry in the table of built-ins: the
/// central operations, by their shape rule; `None` for the built-ins a TiledEvictable does
/// not execute on raw tiled operands.
pub(crate) fn work_kind(builtin: Builtin) -> Option<WorkKind> {
    if !builtin.is_central() {
        return None;
    }
    match builtin.shape_rule() {
        ShapeRule::Broadcast => Some(WorkKind::Elementwise),
        ShapeRule::ReduceMode1 => Some(WorkKind::Reduce),
        ShapeRule::Contract => Some(WorkKind::Matmul),
        _ => None,
    }
}
