//! The streamed backward of the tiled operations: [`TiledRule`], the backward rule the
//! TiledEvictable definition records for the six operations on raw tiled operands, and
//! [`TiledAutograd`], the hooks that give the autograd engine that rule and let it keep the
//! gradients the rule builds.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::autograd::{builtin_rule, grad, no_grad, set_grad_enabled, BackwardRule};
use crate::carrier::Carrier;
use crate::carriers::extension::CompositeAutograd;
use crate::carriers::tiled::tile_copy::{Tier, TileCopy};
use crate::carriers::tiled::tile_grid::{decode, encode};
use crate::carriers::tiled::tile_stream::TileStream;
use crate::carriers::tiled::tile_table::TileTable;
use crate::carriers::tiled::tiled_operand::{column_major_strides, flat, TiledOperand};
use crate::carriers::tiled::tiled_operations::{
    call_options, prefetch_depth, streamed_operands, tile_operands, work_kind,
};
use crate::carriers::tiled::tiled_work::{single, Work, WorkKind};
use crate::carriers::tiled::{ResidencyPurpose, TileLocation, TileProgress, TileResidency};
use crate::error::{Error, Result};
use crate::movement::move_to_scratch;
use crate::operation::{call, Operand, ResolvedInvocation};
use crate::ops;
use crate::tensor::Tensor;

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
/// primary tier. No dense copy of a saved operand is made. Any failure releases everything
/// made and returns the error (the engine then assigns no gradient); the operands' tiles
/// only moved by the plan's own failure-atomic requests.
///
/// An operand permuted within its tiles has no tile-aligned gradient: that backward uses the
/// built-in rule instead.
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
        if !operands.iter().all(TiledOperand::is_canonical) {
            drop(operands);
            let builtin = self.invocation.call().definition().builtin();
            let rule = builtin
                .and_then(|b| builtin_rule(b, &self.invocation))
                .ok_or_else(|| Error::Runtime(format!("'{name}' has no backward rule")))?;
            return rule.backward(inputs, grad_outputs);
        }
        let work = Work::plan(&self.invocation, &operands)?;
        let depth = prefetch_depth(&operands, work.items());
        let primary = operands[0].tier(Tier::Primary).clone();
        let g = dense_on(&primary, g, work.output_blocks().0)?;
        let mut sinks: Vec<Option<Sink>> = Vec::with_capacity(inputs.len());
        for (k, input) in inputs.iter().enumerate() {
            if !input.requires_grad() {
                sinks.push(None);
                continue;
            }
            match Sink::new(&operands[k], k, &work) {
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
        let streamed =
            TileStream::new(&operands, depth).run(work.items(), |index, tiles, counters| {
                self.item(&work, index, tiles, &g, &mut sinks)?;
                if let Some(policy) = &policy {
                    policy.on_progress(&TileProgress::new(
                        &label,
                        (index + 1, total),
                        (counters.staged_tiles, counters.staged_slots),
                        depth,
                        counters.staged_peak,
                    ));
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
                Some(sink) => Some(sink.finish(input)?),
            });
        }
        Ok(results)
    }
}

impl TiledRule {
    /// Item `index` of the backward: the per-tile calls recomputed on `tiles` with recording
    /// on, their gradients against `g`'s blocks added to the sinks.
    fn item(
        &self,
        work: &Work,
        index: usize,
        tiles: &[Tensor],
        g: &Tensor,
        sinks: &mut [Option<Sink>],
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
        let inputs: Vec<Tensor> = locals
            .iter()
            .zip(item)
            .filter(|(_, (k, _))| sinks[*k].is_some())
            .map(|(local, _)| local.clone())
            .collect();
        if inputs.is_empty() {
            return Ok(());
        }
        let grads = grad(&outputs, &inputs, &cotangents, false)?;
        let owners: Vec<(usize, usize)> = item
            .iter()
            .copied()
            .filter(|(k, _)| sinks[*k].is_some())
            .collect();
        for ((k, tile), gradient) in owners.into_iter().zip(grads) {
            if let Some(sink) = sinks[k].as_mut() {
                sink.add(tile, gradient)?;
            }
        }
        Ok(())
    }
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

/// A compact copy of `t` on its own carrier class: `mul(t, 1.0)` where the class runs it,
/// else `t`'s values through the class's factory, so a primary tier that runs only the
/// forward still gets its gradient (as the framework evaluates a rule the carrier cannot run
/// on the reference kernels).
fn compact_copy(t: &Tensor) -> Result<Tensor> {
    match ops::mul(t, 1.0) {
        Err(Error::UnsupportedOperationPlan(_)) => {
            let values = t.to_values()?;
            Tensor::compact(
                t.carrier().new_like(&values, true, None)?,
                t.shape().clone(),
            )
        }
        outcome => outcome,
    }
}

/// The gradient of one tiled operand being built tile by tile.
struct Sink {
    fresh: Carrier,
    table: Arc<TileTable>,
    /// The partial gradient of each tile not yet complete.
    parts: Vec<Option<Tensor>>,
    /// How many contributions each tile still expects.
    remaining: Vec<usize>,
    /// Whether complete tiles go to the secondary tier (the policy bounds the primary).
    on_secondary: bool,
}

impl Sink {
    /// A sink for operand `k` of `work` over a fresh TiledEvictable of `operand`'s factory.
    fn new(operand: &TiledOperand, k: usize, work: &Work) -> Result<Sink> {
        let grid = operand.grid();
        let mut remaining = vec![0; grid.tile_count()];
        for item in work.items() {
            for &(owner, tile) in item {
                if owner == k {
                    remaining[tile] += 1;
                }
            }
        }
        let fresh = operand
            .tier_owner()
            .allocate_like(grid.logical_size(), true, None, true)?;
        let table = match TileResidency::table(&fresh) {
            Ok(table) => table,
            Err(error) => {
                let _ = fresh.release();
                return Err(error);
            }
        };
        let on_secondary = operand
            .table()
            .policy()
            .and_then(|policy| policy.primary_capacity())
            .is_some();
        Ok(Sink {
            fresh,
            table,
            parts: vec![None; grid.tile_count()],
            remaining,
            on_secondary,
        })
    }

    /// Adds one contribution to tile `tile`; the tile is placed once it is complete.
    fn add(&mut self, tile: usize, contribution: Option<Tensor>) -> Result<()> {
        if let Some(part) = contribution {
            self.parts[tile] = Some(match self.parts[tile].take() {
                None => part,
                Some(sum) => ops::add(&sum, &part)?,
            });
        }
        self.remaining[tile] = self.remaining[tile].saturating_sub(1);
        if self.remaining[tile] == 0 {
            self.place(tile)?;
        }
        Ok(())
    }

    /// Makes the complete gradient of `tile` a valid, dirty tile of the fresh carrier.
    fn place(&mut self, tile: usize) -> Result<()> {
        let grid = self.table.grid().clone();
        let shape = grid.tile_shape();
        let compact_layout = flat(shape, &column_major_strides(shape))?;
        let part = match self.parts[tile].take() {
            Some(part) => part,
            None => return Ok(()),
        };
        let compact = if part.offset() == 0
            && part.carrier().size() == grid.tile_size()
            && *part.layout() == compact_layout
        {
            part.carrier().clone()
        } else {
            compact_copy(&part)?.carrier().clone()
        };
        let (tier, carrier) = if !self.on_secondary {
            (Tier::Primary, compact)
        } else {
            let secondary = self.table.token(Tier::Secondary).carrier();
            if secondary.class() == compact.class() {
                (Tier::Secondary, compact)
            } else {
                let destination = secondary.allocate_like(grid.tile_size(), true, None, true)?;
                let moved = Tensor::new(compact, 0, flat(&[grid.tile_size()], &[1])?)
                    .and_then(|tile| move_to_scratch(&tile, &destination));
                if let Err(error) = moved {
                    let _ = destination.release();
                    return Err(error);
                }
                (Tier::Secondary, destination)
            }
        };
        let mut inner = self.table.lock();
        let entry = &mut inner.tiles[tile];
        entry.location = tier.location();
        entry.copy = Some(TileCopy::Own(carrier));
        entry.dirty = true;
        Ok(())
    }

    /// The finished gradient, laid out like `input`; the engine may keep it without a copy.
    fn finish(self, input: &Tensor) -> Result<Tensor> {
        let inner = self.table.lock();
        let incomplete = inner
            .tiles
            .iter()
            .position(|entry| entry.location == TileLocation::Invalid);
        drop(inner);
        if let Some(tile) = incomplete {
            let _ = self.fresh.release();
            return Err(Error::Runtime(format!(
                "the streamed backward left gradient tile {tile} without contents"
            )));
        }
        self.table.fresh_gradient.store(true, Ordering::SeqCst);
        Tensor::new(self.fresh, input.offset(), input.layout().clone())
    }
}

fn release_sinks(sinks: Vec<Option<Sink>>) {
    for sink in sinks.into_iter().flatten() {
        let _ = sink.fresh.release();
    }
}
