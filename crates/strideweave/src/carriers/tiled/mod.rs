//! TiledEvictable and its residency vocabulary (semantics-operations.md §5; issue #7,
//! deliverable 2, phase 1): the carrier, tile states, tile selections and sets, residency
//! plans and policies, the residency facet and its completion handle.
//!
//! Phase 1 covers construction, element access through the tiles, and residency
//! (promote/evict). `project`/`scatter`, tiled operations with gradients and out-of-core
//! prefetch follow; the design is in `docs/tiled-design.md`.

mod await_residency;
mod residency_facet;
mod residency_plan;
mod tile_copy;
mod tile_grid;
mod tile_selection;
mod tile_set;
mod tile_state;
mod tile_table;
mod tile_transfer;
mod tiled_definition;
mod tiled_evictable;
mod tiled_state;

pub use await_residency::AwaitResidency;
pub use residency_facet::TileResidency;
pub use residency_plan::{ResidencyPlan, ResidencyPolicy, ResidencyPurpose};
pub use tile_selection::TileSelection;
pub use tile_set::TileSet;
pub use tile_state::{TileLocation, TileState};
pub use tiled_evictable::TiledEvictable;
