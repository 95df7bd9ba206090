//! The streamed backward of the tiled operations: [`TiledRule`], the backward rule the
//! TiledEvictable definition records for the six operations on raw tiled operands, and
//! [`TiledAutograd`], the hooks that give the autograd engine that rule and let it keep the
//! gradients the rule builds.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;

use crate::gradient_sink::{compact_copy, gradient_homes, GradientSink};
use crate::tile_copy::Tier;
use crate::tile_grid::{decode, encode};
use crate::tile_stream::TileStream;
use crate::tiled_accumulate::streamed_sum;
use crate::tiled_operand::{column_major_strides, flat, TiledOperand};
use crate::tiled_operations::{
    call_options, prefetch_depth_with, primary_room, shares_capacity, streamed_operands,
    tile_operands, work_kind, Demand,
};
use crate::tiled_work::{single, Work, WorkKind};
use crate::{ResidencyPurpose, TileProgress, TileResidency};
use strideweave_core::autograd::{grad, no_grad, set_grad_enabled};
use strideweave_core::carrier::Carrier;
use strideweave_core::error::Result;
use strideweave_core::internal::BackwardRule;
use strideweave_core::internal::CompositeAutograd;
use strideweave_core::operation::{call, Operand, ResolvedInvocation};
use strideweave_core::tensor::Tensor;

/// The autograd hooks of the TiledEvictable composite provider.
pub(crate) struct TiledAutograd;

impl CompositeAutograd for TiledAutograd {
    fn backward_rule(&self, invocation: &ResolvedInvocation) -> Option<Box<dyn BackwardRule>> {
        let builtin = invocation.call().definition().builtin()?;
        work_kind(builtin)?;
        Some(Box::new(TiledRule {
            invocation: invocation.clone(),
        }))
    }

    fn adopt_gradient(&self, grad: &Tensor) -> bool {
        TileResidency::table(grad.carrier())
            .is_ok_and(|table| table.fresh_gradient.swap(false, Ordering::SeqCst))
    }

    fn add_gradients(&self, a: &Tensor, b: &Tensor) -> Option<Result<Tensor>> {
        streamed_sum(a, b)
    }

    fn discard_gradient(&self, grad: &Tensor) {
        let fresh = TileResidency::table(grad.carrier())
            .is_ok_and(|table| table.fresh_gradient.swap(false, Ordering::SeqCst));
        if fresh {
            let _ = grad.carrier().release();
        }
    }
}

/// The backward of one tiled operation, streamed like its forward (docs/tiers.md, Streamed
/// backward).
///
/// It asks each operand carrier's policy for its `Backward` plan and runs it, then streams
/// the forward's work items again through the primary tier (the same prefetch bounded by the
/// capacity): for each item it recomputes the per-tile calls on the staged tiles with
/// recording on and takes their gradients against the matching blocks of the cotangent, so
/// every per-tile rule is the built-in one. A tile's gradient, once complete, becomes a tile
/// of a fresh TiledEvictable made by the operand carrier's factory (same tier classes and
/// policy): on its secondary tier when the policy bounds the primary tier, otherwise on its
/// primary tier — unless the policy's plan for the gradient's tiles (purpose `Backward`) promotes it,
/// within the room the capacity leaves beside the streamed tiles. No dense copy of a saved
/// operand is made. An operand permuted within its tiles streams too: its tiles are gathered
/// in its logical order, and each gradient tile is stored back in the order of the operand's
/// layout, which the gradient shares. Any failure releases everything made and returns the
/// error (the engine then assigns no gradient); the operands' tiles only moved by the plan's
/// own failure-atomic requests.
struct TiledRule {
    invocation: ResolvedInvocation,
}

impl BackwardRule for TiledRule {
    fn backward(
        &self,
        inputs: &[Tensor],
        grad_outputs: &[Option<Tensor>],
    ) -> Result<Vec<Option<Tensor>>> {
        let Some(Some(g)) = grad_outputs.first() else {
            return Ok(vec![None; inputs.len()]);
        };
        let _recording = no_grad();
        let name = self.invocation.call().definition().name();
        let tensors: Vec<(usize, Tensor)> = inputs.iter().cloned().enumerate().collect();
        let operands = streamed_operands(&tensors, name, ResidencyPurpose::Backward)?;
        let work = Work::plan(&self.invocation, &operands)?;
        let wanted: Vec<bool> = inputs.iter().map(Tensor::requires_grad).collect();
        let held = held_beside_the_stream(&work, &wanted, &operands);
        let demand = Demand::new(work.items()).holding(0, held);
        let depth = prefetch_depth_with(&operands, &demand);
        let primary = operands[0].tier(Tier::Primary).clone();
        let g = dense_on(&primary, g, work.output_blocks().0)?;
        let mut sinks: Vec<Option<GradientSink>> = Vec::with_capacity(inputs.len());
        for (k, input) in inputs.iter().enumerate() {
            if !input.requires_grad() {
                sinks.push(None);
                continue;
            }
            match self.sink(&operands, &work, (&demand, depth), k, &sinks) {
                Ok(sink) => sinks.push(Some(sink)),
                Err(error) => {
                    release_sinks(sinks);
                    return Err(error);
                }
            }
        }
        let policy = operands[0].table().policy().cloned();
        let label = format!("{name}.backward");
        let total = work.items().len();
        let stream = TileStream::new(&operands, depth);
        let streamed = stream.run(work.items(), |index, tiles, counters| {
            self.item(&work, index, tiles, &g, &mut sinks, &stream)?;
            if let Some(policy) = &policy {
                policy.try_on_progress(
                    &TileProgress::new(
                        &label,
                        (index + 1, total),
                        (counters.staged_tiles, counters.staged_slots),
                        depth,
                        stream.peak(),
                    )
                    .with_allocated(counters.allocated),
                )?;
            }
            Ok(())
        });
        if let Err(error) = streamed {
            release_sinks(sinks);
            return Err(error);
        }
        let mut results = Vec::with_capacity(sinks.len());
        for (sink, input) in sinks.into_iter().zip(inputs) {
            results.push(match sink {
                None => None,
                Some(sink) => Some(sink.finish(input.offset(), input.layout())?),
            });
        }
        Ok(results)
    }
}

impl TiledRule {
    /// The sink of operand `k`'s gradient: the contributions each of its tiles expects from
    /// `work`, and where each goes by the policy's gradient plan, within the primary room
    /// `demand` leaves beside the stream at `depth` and the gradients `before` it under one
    /// capacity.
    fn sink(
        &self,
        operands: &[TiledOperand],
        work: &Work,
        (demand, depth): (&Demand<'_>, usize),
        k: usize,
        before: &[Option<GradientSink>],
    ) -> Result<GradientSink> {
        let operand = &operands[k];
        let mut remaining = vec![0; operand.grid().tile_count()];
        for item in work.items() {
            for &(owner, tile) in item {
                if owner == k {
                    remaining[tile] += 1;
                }
            }
        }
        let taken = before
            .iter()
            .enumerate()
            .filter_map(|(j, sink)| Some((j, sink.as_ref()?)))
            .filter(|(j, _)| shares_capacity(&operands[*j], operand))
            .map(|(_, sink)| sink.primary_homes())
            .sum();
        let room = primary_room(operands, demand, depth, k, taken);
        let homes = gradient_homes(operand.table(), room)?;
        GradientSink::new(operand, remaining, homes)
    }

    /// Item `index` of the backward: the per-tile calls recomputed on `tiles` with recording
    /// on, their gradients against `g`'s blocks added to the sinks. Every carrier it holds
    /// on the primary tier's class beside the staged tiles — the per-tile outputs, the
    /// cotangent blocks, the gradient tiles, the sinks' partial and placed primary tiles — is
    /// counted in `stream`'s occupancy while it lives.
    fn item(
        &self,
        work: &Work,
        index: usize,
        tiles: &[Tensor],
        g: &Tensor,
        sinks: &mut [Option<GradientSink>],
        stream: &TileStream<'_>,
    ) -> Result<()> {
        let item = &work.items()[index];
        let targets = work.targets(index);
        let name = self.invocation.call().definition().name();
        let (outputs, cotangents, locals) = {
            let _recording = set_grad_enabled(true);
            let locals: Vec<Tensor> = tiles.iter().map(Tensor::detach).collect();
            for (local, &(k, _)) in locals.iter().zip(item) {
                if sinks[k].is_some() {
                    local.set_requires_grad(true)?;
                }
            }
            let options = call_options(&self.invocation);
            let mut outputs = Vec::new();
            let mut cotangents = Vec::new();
            match work.kind() {
                WorkKind::Elementwise => {
                    let operands = tile_operands(&self.invocation, &locals);
                    outputs.push(single(call(name, operands, &[])?)?);
                    cotangents.push(Some(block(g, work, targets[0])?));
                }
                WorkKind::Reduce => {
                    let operands = [Operand::Tensor(locals[0].clone())];
                    outputs.push(single(call(name, operands, &options)?)?);
                    cotangents.push(Some(block(g, work, targets[0])?));
                }
                WorkKind::Matmul => {
                    for (j, &target) in targets.iter().enumerate() {
                        let operands = [
                            Operand::Tensor(locals[0].clone()),
                            Operand::Tensor(locals[1 + j].clone()),
                        ];
                        outputs.push(single(call(name, operands, &options)?)?);
                        cotangents.push(Some(block(g, work, target)?));
                    }
                }
            }
            (outputs, cotangents, locals)
        };
        let transient = outputs
            .iter()
            .chain(cotangents.iter().flatten())
            .map(|t| t.carrier().size())
            .sum();
        stream.hold(transient);
        let added = add_gradients(item, (&outputs, &cotangents), &locals, sinks, stream);
        stream.let_go(transient);
        added
    }
}

/// The gradients of `outputs` against `cotangents` with respect to the `locals` whose operand
/// has a sink, added to the sinks; the gradient tiles are counted in `stream`'s occupancy
/// while they are not yet the sinks' own.
fn add_gradients(
    item: &[(usize, usize)],
    (outputs, cotangents): (&[Tensor], &[Option<Tensor>]),
    locals: &[Tensor],
    sinks: &mut [Option<GradientSink>],
    stream: &TileStream<'_>,
) -> Result<()> {
    let inputs: Vec<Tensor> = locals
        .iter()
        .zip(item)
        .filter(|(_, (k, _))| sinks[*k].is_some())
        .map(|(local, _)| local.clone())
        .collect();
    if inputs.is_empty() {
        return Ok(());
    }
    let grads = grad(outputs, &inputs, cotangents, false)?;
    let computed = grads.iter().flatten().map(|g| g.carrier().size()).sum();
    stream.hold(computed);
    let kept_before: usize = sinks.iter().flatten().map(GradientSink::held).sum();
    let owners: Vec<(usize, usize)> = item
        .iter()
        .copied()
        .filter(|(k, _)| sinks[*k].is_some())
        .collect();
    let mut added = Ok(());
    for ((k, tile), gradient) in owners.into_iter().zip(grads) {
        if let Some(sink) = sinks[k].as_mut() {
            added = sink.add(tile, gradient);
            if added.is_err() {
                break;
            }
        }
    }
    // The gradient tiles live on as the sinks' partial or placed tiles, or are gone.
    let kept_after: usize = sinks.iter().flatten().map(GradientSink::held).sum();
    stream.let_go(computed);
    if kept_after >= kept_before {
        stream.hold(kept_after - kept_before);
    } else {
        stream.let_go(kept_before - kept_after);
    }
    added
}

/// The most slots of the primary tier's class a backward of `work` holds at once beside its
/// staged tiles (the operands wanting a gradient are those `wanted` marks): while item `n`
/// computes, one per-tile output and one cotangent block (an output block each) per call,
/// one gradient tile per tile of a wanted operand, and the partial gradient tiles of earlier
/// items still waiting for contributions (a broadcast tile, a `matmul` right tile), each by
/// its size (a gradient tile is laid out like the tile view it was taken against, so it
/// spans what that view spans).
fn held_beside_the_stream(work: &Work, wanted: &[bool], operands: &[TiledOperand]) -> usize {
    // A gradient taken against a tile view is laid out like the view.
    let tile = |(k, t): (usize, usize)| operands[k].span(t, 1);
    let mut remaining: HashMap<(usize, usize), usize> = HashMap::new();
    for item in work.items() {
        for &fetch in item.iter().filter(|(k, _)| wanted[*k]) {
            *remaining.entry(fetch).or_insert(0) += 1;
        }
    }
    let mut open: HashSet<(usize, usize)> = HashSet::new();
    let mut most = 0;
    for (n, item) in work.items().iter().enumerate() {
        let gradients: usize = item
            .iter()
            .filter(|(k, _)| wanted[*k])
            .map(|&fetch| tile(fetch))
            .sum();
        let partial: usize = open.iter().map(|&fetch| tile(fetch)).sum();
        let outputs = 2 * work.targets(n).len() * work.block_slots();
        most = most.max(outputs + gradients + partial);
        for &fetch in item.iter().filter(|(k, _)| wanted[*k]) {
            let left = remaining.entry(fetch).or_insert(1);
            *left = left.saturating_sub(1);
            if *left == 0 {
                open.remove(&fetch);
            } else {
                open.insert(fetch);
            }
        }
    }
    most
}

/// `g`, of the output's `shape`, as a dense canonical tensor on `primary`'s class (copied
/// when it is not one).
fn dense_on(primary: &Carrier, g: &Tensor, shape: &[usize]) -> Result<Tensor> {
    let canonical = flat(shape, &column_major_strides(shape))?;
    if g.carrier().class() == primary.class() && g.offset() == 0 && *g.layout() == canonical {
        return Ok(g.clone());
    }
    let values = g.to_values()?;
    let carrier = primary.new_like(&values, true, Some(g.dtype()))?;
    Tensor::new(carrier, 0, canonical)
}

/// The view of output block `target` of the dense canonical cotangent `g`.
fn block(g: &Tensor, work: &Work, target: usize) -> Result<Tensor> {
    let (shape, tile) = work.output_blocks();
    let grid: Vec<usize> = shape.iter().zip(tile).map(|(e, t)| e / t).collect();
    let origin: Vec<usize> = decode(target, &grid)
        .iter()
        .zip(tile)
        .map(|(c, t)| c * t)
        .collect();
    let view = Tensor::new(
        g.carrier().clone(),
        g.offset() + encode(&origin, shape),
        flat(tile, &column_major_strides(shape))?,
    )?;
    // The per-tile output is canonical: its cotangent must be laid out alike.
    let _recording = no_grad();
    compact_copy(&view)
}

fn release_sinks(sinks: Vec<Option<GradientSink>>) {
    for sink in sinks.into_iter().flatten() {
        sink.release();
    }
}
