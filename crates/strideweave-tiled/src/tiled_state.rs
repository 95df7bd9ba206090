//! [`TiledState`]: the provider-owned state of a TiledEvictable, and its [`StorageProvider`].

use std::sync::Arc;

use crate::capacity;
use crate::tile_copy::Tier;
use crate::tile_grid::TileGrid;
use crate::tile_table::{Seeding, TileTable};
use crate::ResidencyPolicy;
use strideweave_core::carrier::Carrier;
use strideweave_core::dtype::DType;
use strideweave_core::error::{Error, Result};
use strideweave_core::extension::{AllocationContents, StorageProvider};

/// The state a TiledEvictable's definition keeps per instance.
///
/// A constructed instance holds its [`TileTable`] (which owns the tiers). A *template* — the
/// fresh state the provider builds for the factories `new_like` / `allocate_like`
/// ([`TiledState::template`]) — holds only the tiers as prototypes; its `allocate` makes two
/// empty tiers with their own factories and starts every tile implicit.
pub(crate) struct TiledState {
    grid: TileGrid,
    table: Option<Arc<TileTable>>,
    template: Option<(Carrier, Carrier)>,
    policy: Option<Arc<dyn ResidencyPolicy>>,
}

impl TiledState {
    /// A template over the same tier prototypes (see the type's documentation): the
    /// configuration of this state (grid, tier prototypes, policy), none of its tiles.
    fn template(&self) -> TiledState {
        let template = match &self.table {
            Some(table) => Some((
                table.token(Tier::Primary).carrier().clone(),
                table.token(Tier::Secondary).carrier().clone(),
            )),
            None => self.template.clone(),
        };
        TiledState {
            grid: self.grid.clone(),
            table: None,
            template,
            policy: self.policy.clone(),
        }
    }
}

impl TiledState {
    /// The state of an instance being constructed over `table`.
    pub(crate) fn configured(table: TileTable) -> TiledState {
        let table = Arc::new(table);
        capacity::register(&table);
        TiledState {
            grid: table.grid().clone(),
            policy: table.policy().cloned(),
            table: Some(table),
            template: None,
        }
    }

    /// The instance's tile table; Runtime for a template that was never allocated.
    pub(crate) fn table(&self) -> Result<&Arc<TileTable>> {
        self.table.as_ref().ok_or_else(|| {
            Error::Runtime("the TiledEvictable state has no tiles allocated".to_string())
        })
    }

    /// The two tier carriers (owned tiers, or a template's prototypes).
    fn tiers(&self) -> Option<(&Carrier, &Carrier)> {
        match (&self.table, &self.template) {
            (Some(table), _) => Some((
                table.token(Tier::Primary).carrier(),
                table.token(Tier::Secondary).carrier(),
            )),
            (None, Some((primary, secondary))) => Some((primary, secondary)),
            (None, None) => None,
        }
    }

    /// Seed scenario "Derive composite dtype support from configured tiers": the identity
    /// intersection of the two tiers' storage dtypes.
    /// A tier's failing answer propagates (it never reads as "not supported").
    fn supports(&self, dtype: DType) -> Result<bool> {
        let Some((primary, secondary)) = self.tiers() else {
            return Ok(false);
        };
        Ok(primary.supports_storage_dtype(dtype)? && secondary.supports_storage_dtype(dtype)?)
    }

    fn allocate(&mut self, slots: usize, dtype: DType) -> Result<()> {
        let logical = self.grid.logical_size();
        if slots != logical {
            return Err(Error::Value(format!(
                "a TiledEvictable with grid_shape {:?} and tile_shape {:?} has {logical} slots, \
                 not {slots}",
                self.grid.grid_shape(),
                self.grid.tile_shape()
            )));
        }
        if self.table.is_some() {
            return Ok(());
        }
        let Some((primary, secondary)) = self.template.clone() else {
            return Err(Error::Runtime(
                "a TiledEvictable template has no tiers to allocate from".to_string(),
            ));
        };
        // Fresh tiers of the requested dtype, which a factory may change (both tiers store
        // it: the framework asked `supports_dtype`, the intersection of theirs, first).
        let primary = primary.allocate_like(0, true, Some(dtype), false)?;
        let secondary = match secondary.allocate_like(0, true, Some(dtype), false) {
            Ok(secondary) => secondary,
            Err(error) => {
                // Give the fresh primary back: a failed factory call leaves nothing behind.
                let _ = primary.release();
                return Err(error);
            }
        };
        let tokens = primary
            .claim_ownership()
            .and_then(|p| Ok((p, secondary.claim_ownership()?)));
        let (primary_token, secondary_token) = match tokens {
            Ok(tokens) => tokens,
            Err(error) => {
                let _ = primary.release();
                let _ = secondary.release();
                return Err(error);
            }
        };
        let table = Arc::new(TileTable::new(
            self.grid.clone(),
            primary_token,
            secondary_token,
            self.policy.clone(),
            Seeding::Implicit,
        ));
        capacity::register(&table);
        self.table = Some(table);
        Ok(())
    }
}

impl TiledState {
    /// The contents of a factory allocation (docs/tiers.md, Construction and geometry):
    /// `allocate_like(.., empty = false)` keeps every tile implicit (reading zero, with no
    /// storage and no write per slot); `empty = true` makes every tile invalid, so reading
    /// one before it is given contents is a Runtime error naming the tile.
    fn allocation_contents(&mut self, contents: AllocationContents) -> Result<()> {
        match contents {
            AllocationContents::Zeroed => Ok(()),
            AllocationContents::Unspecified => self.table()?.invalidate_all(),
        }
    }
}

/// The storage provider of the TiledEvictable definition: slots are read from and written to
/// the valid copy of their tile (see `TileTable`).
pub(crate) fn tiled_storage() -> StorageProvider {
    StorageProvider::new_fallible(
        |state: &TiledState, dtype| state.supports(dtype),
        |state: &TiledState| {
            Ok(state
                .table
                .as_ref()
                .map_or(0, |table| table.grid().logical_size() as i64))
        },
        TiledState::allocate,
        |state: &mut TiledState| match &state.table {
            Some(table) => table.release(),
            None => Ok(()),
        },
        |state: &TiledState, slot| state.table()?.read(slot),
        |state: &mut TiledState, slot, value| state.table()?.write(slot, value),
        |prototype: &TiledState| Ok(prototype.template()),
    )
    .with_allocation_contents(TiledState::allocation_contents)
}
