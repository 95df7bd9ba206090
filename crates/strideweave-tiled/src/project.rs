//! `TiledEvictable::project`: gathering selected tiles into one dense compact tensor
//! (docs/tiers.md, project and scatter), and [`ProjectRule`], its backward rule.

use std::slice;

use crate::compact_map::CompactMap;
use crate::tile_copy::Tier;
use crate::tile_footprint::TileFootprint;
use crate::{AwaitProjection, TileLocation, TileResidency, TileSelection, TiledEvictable};
use strideweave_core::carrier::Carrier;
use strideweave_core::dtype::Value;
use strideweave_core::error::{Error, Result};
use strideweave_core::internal;
use strideweave_core::internal::{record_rule, BackwardRule};
use strideweave_core::tensor::Tensor;

/// Where the compact values go.
enum Target {
    /// A fresh carrier made by this prototype's factory (the primary tier).
    Fresh(Carrier),
    /// The caller's destination; `grow` when it is empty and grows to the compact size.
    Given { carrier: Carrier, grow: bool },
}

impl TiledEvictable {
    /// Starts gathering the tiles `selection` picks from `tensor` into one dense compact
    /// tensor and returns its completion handle (docs/tiers.md, project and scatter).
    ///
    /// The compact tensor has shape `count[a] · tile[a]` per axis (`count[a]` the indices
    /// the selection picks on axis `a`) and the canonical column-major layout, at offset 0 of
    /// its carrier. Compact coordinate `c` holds `tensor` at logical coordinate
    /// `per_axis[a][c_a / t_a] · t_a + c_a % t_a`: the tiles keep their order within each
    /// axis as the selection lists them, and an implicit tile gives zeros. The tiles are read
    /// through their valid copies; no residency, tile state or version of the TiledEvictable
    /// changes.
    ///
    /// `destination` defaults to a fresh carrier of the primary tier's class, made by the
    /// primary's public factory (`new_like`). A given destination is filled from slot 0 like
    /// a move destination: it must not be the TiledEvictable, must be live, unclaimed,
    /// mutable and unowned, of the tensor's dtype, with at least the compact size in slots or
    /// empty and growable; its version moves by exactly 1.
    ///
    /// When recording is on and `tensor` requires gradients, one `tiled.project` node (a
    /// gather) is recorded: its backward scatters the cotangent into a fresh implicit-zero
    /// TiledEvictable of the source's geometry (made by the source's factory), laid out like
    /// `tensor`; the gradients of several projections of one tensor sum.
    ///
    /// Errors returned here, in this order, with nothing changed: not a TiledEvictable tensor
    /// (Type); a released carrier (Runtime); a selection of another rank (Value) or a tile
    /// index outside the grid (Index); a tensor that is not tile-footprint compatible — see
    /// [`TiledEvictable::check_footprint`] (Value); an invalid selected tile (Runtime naming
    /// it); the destination checks above (Value for the TiledEvictable itself or a too-small
    /// destination, Runtime for released/claimed/immutable/owned, Type for the dtype).
    /// A failure while gathering — a tier read, a pending tile, the factory, a destination
    /// write — is the handle's outcome; it publishes nothing: no carrier is returned, a given
    /// destination keeps its values, size and version.
    ///
    /// ```
    /// use strideweave::carriers::{Generic, TileSelection, TiledEvictable};
    /// use strideweave::{DType, Shape, Tensor, Value};
    /// let values: Vec<Value> = (0..8).map(|i| Value::Float(i as f64)).collect();
    /// let primary = Generic::carrier(&values, DType::FLOAT32, true)?;
    /// let secondary = Generic::carrier(&[], DType::FLOAT32, true)?;
    /// let tiled = TiledEvictable::carrier(&primary, &secondary, &[4], &[2], None)?;
    /// let tensor = Tensor::compact(tiled, Shape::new(8)?)?;
    /// let selection = TileSelection::new(vec![vec![2, 0]])?;
    /// let compact = TiledEvictable::project(&tensor, &selection, None)?.wait()?;
    /// let expected: Vec<Value> = [4.0, 5.0, 0.0, 1.0].map(Value::Float).to_vec();
    /// assert_eq!(compact.to_values()?, expected);
    /// assert_eq!(compact.carrier().class(), primary.class());
    /// # Ok::<(), strideweave::Error>(())
    /// ```
    pub fn project(
        tensor: &Tensor,
        selection: &TileSelection,
        destination: Option<&Carrier>,
    ) -> Result<AwaitProjection> {
        let source = tensor.carrier();
        let table = TileResidency::table(source)?;
        internal::check_live(source, "project a TiledEvictable tensor")?;
        let map = CompactMap::new(table.grid(), selection)?;
        let footprint = TileFootprint::check(tensor, table.grid(), "project")?;
        {
            let inner = table.lock();
            let invalid = map
                .tiles()
                .into_iter()
                .find(|&t| inner.tiles[t].location == TileLocation::Invalid);
            if let Some(tile) = invalid {
                return Err(Error::Runtime(format!(
                    "cannot project tile {}: it is invalid (it has no valid copy to read)",
                    map.show_tile(tile)
                )));
            }
        }
        let target = match destination {
            Some(carrier) => Target::Given {
                carrier: carrier.clone(),
                grow: check_destination(carrier, tensor, map.size())?,
            },
            None => Target::Fresh(table.token(Tier::Primary).carrier().clone()),
        };
        let outcome = gather(tensor, &footprint, &map)
            .and_then(|values| publish(&target, &values))
            .and_then(|carrier| Tensor::compact(carrier, map.shape()?));
        if let Ok(compact) = &outcome {
            record_rule(
                "tiled.project",
                vec![tensor.clone()],
                slice::from_ref(compact),
                Box::new(ProjectRule { map, footprint }),
            );
        }
        Ok(AwaitProjection::finished(outcome))
    }

    /// Checks that `tensor` is tile-footprint compatible with its TiledEvictable, the
    /// precondition of every full-tensor TiledEvictable API (docs/tiers.md, Tile-footprint
    /// compatibility).
    ///
    /// Compatible: one top-level mode per grid axis, mode `a` of size `grid[a] · tile[a]`,
    /// and each logical tile (the coordinates `c` with `c / tile = T`) maps injectively onto
    /// exactly the slots of carrier tile `T`. A permutation within a tile is fine; a tile
    /// spanning into or remapped onto another carrier tile, aliasing (two coordinates on one
    /// slot) or a gap are Value errors naming the coordinate, the slot and the tiles. Not a
    /// TiledEvictable tensor: Type. Reads no slot and changes nothing.
    pub fn check_footprint(tensor: &Tensor) -> Result<()> {
        let table = TileResidency::table(tensor.carrier())?;
        TileFootprint::check(tensor, table.grid(), "a full-tensor TiledEvictable API").map(|_| ())
    }
}

/// The move-like checks of a given destination; whether it must grow.
fn check_destination(destination: &Carrier, tensor: &Tensor, size: usize) -> Result<bool> {
    if destination.same_as(tensor.carrier()) {
        return Err(Error::Value(
            "cannot project a TiledEvictable tensor into its own carrier".to_string(),
        ));
    }
    // Released, claimed by a pending move, immutable or owned by another carrier: Runtime.
    internal::check_writable(destination, "project into the destination")?;
    if destination.dtype() != tensor.dtype() {
        return Err(Error::Type(format!(
            "cannot project a {} tensor into a {} destination ({})",
            tensor.dtype(),
            destination.dtype(),
            destination.class()
        )));
    }
    let available = destination.size();
    if available >= size {
        return Ok(false);
    }
    if available == 0 && internal::grows_as_destination(destination) {
        return Ok(true);
    }
    Err(Error::Value(format!(
        "the {} destination has {available} slots but the projection needs {size}",
        destination.class()
    )))
}

/// The compact values, in canonical compact order, read through the tiles' valid copies.
fn gather(tensor: &Tensor, footprint: &TileFootprint, map: &CompactMap) -> Result<Vec<Value>> {
    let source = tensor.carrier();
    (0..map.size())
        .map(|ordinal| source.get(footprint.slot(&map.logical(ordinal))?))
        .collect()
}

/// Publishes `values` into the target: all of them, or nothing (a given destination gets
/// its previous values and size back; its version moves by 1 only on success).
fn publish(target: &Target, values: &[Value]) -> Result<Carrier> {
    let (carrier, grow) = match target {
        Target::Fresh(prototype) => return prototype.new_like(values, true, None),
        Target::Given { carrier, grow } => (carrier, *grow),
    };
    let normalized = values
        .iter()
        .map(|&v| carrier.dtype().normalize(v))
        .collect::<Result<Vec<Value>>>()?;
    if grow {
        internal::set_extent(carrier, values.len())?;
    }
    let shrink = |error: Error| {
        if grow {
            // Best effort: the write's error is the one to report.
            let _ = internal::set_extent(carrier, 0);
        }
        error
    };
    let previous = if grow {
        Vec::new()
    } else {
        (0..values.len())
            .map(|slot| carrier.get(slot))
            .collect::<Result<Vec<Value>>>()?
    };
    if !grow {
        internal::note_slots(carrier, 0..values.len());
    }
    for (slot, &value) in normalized.iter().enumerate() {
        if let Err(error) = internal::write_unversioned(carrier, slot, value) {
            for (back, &old) in previous.iter().enumerate().take(slot) {
                let _ = internal::write_unversioned(carrier, back, old);
            }
            return Err(shrink(error));
        }
    }
    internal::bump_version(carrier);
    Ok(carrier.clone())
}

/// The backward rule of `project`: the gather's transpose.
///
/// State: the compact map and the source's checked footprint. The cotangent (of the compact
/// shape: Value otherwise) is scattered into a fresh implicit-zero TiledEvictable made by the
/// source carrier's factory (same geometry, tier classes and policy), at the slots the source
/// tensor's layout gives the selected logical coordinates; unselected tiles stay implicit.
struct ProjectRule {
    map: CompactMap,
    footprint: TileFootprint,
}

impl BackwardRule for ProjectRule {
    fn backward(
        &self,
        inputs: &[Tensor],
        grad_outputs: &[Option<Tensor>],
    ) -> Result<Vec<Option<Tensor>>> {
        let (Some(source), Some(Some(g))) = (inputs.first(), grad_outputs.first()) else {
            return Ok(vec![None; inputs.len()]);
        };
        self.map
            .check_shape(g.shape(), "the cotangent of 'tiled.project'")?;
        let slots = self.footprint.grid().logical_size();
        let fresh = source.carrier().allocate_like(slots, true, None, false)?;
        let written = g
            .to_values()?
            .into_iter()
            .enumerate()
            .try_for_each(|(ordinal, value)| {
                let slot = self.footprint.slot(&self.map.logical(ordinal))?;
                fresh.set(slot, value)
            });
        if let Err(error) = written {
            let _ = fresh.release();
            return Err(error);
        }
        Ok(vec![Some(Tensor::new(
            fresh,
            source.offset(),
            source.layout().clone(),
        )?)])
    }
}
