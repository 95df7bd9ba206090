//! `TiledEvictable::scatter`: writing a compact tensor's tiles into a fresh TiledEvictable
//! shaped like a template (docs/tiers.md, project and scatter), and [`ScatterRule`], its backward
//! rule.

use std::slice;

use crate::compact_map::CompactMap;
use crate::tile_copy::{Tier, TileCopy};
use crate::tile_footprint::{tile_of, TileFootprint};
use crate::tile_grid::decode;
use crate::{
    AwaitScatter, ScatterReduction, TileLocation, TileResidency, TileSelection, TiledEvictable,
};
use strideweave_core::carrier::Carrier;
use strideweave_core::dtype::{DType, Value};
use strideweave_core::error::{Error, Result};
use strideweave_core::internal;
use strideweave_core::internal::{record_rule, BackwardRule};
use strideweave_core::tensor::Tensor;

impl TiledEvictable {
    /// Starts scattering the compact tensor `compact` into the tiles `selection` picks of a
    /// **fresh** TiledEvictable shaped like `template`, and returns its completion handle
    /// (docs/tiers.md, project and scatter).
    ///
    /// The fresh TiledEvictable has the template's geometry, tier classes and policy; its
    /// tiers are fresh carriers of the template tiers' factories (the template carrier's
    /// factory). Compact coordinate `c` goes to logical coordinate
    /// `per_axis[a][c_a / t_a] · t_a + c_a % t_a` of the result, which is laid out like
    /// `template` (same offset and layout). Every selected tile is valid and dirty on the
    /// primary tier, holding the compact's values ([`ScatterReduction::Replace`]) or the
    /// template's values plus the compact's ([`ScatterReduction::Add`]); every **unselected
    /// tile is invalid**. The fresh carrier's version is 1 (one publication); the template and
    /// the compact are only read.
    ///
    /// When recording is on and `compact` or `template` requires gradients, one
    /// `tiled.scatter` node is recorded. Given the cotangent `g` (laid out like the result):
    /// `compact` receives the gather of `g` over the selected tiles (in fresh storage of the
    /// compact's class); `template` receives `g` except on replaced tiles — zero there for
    /// `Replace`, `g` for `Add` — in a fresh implicit-zero TiledEvictable made by the
    /// template's factory.
    ///
    /// Errors returned here, in this order, with nothing changed: `template` not a
    /// TiledEvictable tensor (Type); a released template or compact carrier (Runtime); a
    /// selection of another rank (Value) or a tile index outside the grid (Index); a template
    /// that is not tile-footprint compatible (Value); a compact not of the compact shape
    /// `count · tile` per axis (Value); dtypes that differ (Type); for `Add`, an invalid
    /// selected template tile (Runtime naming it). A failure while scattering — reading the
    /// compact or the template, a tier factory, an integer overflow — is the handle's
    /// outcome and publishes nothing: every carrier made so far is released and no tile state
    /// or version changes anywhere.
    ///
    /// ```
    /// use strideweave::carriers::{Generic, ScatterReduction, TileLocation, TileSelection, TiledEvictable};
    /// use strideweave::{DType, Shape, Tensor, Value};
    /// let values: Vec<Value> = (0..8).map(|i| Value::Float(i as f64)).collect();
    /// let primary = Generic::carrier(&values, DType::FLOAT32, true)?;
    /// let secondary = Generic::carrier(&[], DType::FLOAT32, true)?;
    /// let tiled = TiledEvictable::carrier(&primary, &secondary, &[4], &[2], None)?;
    /// let template = Tensor::compact(tiled, Shape::new(8)?)?;
    /// let compact = Tensor::compact(
    ///     Generic::carrier(&[Value::Float(-1.0), Value::Float(-2.0)], DType::FLOAT32, true)?,
    ///     Shape::new(2)?,
    /// )?;
    /// let selection = TileSelection::new(vec![vec![1]])?;
    /// let added = TiledEvictable::scatter(&compact, &template, &selection, ScatterReduction::Add)?
    ///     .wait()?;
    /// assert_eq!(added.carrier().get(2)?, Value::Float(1.0)); // 2 + -1
    /// assert_eq!(added.carrier().version(), 1);
    /// let state = TiledEvictable::tile_state(added.carrier(), &[0])?;
    /// assert_eq!(state.location(), TileLocation::Invalid);
    /// # Ok::<(), strideweave::Error>(())
    /// ```
    pub fn scatter(
        compact: &Tensor,
        template: &Tensor,
        selection: &TileSelection,
        reduction: ScatterReduction,
    ) -> Result<AwaitScatter> {
        let base = template.carrier();
        let table = TileResidency::table(base)?;
        internal::check_live(base, "scatter into the tiles of a TiledEvictable template")?;
        internal::check_live(
            compact.carrier(),
            "scatter a compact tensor into a TiledEvictable",
        )?;
        let map = CompactMap::new(table.grid(), selection)?;
        let footprint = TileFootprint::check(template, table.grid(), "scatter")?;
        map.check_shape(compact.shape(), "the compact tensor of scatter")?;
        if compact.dtype() != template.dtype() {
            return Err(Error::Type(format!(
                "scatter needs a compact tensor of the template's dtype {}, got {} ({})",
                template.dtype(),
                compact.dtype(),
                compact.carrier().class()
            )));
        }
        if reduction == ScatterReduction::Add {
            let inner = table.lock();
            let invalid = map
                .tiles()
                .into_iter()
                .find(|&t| inner.tiles[t].location == TileLocation::Invalid);
            if let Some(tile) = invalid {
                return Err(Error::Runtime(format!(
                    "cannot scatter with reduction \"add\" into tile {}: the template's tile is \
                     invalid (it has no valid copy to add to)",
                    map.show_tile(tile)
                )));
            }
        }
        let outcome = tile_values(compact, template, &footprint, &map, reduction)
            .and_then(|tiles| publish(base, &footprint, tiles))
            .and_then(|carrier| Tensor::new(carrier, template.offset(), template.layout().clone()));
        if let Ok(scattered) = &outcome {
            record_rule(
                "tiled.scatter",
                vec![compact.clone(), template.clone()],
                slice::from_ref(scattered),
                Box::new(ScatterRule {
                    map,
                    footprint,
                    reduction,
                }),
            );
        }
        Ok(AwaitScatter::finished(outcome))
    }
}

/// The contents of every selected tile, `(tile index, values by local index)`, in compact
/// order; reads the compact and (for `Add`) the template, writes nothing.
fn tile_values(
    compact: &Tensor,
    template: &Tensor,
    footprint: &TileFootprint,
    map: &CompactMap,
    reduction: ScatterReduction,
) -> Result<Vec<(usize, Vec<Value>)>> {
    let grid = footprint.grid();
    let tiles = map.tiles();
    let mut position = vec![None; grid.tile_count()];
    for (k, &tile) in tiles.iter().enumerate() {
        position[tile] = Some(k);
    }
    let mut contents: Vec<Vec<Option<Value>>> = vec![vec![None; grid.tile_size()]; tiles.len()];
    for (ordinal, value) in compact.to_values()?.into_iter().enumerate() {
        let slot = footprint.slot(&map.logical(ordinal))?;
        let (tile, local) = grid.split(slot);
        let value = match reduction {
            ScatterReduction::Replace => value,
            ScatterReduction::Add => add(template.carrier().get(slot)?, value, template.dtype())?,
        };
        // The footprint puts every selected coordinate's slot in its own (selected) tile.
        if let Some(k) = position[tile] {
            contents[k][local] = Some(value);
        }
    }
    tiles
        .into_iter()
        .zip(contents)
        .map(|(tile, values)| {
            let values = values.into_iter().collect::<Option<Vec<Value>>>();
            values.map(|v| (tile, v)).ok_or_else(|| {
                Error::Runtime(format!(
                    "scatter left a slot of tile {} unfilled (the template's footprint is not a \
                     bijection)",
                    map.show_tile(tile)
                ))
            })
        })
        .collect()
}

/// `a + b` in `dtype`'s arithmetic (Float32 rounds once on storage; Int32 is checked).
fn add(a: Value, b: Value, dtype: DType) -> Result<Value> {
    match (a, b) {
        (Value::Float(x), Value::Float(y)) => Ok(Value::Float(x + y)),
        (Value::Int(x), Value::Int(y)) => x.checked_add(y).map(Value::Int).ok_or_else(|| {
            Error::Overflow(format!(
                "scatter with reduction \"add\" overflows {dtype}: {x} + {y}"
            ))
        }),
        (a, b) => Err(Error::Type(format!(
            "scatter with reduction \"add\" cannot add {a:?} and {b:?} of dtype {dtype}"
        ))),
    }
}

/// Makes the fresh TiledEvictable from `base`'s factory and installs the selected tiles as
/// dirty own copies on its primary tier (everything else invalid), then publishes it with one
/// version bump. On failure every carrier made here is released and nothing is returned.
fn publish(
    base: &Carrier,
    footprint: &TileFootprint,
    tiles: Vec<(usize, Vec<Value>)>,
) -> Result<Carrier> {
    let grid = footprint.grid();
    let fresh = base.allocate_like(grid.logical_size(), true, None, true)?;
    let table = TileResidency::table(&fresh)?;
    let primary = table.token(Tier::Primary).carrier().clone();
    let mut made: Vec<(usize, Carrier)> = Vec::with_capacity(tiles.len());
    for (tile, values) in tiles {
        match primary.new_like(&values, true, None) {
            Ok(copy) => made.push((tile, copy)),
            Err(error) => {
                for (_, copy) in &made {
                    let _ = copy.release();
                }
                let _ = fresh.release();
                return Err(error);
            }
        }
    }
    {
        let mut inner = table.lock();
        for entry in inner.tiles.iter_mut() {
            entry.location = TileLocation::Invalid;
            entry.copy = None;
            entry.dirty = false;
        }
        for (tile, copy) in made {
            let entry = &mut inner.tiles[tile];
            entry.location = TileLocation::Primary;
            entry.copy = Some(TileCopy::Own(copy));
            entry.dirty = true;
        }
    }
    internal::bump_version(&fresh);
    Ok(fresh)
}

/// The backward rule of `scatter`.
///
/// State: the compact map, the template's checked footprint (the result's layout) and the
/// reduction. The cotangent `g` (of the template's shape: Value otherwise) gives the compact
/// the gather of `g` over the selected tiles, and the template `g` with the replaced tiles
/// zeroed (`Replace`) or untouched (`Add`); an input that does not require gradients gets
/// none.
struct ScatterRule {
    map: CompactMap,
    footprint: TileFootprint,
    reduction: ScatterReduction,
}

impl BackwardRule for ScatterRule {
    fn backward(
        &self,
        inputs: &[Tensor],
        grad_outputs: &[Option<Tensor>],
    ) -> Result<Vec<Option<Tensor>>> {
        let (Some(compact), Some(template), Some(Some(g))) =
            (inputs.first(), inputs.get(1), grad_outputs.first())
        else {
            return Ok(vec![None; inputs.len()]);
        };
        if g.shape() != template.shape() {
            return Err(Error::Value(format!(
                "the cotangent of 'tiled.scatter' must have the template's Shape {}, got {}",
                template.shape(),
                g.shape()
            )));
        }
        // `g`'s ordinals are canonical logical ordinals: its top-level modes are the
        // logical axes.
        let g_values = g.to_values()?;
        let compact_grad = if compact.requires_grad() {
            let gathered: Vec<Value> = (0..self.map.size())
                .map(|ordinal| g_values[self.map.logical_ordinal(ordinal)])
                .collect();
            let carrier = compact
                .carrier()
                .new_like(&gathered, true, Some(compact.dtype()))?;
            Some(Tensor::compact(carrier, compact.shape().clone())?)
        } else {
            None
        };
        let template_grad = if template.requires_grad() {
            Some(self.template_grad(template, &g_values)?)
        } else {
            None
        };
        Ok(vec![compact_grad, template_grad])
    }
}

impl ScatterRule {
    /// `g` (its values by logical ordinal) without the replaced tiles, in a fresh
    /// implicit-zero TiledEvictable of the template's factory, laid out like the template.
    fn template_grad(&self, template: &Tensor, g_values: &[Value]) -> Result<Tensor> {
        let grid = self.footprint.grid();
        let mut replaced = vec![false; grid.tile_count()];
        if self.reduction == ScatterReduction::Replace {
            for tile in self.map.tiles() {
                replaced[tile] = true;
            }
        }
        let fresh = template
            .carrier()
            .allocate_like(grid.logical_size(), true, None, false)?;
        let written = g_values
            .iter()
            .enumerate()
            .try_for_each(|(ordinal, &value)| {
                let coord = decode(ordinal, grid.logical_shape());
                if replaced[tile_of(&coord, grid)] {
                    return Ok(());
                }
                fresh.set(self.footprint.slot(&coord)?, value)
            });
        if let Err(error) = written {
            let _ = fresh.release();
            return Err(error);
        }
        Tensor::new(fresh, template.offset(), template.layout().clone())
    }
}
