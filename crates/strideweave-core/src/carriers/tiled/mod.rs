//! TiledEvictable and its residency vocabulary (docs/tiers.md, TiledEvictable; issue #7,
//! deliverable 2, phase 1): the carrier, tile states, tile selections and sets, residency
//! plans and policies, the residency facet and its completion handle.
//!
//! Phase 1 covers construction, element access through the tiles, and residency
//! (promote/evict). Phase 2a adds `project`/`scatter` (tile-footprint compatibility, the
//! compact map, their completion handles and gradients). Phase 2b adds the six central
//! operations on raw tiled operands (the composite provider, `tiled_operations.rs`) with
//! gradients, streamed out of core with prefetch bounded by the policy's capacity and
//! reported through [`ResidencyPolicy::on_progress`]; the design is in `docs/tiled-design.md`.

mod await_projection;
mod await_residency;
mod await_scatter;
mod capacity;
mod compact_map;
mod gradient_sink;
mod project;
mod residency_facet;
mod residency_plan;
mod scatter;
mod scatter_reduction;
mod tile_copy;
mod tile_footprint;
mod tile_grid;
mod tile_pins;
mod tile_progress;
mod tile_selection;
mod tile_set;
mod tile_state;
mod tile_stream;
mod tile_table;
mod tile_transfer;
mod tiled_accumulate;
mod tiled_backward;
mod tiled_definition;
mod tiled_evictable;
mod tiled_operand;
mod tiled_operations;
mod tiled_state;
mod tiled_update;
mod tiled_work;
mod when_pinned;

pub use await_projection::AwaitProjection;
pub use await_residency::AwaitResidency;
pub use await_scatter::AwaitScatter;
pub use residency_facet::TileResidency;
pub use residency_plan::{CapacityPolicy, ResidencyPlan, ResidencyPolicy, ResidencyPurpose};
pub use scatter_reduction::ScatterReduction;
pub use tile_progress::TileProgress;
pub use tile_selection::TileSelection;
pub use tile_set::TileSet;
pub use tile_state::{TileLocation, TileState};
pub use tiled_evictable::TiledEvictable;
pub use when_pinned::WhenPinned;
