//! TiledEvictable projections: for a class whose tensors are TiledEvictable tensors,
//! `project` gathers the selected tiles in the selection's order per axis and changes
//! nothing, and `TiledEvictable::scatter` writes a compact tensor into the selected tiles of
//! a fresh carrier — replacing or adding — whose other tiles are invalid, at version 1, with
//! the template unchanged (docs/tiers.md, project and scatter).
//!
//! With a tiling hook ([`CarrierFactory::tiled`](crate::CarrierFactory::tiled)) the suite
//! builds the geometries of [`GEOMETRIES`] — one, two and three grid axes, tiles of extent 1
//! beside wider ones, the last tile of every axis picked — over the class's own tiers.
//! Without one it checks the one-axis grid of the 6-element tensor the factory builds. A
//! TiledEvictable's logical extent is exactly `grid · tile` on every axis, so no tile is
//! ever partial; the edge cases are the last tiles, single-tile axes and thin tiles.

use strideweave::carriers::{ScatterReduction, TileLocation, TileSelection, TiledEvictable};
use strideweave::{Carrier, DType, Layout, Shape, Stride, Tensor, Value};

use crate::cases::generic_tensor;
use crate::support::{same_value, Check, Context, Result2, Snapshot};

/// One geometry the suite projects and scatters: grid, tile, and the tiles picked per axis
/// (in the order the compact tensor lists them).
pub(crate) struct Geometry {
    pub(crate) grid: &'static [usize],
    pub(crate) tile: &'static [usize],
    pub(crate) picks: &'static [&'static [usize]],
}

/// The geometries built through the tiling hook.
pub(crate) const GEOMETRIES: [Geometry; 4] = [
    Geometry {
        grid: &[3],
        tile: &[2],
        picks: &[&[2, 0]],
    },
    Geometry {
        grid: &[2, 3],
        tile: &[2, 1],
        picks: &[&[1], &[2, 0]],
    },
    Geometry {
        grid: &[3, 2],
        tile: &[1, 3],
        picks: &[&[2, 0], &[1]],
    },
    Geometry {
        grid: &[2, 2, 2],
        tile: &[1, 2, 1],
        picks: &[&[1], &[1, 0], &[1]],
    },
];

/// The colexicographic (first-mode-fastest) index of `coord` in `shape`.
fn colex(coord: &[usize], shape: &[usize]) -> usize {
    coord
        .iter()
        .zip(shape)
        .rev()
        .fold(0, |index, (&c, &e)| index * e + c)
}

/// The coordinate at colexicographic `index` of `shape`.
fn decode(mut index: usize, shape: &[usize]) -> Vec<usize> {
    shape
        .iter()
        .map(|&e| {
            let c = index % e;
            index /= e;
            c
        })
        .collect()
}

/// What a projection or scatter of one selection maps: the compact shape and, for each
/// compact coordinate, the logical coordinate it stands for.
pub(crate) struct CompactMap {
    pub(crate) logical: Vec<usize>,
    pub(crate) tile: Vec<usize>,
    pub(crate) picks: Vec<Vec<usize>>,
    pub(crate) compact: Vec<usize>,
}

impl CompactMap {
    pub(crate) fn new(grid: &[usize], tile: &[usize], picks: &[Vec<usize>]) -> CompactMap {
        CompactMap {
            logical: grid.iter().zip(tile).map(|(g, t)| g * t).collect(),
            tile: tile.to_vec(),
            picks: picks.to_vec(),
            compact: picks.iter().zip(tile).map(|(p, t)| p.len() * t).collect(),
        }
    }

    pub(crate) fn compact_size(&self) -> usize {
        self.compact.iter().product()
    }

    /// The logical coordinate of compact ordinal `ordinal` (colexicographic).
    pub(crate) fn logical_of(&self, ordinal: usize) -> Vec<usize> {
        decode(ordinal, &self.compact)
            .iter()
            .enumerate()
            .map(|(a, &c)| self.picks[a][c / self.tile[a]] * self.tile[a] + c % self.tile[a])
            .collect()
    }

    /// The colexicographic logical index of compact ordinal `ordinal`.
    pub(crate) fn logical_index(&self, ordinal: usize) -> usize {
        colex(&self.logical_of(ordinal), &self.logical)
    }

    /// Whether the tile at tile coordinate `tile` is selected.
    fn selected(&self, tile: &[usize]) -> bool {
        tile.iter().zip(&self.picks).all(|(t, p)| p.contains(t))
    }

    /// The tile coordinates of the grid, colexicographic.
    fn tiles(&self) -> Vec<Vec<usize>> {
        let grid: Vec<usize> = self
            .logical
            .iter()
            .zip(&self.tile)
            .map(|(l, t)| l / t)
            .collect();
        (0..grid.iter().product())
            .map(|i| decode(i, &grid))
            .collect()
    }
}

/// Checks that `compact`, the projection `what` of a tensor whose elements (colexicographic
/// over the logical shape) are `elements`, has the compact shape and holds the selected
/// tiles' elements in order.
pub(crate) fn verify_projection(
    cx: &Context<'_>,
    what: &str,
    map: &CompactMap,
    elements: &[Value],
    compact: &Tensor,
) -> Check {
    let extents = compact.shape().leaves().to_vec();
    cx.ensure(extents == map.compact, || {
        format!(
            "{what} has shape {extents:?}; the selection's count · tile per axis, {:?}, is due",
            map.compact
        )
    })?;
    let got = cx.ok(compact.to_values(), || format!("reading {what}"))?;
    cx.ensure(got.len() == map.compact_size(), || {
        format!(
            "{what} has {} elements, {} due",
            got.len(),
            map.compact_size()
        )
    })?;
    for (c, g) in got.iter().enumerate() {
        let want = elements[map.logical_index(c)];
        cx.ensure(same_value(g, &want), || {
            format!(
                "{what}: compact element {:?} is {g}, but it stands for the tensor's element \
                 {:?}, which is {want}",
                decode(c, &map.compact),
                map.logical_of(c)
            )
        })?;
    }
    Ok(())
}

/// Checks that `result`, the scatter `what` of `compact_values` into `template` (whose
/// elements are `elements`) with `reduction`, is a fresh carrier laid out like the template
/// at version 1, its selected tiles dirty on the primary tier holding the compact's values
/// (replaced, or added to the template's), its other tiles invalid.
pub(crate) fn verify_scattered(
    cx: &Context<'_>,
    what: &str,
    map: &CompactMap,
    (template, elements): (&Tensor, &[Value]),
    compact_values: &[Value],
    reduction: ScatterReduction,
    result: &Tensor,
) -> Check {
    let carrier = result.carrier();
    cx.ensure(!carrier.same_as(template.carrier()), || {
        format!("{what} wrote into the template's carrier, not a fresh one")
    })?;
    cx.ensure(
        result.layout() == template.layout() && result.offset() == template.offset(),
        || {
            format!(
                "{what} gave a tensor {}@{}, not laid out like the template {}@{}",
                result.layout(),
                result.offset(),
                template.layout(),
                template.offset()
            )
        },
    )?;
    cx.ensure(carrier.version() == 1, || {
        format!(
            "{what} gave a carrier at version {}; a scatter publishes once (version 1)",
            carrier.version()
        )
    })?;
    for tile in map.tiles() {
        let state = cx.ok(TiledEvictable::tile_state(carrier, &tile), || {
            format!("the state of tile {tile:?} after {what}")
        })?;
        if map.selected(&tile) {
            cx.ensure(
                state.location() == TileLocation::Primary && state.is_dirty(),
                || {
                    format!(
                        "after {what}, the selected tile {tile:?} is {:?} (dirty: {}); a \
                         scattered tile is dirty on the primary tier",
                        state.location(),
                        state.is_dirty()
                    )
                },
            )?;
        } else {
            cx.ensure(state.location() == TileLocation::Invalid, || {
                format!(
                    "after {what}, the unselected tile {tile:?} is {:?}; every tile a scatter \
                     does not select is invalid",
                    state.location()
                )
            })?;
        }
    }
    for (c, value) in compact_values.iter().enumerate() {
        let coord = map.logical_of(c);
        let want = match reduction {
            ScatterReduction::Add => add(elements[map.logical_index(c)], *value),
            _ => *value,
        };
        let slot = cx.ok(TiledEvictable::slot(carrier, &coord), || {
            format!("the slot of {coord:?} after {what}")
        })?;
        let got = cx.ok(carrier.get(slot), || {
            format!("reading element {coord:?} after {what}")
        })?;
        cx.ensure(same_value(&got, &want), || {
            format!(
                "after {what}, element {coord:?} is {got}, expected {want} (compact element \
                 {:?})",
                decode(c, &map.compact)
            )
        })?;
    }
    Ok(())
}

/// `a + b` for the values the suite generates (exact in binary32 and in Int32).
fn add(a: Value, b: Value) -> Value {
    match (a, b) {
        (Value::Int(a), Value::Int(b)) => Value::Int(a + b),
        (a, b) => Value::Float(a.as_f64().unwrap_or(f64::NAN) + b.as_f64().unwrap_or(f64::NAN)),
    }
}

fn unchanged(cx: &Context<'_>, what: &str, carrier: &Carrier, before: &Snapshot) -> Check {
    let after = cx.ok(Snapshot::of(carrier), || format!("reading after {what}"))?;
    match before.difference(&after) {
        Some(change) => Err(cx.broken(format!("{what} changed the carrier: {change}"))),
        None => Ok(()),
    }
}

/// Projects and scatters every geometry the class can build; returns whether its tensors are
/// TiledEvictable tensors.
pub(crate) fn tiled(cx: &mut Context<'_>, dtype: DType) -> Result2<bool> {
    let mut hooked = 0;
    for geometry in &GEOMETRIES {
        let size: usize = geometry
            .grid
            .iter()
            .zip(geometry.tile)
            .map(|(g, t)| g * t)
            .product();
        let values = cx.rng.values(dtype, size);
        let Some(built) = cx
            .factory
            .tiled(dtype, &values, geometry.grid, geometry.tile)
        else {
            break;
        };
        let carrier = cx.ok(built, || {
            format!(
                "the factory's TiledEvictable of grid {:?} and tile {:?}",
                geometry.grid, geometry.tile
            )
        })?;
        let picks: Vec<Vec<usize>> = geometry.picks.iter().map(|p| p.to_vec()).collect();
        check_geometry(cx, dtype, &carrier, geometry.grid, geometry.tile, &picks)?;
        hooked += 1;
    }
    if hooked > 0 {
        cx.ensure(hooked == GEOMETRIES.len(), || {
            format!(
                "the factory's tiling hook built {hooked} of the {} geometries and then \
                 answered none",
                GEOMETRIES.len()
            )
        })?;
        cx.notes.push(format!(
            "project and scatter (replace and add) through the tiling hook on grids {}",
            GEOMETRIES
                .iter()
                .map(|g| format!("{:?} of {:?} tiles", g.grid, g.tile))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        return Ok(true);
    }
    let values = cx.rng.values(dtype, 6);
    let dense = Layout::new(
        Shape::new(6).map_err(|e| cx.broken(e))?,
        Stride::new(1).map_err(|e| cx.broken(e))?,
    )
    .map_err(|e| cx.broken(e))?;
    let tensor = cx.ok(cx.factory.tensor(dtype, &values, 0, dense), || {
        "a tensor of the class".into()
    })?;
    let carrier = tensor.carrier().clone();
    let (Ok(grid), Ok(tile)) = (
        TiledEvictable::grid_shape(&carrier),
        TiledEvictable::tile_shape(&carrier),
    ) else {
        return Ok(false);
    };
    if grid.len() != 1 || grid[0] < 2 || TiledEvictable::check_footprint(&tensor).is_err() {
        cx.notes.push(format!(
            "project not run: the class's 6-element tensor has grid {grid:?}"
        ));
        return Ok(false);
    }
    check_geometry(cx, dtype, &carrier, &grid, &tile, &[vec![grid[0] - 1, 0]])?;
    cx.notes.push(format!(
        "project and scatter (replace and add) of tiles [{}, 0] of a TiledEvictable tensor \
         (grid {grid:?}, tile {tile:?}); the factory gives no tiling hook \
         (Factory::with_tiling), so no grid of more axes was built",
        grid[0] - 1
    ));
    Ok(true)
}

/// Project, replace-scatter and add-scatter `picks` of the TiledEvictable `carrier`, which
/// must have `grid` tiles of `tile`.
fn check_geometry(
    cx: &mut Context<'_>,
    dtype: DType,
    carrier: &Carrier,
    grid: &[usize],
    tile: &[usize],
    picks: &[Vec<usize>],
) -> Check {
    let built = (
        TiledEvictable::grid_shape(carrier),
        TiledEvictable::tile_shape(carrier),
    );
    cx.ensure(
        matches!(&built, (Ok(g), Ok(t)) if g == grid && t == tile),
        || {
            format!(
                "a carrier of grid {grid:?} and tile {tile:?} was asked for, a {} carrier with \
                 grid {:?} and tile {:?} was built",
                carrier.class(),
                built.0,
                built.1
            )
        },
    )?;
    let map = CompactMap::new(grid, tile, picks);
    let shape = Shape::flat(&map.logical).map_err(|e| cx.broken(e))?;
    let tensor = cx.ok(Tensor::compact(carrier.clone(), shape), || {
        "the compact tensor over the TiledEvictable".into()
    })?;
    let elements = cx.ok(tensor.to_values(), || "reading the tensor".into())?;
    let before = cx.ok(Snapshot::of(carrier), || "a snapshot".into())?;
    let selection = cx.ok(TileSelection::new(picks.to_vec()), || {
        format!("the tile selection {picks:?}")
    })?;
    let what = format!("project of tiles {picks:?} (grid {grid:?}, tile {tile:?})");
    let started = TiledEvictable::project(&tensor, &selection, None);
    let compact = cx.ok(started.and_then(|p| p.wait()), || what.clone())?;
    verify_projection(cx, &what, &map, &elements, &compact)?;
    unchanged(cx, &what, carrier, &before)?;

    let compact_shape = Shape::flat(&map.compact).map_err(|e| cx.broken(e))?;
    let compact_layout = Layout::column_major(compact_shape);
    let additive = dtype == DType::FLOAT32 || dtype == DType::INT32;
    for reduction in [ScatterReduction::Replace, ScatterReduction::Add] {
        if reduction == ScatterReduction::Add && !additive {
            continue;
        }
        let replacement = cx.rng.values(dtype, map.compact_size());
        let source = cx.ok(
            generic_tensor(dtype, &replacement, 0, compact_layout.clone()),
            || "a compact tensor".into(),
        )?;
        let what = format!(
            "TiledEvictable::scatter ({}) into tiles {picks:?} (grid {grid:?}, tile {tile:?})",
            reduction.name()
        );
        let started = TiledEvictable::scatter(&source, &tensor, &selection, reduction);
        let result = cx.ok(started.and_then(|s| s.wait()), || what.clone())?;
        verify_scattered(
            cx,
            &what,
            &map,
            (&tensor, &elements),
            &replacement,
            reduction,
            &result,
        )?;
        unchanged(cx, &what, carrier, &before)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    //! The verifiers break on results only a wrong TiledEvictable could give: the suite's
    //! broken tiers (tests/broken_tiers.rs) reach the others.

    use super::*;
    use crate::report::Promise;
    use crate::Factory;
    use strideweave::carriers::{Cpu, Generic};

    fn floats(xs: &[f64]) -> Vec<Value> {
        xs.iter().map(|&x| Value::Float(x)).collect()
    }

    fn generic() -> Factory {
        Factory::new("Probe", |dtype, values| {
            Generic::carrier(values, dtype, true)
        })
    }

    /// A TiledEvictable tensor over two CPU tiers holding `values` (all tiles on the primary).
    fn tiled(values: &[Value], grid: &[usize], tile: &[usize]) -> Tensor {
        let primary = Cpu::from_values(values, DType::FLOAT32, true).unwrap();
        let secondary = Cpu::carrier(0, DType::FLOAT32, true, false).unwrap();
        let carrier = TiledEvictable::carrier(&primary, &secondary, grid, tile, None).unwrap();
        let logical: Vec<usize> = grid.iter().zip(tile).map(|(g, t)| g * t).collect();
        Tensor::compact(carrier, Shape::flat(&logical).unwrap()).unwrap()
    }

    fn observed(check: Check) -> String {
        check.expect_err("the verifier should have broken").observed
    }

    #[test]
    fn a_projection_of_the_wrong_shape_or_order_breaks() {
        let factory = generic();
        let cx = Context::new(&factory, Promise::Scatter);
        // grid (2, 3) of (2, 1) tiles, tiles [[1], [2, 0]]: compact (2, 2).
        let map = CompactMap::new(&[2, 3], &[2, 1], &[vec![1], vec![2, 0]]);
        let elements = floats(&(0..12).map(f64::from).collect::<Vec<_>>());
        let right = generic_tensor(
            DType::FLOAT32,
            &floats(&[10.0, 11.0, 2.0, 3.0]),
            0,
            Layout::from_flat(&[2, 2], &[1, 2]).unwrap(),
        )
        .unwrap();
        verify_projection(&cx, "p", &map, &elements, &right).unwrap();
        let flat = generic_tensor(
            DType::FLOAT32,
            &floats(&[10.0, 11.0, 2.0, 3.0]),
            0,
            Layout::from_flat(&[4], &[1]).unwrap(),
        )
        .unwrap();
        assert_eq!(
            observed(verify_projection(&cx, "p", &map, &elements, &flat)),
            "Probe: p has shape [4]; the selection's count · tile per axis, [2, 2], is due"
        );
        // The second axis's tiles in grid order rather than the selection's.
        let unordered = generic_tensor(
            DType::FLOAT32,
            &floats(&[2.0, 3.0, 10.0, 11.0]),
            0,
            Layout::from_flat(&[2, 2], &[1, 2]).unwrap(),
        )
        .unwrap();
        assert_eq!(
            observed(verify_projection(&cx, "p", &map, &elements, &unordered)),
            "Probe: p: compact element [0, 0] is 2.0, but it stands for the tensor's element \
             [2, 2], which is 10.0"
        );
    }

    #[test]
    fn a_scatter_into_the_template_at_another_version_or_with_valid_unselected_tiles_breaks() {
        let factory = generic();
        let cx = Context::new(&factory, Promise::Scatter);
        let map = CompactMap::new(&[3], &[2], &[vec![2, 0]]);
        let elements = floats(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        let template = tiled(&elements, &[3], &[2]);
        let compact = floats(&[-4.0, -5.0, -0.5, -1.5]);
        let verify = |result: &Tensor| {
            observed(verify_scattered(
                &cx,
                "s",
                &map,
                (&template, &elements),
                &compact,
                ScatterReduction::Replace,
                result,
            ))
        };
        assert_eq!(
            verify(&template),
            "Probe: s wrote into the template's carrier, not a fresh one"
        );
        // A fully valid carrier with the scattered values, never written: version 0.
        let valid = tiled(&floats(&[-0.5, -1.5, 2.0, 3.0, -4.0, -5.0]), &[3], &[2]);
        assert_eq!(
            verify(&valid),
            "Probe: s gave a carrier at version 0; a scatter publishes once (version 1)"
        );
        valid.carrier().set(0, Value::Float(-0.5)).unwrap();
        assert_eq!(
            verify(&valid),
            "Probe: after s, the unselected tile [1] is Primary; every tile a scatter does not \
             select is invalid"
        );
    }

    #[test]
    fn a_scatter_whose_unselected_tile_stays_valid_or_whose_values_are_wrong_breaks() {
        let factory = generic();
        let cx = Context::new(&factory, Promise::Scatter);
        let elements = floats(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        let template = tiled(&elements, &[3], &[2]);
        let compact = floats(&[-4.0, -5.0]);
        let map = CompactMap::new(&[3], &[2], &[vec![2]]);
        let source = generic_tensor(
            DType::FLOAT32,
            &compact,
            0,
            Layout::from_flat(&[2], &[1]).unwrap(),
        )
        .unwrap();
        let selection = TileSelection::new(vec![vec![2]]).unwrap();
        let replaced =
            TiledEvictable::scatter(&source, &template, &selection, ScatterReduction::Replace)
                .unwrap()
                .wait()
                .unwrap();
        let verify = |map: &CompactMap, reduction, result: &Tensor| {
            verify_scattered(
                &cx,
                "s",
                map,
                (&template, &elements),
                &compact,
                reduction,
                result,
            )
        };
        verify(&map, ScatterReduction::Replace, &replaced).unwrap();
        // Checked as an add, the replaced values are wrong.
        assert_eq!(
            observed(verify(&map, ScatterReduction::Add, &replaced)),
            "Probe: after s, element [4] is -4.0, expected 0.0 (compact element [0])"
        );
        // Checked against a selection of tiles 2 and 1, tile 1 should have been scattered;
        // against tile 0 alone, tile 2 should be invalid.
        let wider = CompactMap::new(&[3], &[2], &[vec![2, 1]]);
        assert_eq!(
            observed(verify(&wider, ScatterReduction::Replace, &replaced)),
            "Probe: after s, the selected tile [1] is Invalid (dirty: false); a scattered tile \
             is dirty on the primary tier"
        );
        let other = CompactMap::new(&[3], &[2], &[vec![0]]);
        assert_eq!(
            observed(verify(&other, ScatterReduction::Replace, &replaced)),
            "Probe: after s, the selected tile [0] is Invalid (dirty: false); a scattered tile \
             is dirty on the primary tier"
        );
    }
}
