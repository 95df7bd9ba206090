//! Division: `divide`, per-mode `divide_tiler` and `zipped_divide`.

use crate::error::{brief, LayoutError, Result};
use crate::layout::Layout;
use crate::node::{as_mode, Node};

impl Layout {
    /// Logical division by a tile: `self ∘ (tile, complement(tile, size))`, a rank-2 layout
    /// whose first mode walks one tile and whose second walks the tiles
    /// (docs/layouts.md, Algebra).
    ///
    /// Fails when the tile is not injective, does not divide `self`'s size, or the
    /// composition is not a layout.
    pub fn divide(&self, tile: &Layout) -> Result<Layout> {
        let (this, brief_tile) = (brief(self), brief(tile));
        let context = |e: LayoutError| {
            LayoutError::new(format!("divide of Layout {this} by tile {brief_tile}: {e}"))
        };
        let rest = tile.complement(self.size()).map_err(context)?;
        let inner = Layout::from_modes(&[tile.clone(), rest])?;
        self.compose(&inner)?.into_layout().map_err(context)
    }

    /// Divides each leading mode by the matching tile: mode `i` becomes `(tile_i, rest_i)`;
    /// trailing modes are kept. Fails when there are more tiles than modes.
    pub fn divide_tiler(&self, tiles: &[Layout]) -> Result<Layout> {
        let modes = self.modes();
        let divided = self.divide_modes(&modes, tiles)?;
        let mut nodes: Vec<Node<_>> = divided.iter().map(|d| as_mode(d.nodes())).collect();
        nodes.extend(modes[tiles.len()..].iter().map(|m| as_mode(m.nodes())));
        Layout::from_nodes(&nodes)
    }

    /// Divides like [`Layout::divide_tiler`] and gathers the result as
    /// `((tiles…), (rests…), trailing…)`.
    ///
    /// ```
    /// use strideweave_layout::Layout;
    /// let a: Layout = "(8,6):(1,8)".parse()?;
    /// let zipped = a.zipped_divide(&["2:1".parse()?, "3:1".parse()?])?;
    /// assert_eq!(zipped.to_string(), "((2,3),(4,2)):((1,8),(2,24))");
    /// # Ok::<(), strideweave_layout::LayoutError>(())
    /// ```
    pub fn zipped_divide(&self, tiles: &[Layout]) -> Result<Layout> {
        let modes = self.modes();
        let divided = self.divide_modes(&modes, tiles)?;
        let mut tile_modes = Vec::new();
        let mut rest_modes = Vec::new();
        for d in &divided {
            tile_modes.push(d.mode(0)?);
            rest_modes.push(d.mode(1)?);
        }
        let mut nodes = vec![
            as_mode(Layout::from_modes(&tile_modes)?.nodes()),
            as_mode(Layout::from_modes(&rest_modes)?.nodes()),
        ];
        nodes.extend(modes[tiles.len()..].iter().map(|m| as_mode(m.nodes())));
        Layout::from_nodes(&nodes)
    }

    fn divide_modes(&self, modes: &[Layout], tiles: &[Layout]) -> Result<Vec<Layout>> {
        let this = brief(self);
        if tiles.len() > modes.len() {
            return Err(LayoutError::new(format!(
                "tiler of {} tiles is too long for rank-{} Layout {this}",
                tiles.len(),
                modes.len()
            )));
        }
        modes
            .iter()
            .zip(tiles)
            .map(|(mode, tile)| mode.divide(tile))
            .collect()
    }
}
