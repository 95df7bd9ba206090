//! [`Work`]: how a tiled operation splits into work items over its operands' tiles, and
//! [`WorkState`], computing the items through the primary tier's public dispatch and
//! assembling the dense result.

use crate::tile_grid::{decode, encode};
use crate::tile_stream::{Fetch, TileStream};
use crate::tiled_operand::{column_major_strides, flat, TiledOperand};
use crate::tiled_operations::{call_options, tile_operands, work_kind};
use strideweave_core::carrier::Carrier;
use strideweave_core::dtype::DType;
use strideweave_core::error::{Error, Result};
use strideweave_core::internal;
use strideweave_core::operation::{call, Operand, OptionValue, ResolvedInvocation};
use strideweave_core::tensor::Tensor;

/// The three shapes of tiled work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WorkKind {
    /// `add`, `elementwise_mul`, `mul`, `relu`: one item per output tile, one call each.
    Elementwise,
    /// `reduce_sum`: one item per input tile; the partial sums of a row block combine.
    Reduce,
    /// `matmul`: one item per left-hand tile `(i, k)` with the right-hand tiles `(j, k)` of
    /// its contraction block; the partial products of an output tile combine.
    Matmul,
}

/// The planned work of one tiled operation.
///
/// Invariants: `items` lists the tiles of each item in the deterministic order of the left
/// (first) operand's tiles — first axis fastest, which is the order of the slots of a full
/// seed tier, so a FileBacked secondary is read front to back; `targets[n]` names the output
/// block (a canonical index over the output grid) each call of item `n` contributes to.
pub(crate) struct Work {
    kind: WorkKind,
    items: Vec<Vec<Fetch>>,
    targets: Vec<Vec<usize>>,
    out_shape: Vec<usize>,
    out_tile: Vec<usize>,
}

impl Work {
    /// Plans `invocation` over its tiled tensor operands; Value errors (before anything
    /// runs) for operands whose tilings do not line up.
    pub(crate) fn plan(invocation: &ResolvedInvocation, operands: &[TiledOperand]) -> Result<Work> {
        let name = invocation.call().definition().name();
        let builtin = invocation.call().definition().builtin();
        let kind = builtin.and_then(work_kind).ok_or_else(|| {
            Error::NotImplemented(format!("TiledEvictable does not execute '{name}'"))
        })?;
        match kind {
            WorkKind::Elementwise => Work::elementwise(name, operands),
            WorkKind::Reduce => Work::reduce(name, operands),
            WorkKind::Matmul => Work::matmul(name, operands),
        }
    }

    /// The items, in order.
    pub(crate) fn items(&self) -> &[Vec<Fetch>] {
        &self.items
    }

    /// The kind of work.
    pub(crate) fn kind(&self) -> WorkKind {
        self.kind
    }

    /// The output blocks item `index` contributes to (canonical indices over the output
    /// grid).
    pub(crate) fn targets(&self, index: usize) -> &[usize] {
        &self.targets[index]
    }

    /// The dense output's shape and its block (tile) shape.
    pub(crate) fn output_blocks(&self) -> (&[usize], &[usize]) {
        (&self.out_shape, &self.out_tile)
    }

    fn elementwise(name: &str, operands: &[TiledOperand]) -> Result<Work> {
        let rank = operands.first().map_or(0, |o| o.logical().len());
        if let Some(other) = operands.iter().find(|o| o.logical().len() != rank) {
            return Err(Error::Value(format!(
                "'{name}' on raw TiledEvictable operands needs one grid rank, got {rank} and {}",
                other.logical().len()
            )));
        }
        let out_shape: Vec<usize> = (0..rank)
            .map(|a| operands.iter().map(|o| o.logical()[a]).max().unwrap_or(1))
            .collect();
        let mut out_tile = vec![1; rank];
        for (a, &extent) in out_shape.iter().enumerate() {
            if extent == 1 {
                continue;
            }
            for operand in operands {
                let (logical, tile) = (operand.logical()[a], operand.tile_shape()[a]);
                if logical == 1 {
                    continue;
                }
                if logical != extent {
                    return Err(Error::Value(format!(
                        "'{name}' on raw TiledEvictable operands broadcasts whole top-level \
                         modes: mode {a} has sizes {logical} and {extent}"
                    )));
                }
                if out_tile[a] == 1 {
                    out_tile[a] = tile;
                } else if out_tile[a] != tile {
                    return Err(Error::Value(format!(
                        "'{name}' on raw TiledEvictable operands needs the operands tiled alike: \
                         axis {a} has tiles of {} and {tile}",
                        out_tile[a]
                    )));
                }
            }
        }
        let out_grid: Vec<usize> = out_shape
            .iter()
            .zip(&out_tile)
            .map(|(e, t)| e / t)
            .collect();
        let blocks: usize = out_grid.iter().product();
        let mut items = Vec::with_capacity(blocks);
        for block in 0..blocks {
            let coord = decode(block, &out_grid);
            let fetches = operands
                .iter()
                .enumerate()
                .map(|(k, operand)| {
                    let tile: Vec<usize> = coord
                        .iter()
                        .zip(operand.logical())
                        .map(|(&c, &logical)| if logical == 1 { 0 } else { c })
                        .collect();
                    (k, encode(&tile, operand.grid().grid_shape()))
                })
                .collect();
            items.push(fetches);
        }
        Ok(Work {
            kind: WorkKind::Elementwise,
            targets: (0..blocks).map(|b| vec![b]).collect(),
            items,
            out_shape,
            out_tile,
        })
    }

    fn reduce(name: &str, operands: &[TiledOperand]) -> Result<Work> {
        let [input] = operands else {
            return Err(Error::Value(format!("'{name}' takes one tensor")));
        };
        let (logical, tile) = two_modes(name, input)?;
        let rows = input.grid().grid_shape()[0];
        let tiles = input.grid().tile_count();
        Ok(Work {
            kind: WorkKind::Reduce,
            items: (0..tiles).map(|t| vec![(0, t)]).collect(),
            targets: (0..tiles).map(|t| vec![t % rows]).collect(),
            out_shape: vec![logical[0]],
            out_tile: vec![tile[0]],
        })
    }

    fn matmul(name: &str, operands: &[TiledOperand]) -> Result<Work> {
        let [lhs, rhs] = operands else {
            return Err(Error::Value(format!("'{name}' takes two tensors")));
        };
        let (l_logical, l_tile) = two_modes(name, lhs)?;
        let (r_logical, r_tile) = two_modes(name, rhs)?;
        if l_tile[1] != r_tile[1] {
            return Err(Error::Value(format!(
                "'{name}' on raw TiledEvictable operands contracts mode 1 tile by tile: the \
                 left tiles have {} columns, the right tiles {} (tile shapes {l_tile:?} and \
                 {r_tile:?})",
                l_tile[1], r_tile[1]
            )));
        }
        let (rows, columns) = (lhs.grid().grid_shape()[0], rhs.grid().grid_shape()[0]);
        let mut items = Vec::new();
        let mut targets = Vec::new();
        for t in 0..lhs.grid().tile_count() {
            let (i, k) = (t % rows, t / rows);
            let mut fetches = vec![(0, t)];
            fetches.extend((0..columns).map(|j| (1, j + columns * k)));
            items.push(fetches);
            targets.push((0..columns).map(|j| i + rows * j).collect());
        }
        Ok(Work {
            kind: WorkKind::Matmul,
            items,
            targets,
            out_shape: vec![l_logical[0], r_logical[0]],
            out_tile: vec![l_tile[0], r_tile[0]],
        })
    }

    /// The slots of one output block.
    pub(crate) fn block_slots(&self) -> usize {
        self.out_tile.iter().product()
    }

    /// The most slots of partial results the forward of this work holds at once on the
    /// primary tier's class beside its staged tiles (see [`WorkState::compute`]): an
    /// elementwise block until it is placed; for `reduce_sum` and `matmul` the partial sums
    /// of every output block begun so far plus, while a call combines into one, its
    /// partial and the new sum (a Float32 accumulator), or every partial kept for the final reduction plus
    /// one block's stacked copy and its sum (stacked accumulation).
    pub(crate) fn held_slots(&self, invocation: &ResolvedInvocation) -> usize {
        let blocks = match (self.kind, combine_of(invocation)) {
            (WorkKind::Elementwise, _) => 1,
            (_, Combine::Add) => {
                let mut open = std::collections::HashSet::new();
                let mut most = 0;
                for targets in &self.targets {
                    for &target in targets {
                        // Combining holds the old sum, the partial and the new sum.
                        let combining = usize::from(open.contains(&target));
                        open.insert(target);
                        most = most.max(open.len() + 2 * combining);
                    }
                }
                most
            }
            (_, Combine::Stack) => {
                let mut parts = vec![0; self.block_count()];
                for &target in self.targets.iter().flatten() {
                    parts[target] += 1;
                }
                let total: usize = parts.iter().sum();
                total + parts.iter().copied().max().unwrap_or(0) + 1
            }
        };
        blocks * self.block_slots()
    }

    fn block_count(&self) -> usize {
        self.out_shape
            .iter()
            .zip(&self.out_tile)
            .map(|(e, t)| e / t)
            .product()
    }

    /// The state computing this work for `invocation`, with results on `primary`'s class.
    pub(crate) fn start<'a>(
        &'a self,
        invocation: &'a ResolvedInvocation,
        primary: &'a Carrier,
    ) -> Result<WorkState<'a>> {
        let blocks = self.block_count();
        let combine = combine_of(invocation);
        Ok(WorkState {
            work: self,
            invocation,
            primary,
            combine,
            sums: vec![None; blocks],
            parts: vec![Vec::new(); blocks],
            assembled: None,
        })
    }
}

/// The two-mode geometry an operand of `reduce_sum` / `matmul` must have.
fn two_modes<'a>(name: &str, operand: &'a TiledOperand) -> Result<(&'a [usize], &'a [usize])> {
    if operand.logical().len() != 2 {
        return Err(Error::Value(format!(
            "'{name}' needs operands with exactly 2 top-level modes, got a TiledEvictable of \
             grid rank {}",
            operand.logical().len()
        )));
    }
    Ok((operand.logical(), operand.tile_shape()))
}

/// How the partial results of `invocation`'s output blocks combine.
fn combine_of(invocation: &ResolvedInvocation) -> Combine {
    if invocation.plan().accumulator_dtype() == Some(DType::FLOAT32) {
        Combine::Add
    } else {
        Combine::Stack
    }
}

/// How partial results of one output block combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Combine {
    /// Float32 accumulation: partials are added as they come (in any order, as the plan's
    /// `FLOATING` accumulation allows).
    Add,
    /// Float64 accumulation or exact integers: the partials are stacked and reduced once with
    /// the plan's own accumulation, so an integer total is checked only at its final
    /// narrowing and a Float64 accumulator sums the partials in Float64.
    Stack,
}

/// The state of one running tiled operation.
pub(crate) struct WorkState<'a> {
    work: &'a Work,
    invocation: &'a ResolvedInvocation,
    primary: &'a Carrier,
    combine: Combine,
    sums: Vec<Option<Tensor>>,
    parts: Vec<Vec<Tensor>>,
    /// The dense result being assembled block by block (more than one output block).
    assembled: Option<Carrier>,
}

impl WorkState<'_> {
    /// The accumulator option of the call, passed on to every per-tile call.
    fn options(&self) -> Vec<(&'static str, OptionValue)> {
        call_options(self.invocation)
    }

    fn blocks(&self) -> usize {
        self.sums.len()
    }

    /// Computes item `index` on its fetched `tiles`, counting in `stream`'s occupancy every
    /// partial result it holds on the primary tier's class: a call's output from the moment
    /// it exists, a partial sum (or kept partial) for as long as it lives; an elementwise
    /// block until it is placed in the result (the only block, which is the result, stays
    /// counted).
    pub(crate) fn compute(
        &mut self,
        index: usize,
        tiles: &[Tensor],
        stream: &TileStream<'_>,
    ) -> Result<()> {
        let name = self.invocation.call().definition().name();
        let targets = &self.work.targets[index];
        match self.work.kind {
            WorkKind::Elementwise => {
                let operands = tile_operands(self.invocation, tiles);
                let block = single(call(name, operands, &[])?)?;
                let slots = block.carrier().size();
                stream.hold(slots);
                let single_block = self.blocks() == 1;
                let placed = self.place(targets[0], block);
                if !single_block {
                    stream.let_go(slots);
                }
                placed
            }
            WorkKind::Reduce => {
                let partial = single(call(
                    name,
                    [Operand::Tensor(tiles[0].clone())],
                    &self.options(),
                )?)?;
                self.accumulate(targets[0], partial, stream)
            }
            WorkKind::Matmul => {
                let options = self.options();
                for (j, &target) in targets.iter().enumerate() {
                    let operands = [
                        Operand::Tensor(tiles[0].clone()),
                        Operand::Tensor(tiles[1 + j].clone()),
                    ];
                    let partial = single(call(name, operands, &options)?)?;
                    self.accumulate(target, partial, stream)?;
                }
                Ok(())
            }
        }
    }

    fn accumulate(&mut self, block: usize, partial: Tensor, stream: &TileStream<'_>) -> Result<()> {
        stream.hold(partial.carrier().size());
        match self.combine {
            Combine::Add => {
                let sum = match self.sums[block].take() {
                    None => partial,
                    Some(sum) => {
                        let gone = sum.carrier().size() + partial.carrier().size();
                        let new = single(call(
                            "add",
                            [Operand::Tensor(sum), Operand::Tensor(partial)],
                            &[],
                        )?)?;
                        stream.hold(new.carrier().size());
                        stream.let_go(gone);
                        new
                    }
                };
                self.sums[block] = Some(sum);
            }
            Combine::Stack => self.parts[block].push(partial),
        }
        Ok(())
    }

    /// The combined partials of `block`.
    fn combined(&mut self, block: usize) -> Result<Tensor> {
        if let Some(sum) = self.sums[block].take() {
            return Ok(sum);
        }
        let mut parts = std::mem::take(&mut self.parts[block]);
        if parts.len() == 1 {
            return Ok(parts.remove(0));
        }
        let first = parts.first().ok_or_else(|| {
            Error::Runtime(format!(
                "tiled work produced nothing for output block {block}"
            ))
        })?;
        let size = first.size();
        let count = parts.len();
        let stacked = self
            .primary
            .allocate_like(size * count, true, Some(first.dtype()), true)?;
        let whole = Tensor::new(stacked.clone(), 0, flat(&[size * count], &[1])?)?;
        for (k, part) in parts.iter().enumerate() {
            let source = Tensor::new(part.carrier().clone(), part.offset(), flat(&[size], &[1])?)?;
            stacked.scatter(&source, &whole, &flat(&[size], &[1])?, k * size)?;
        }
        let view = Tensor::new(stacked.clone(), 0, flat(&[size, count], &[1, size])?)?;
        let reduced = single(call(
            "reduce_sum",
            [Operand::Tensor(view)],
            &self.options(),
        )?);
        let _ = stacked.release();
        reduced
    }

    /// Puts the finished `block` into the result: kept as the result when it is the only
    /// block, otherwise scattered into the dense result carrier at its origin.
    fn place(&mut self, block: usize, tensor: Tensor) -> Result<()> {
        if self.blocks() == 1 {
            self.sums[0] = Some(tensor);
            return Ok(());
        }
        let spec = &self.invocation.results()[0];
        let out_shape = &self.work.out_shape;
        let carrier = match &self.assembled {
            Some(carrier) => carrier.clone(),
            None => {
                let fresh = self.primary.allocate_like(
                    spec.layout().cosize(),
                    true,
                    Some(spec.dtype()),
                    true,
                )?;
                self.assembled = Some(fresh.clone());
                fresh
            }
        };
        let out_tile = &self.work.out_tile;
        let out_grid: Vec<usize> = out_shape.iter().zip(out_tile).map(|(e, t)| e / t).collect();
        let origin: Vec<usize> = decode(block, &out_grid)
            .iter()
            .zip(out_tile)
            .map(|(c, t)| c * t)
            .collect();
        let strides = column_major_strides(out_shape);
        let whole = Tensor::new(carrier.clone(), 0, flat(out_shape, &strides)?)?;
        let source = Tensor::new(
            tensor.carrier().clone(),
            tensor.offset(),
            flat(out_tile, &column_major_strides(out_tile))?,
        )?;
        carrier.scatter(
            &source,
            &whole,
            &flat(out_tile, &strides)?,
            encode(&origin, out_shape),
        )
    }

    /// The dense result: every block combined and placed, laid out as the result spec says.
    pub(crate) fn finish(mut self) -> Result<Tensor> {
        if self.work.kind != WorkKind::Elementwise {
            for block in 0..self.blocks() {
                let combined = self.combined(block)?;
                self.place(block, combined)?;
            }
        }
        let spec = &self.invocation.results()[0];
        let carrier = match self.assembled.take() {
            Some(carrier) => carrier,
            None => self.sums[0]
                .take()
                .ok_or_else(|| Error::Runtime("tiled work produced no result".into()))?
                .carrier()
                .clone(),
        };
        internal::result_tensor(carrier, spec)
    }
}

/// The one result of a per-tile call.
pub(crate) fn single(mut results: Vec<Tensor>) -> Result<Tensor> {
    match results.len() {
        1 => Ok(results.remove(0)),
        n => Err(Error::Runtime(format!(
            "a per-tile call returned {n} results, expected 1"
        ))),
    }
}
