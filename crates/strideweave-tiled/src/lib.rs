//! TiledEvictable, the one shipped definition-backed carrier, and its residency vocabulary
//! (docs/tiers.md, TiledEvictable): the carrier, tile states, tile selections and sets,
//! residency plans and policies, the residency facet and its completion handles.
//!
//! It is written against the public API of `strideweave-core` alone and registers its
//! `CarrierDefinition` through the public carrier extension, as any third-party carrier would;
//! users reach it as `strideweave::carriers::TiledEvictable`. Besides construction, element
//! access through the tiles and residency (promote/evict), it offers `project`/`scatter` and
//! the six central operations on tiled operands (a composite provider) with gradients,
//! streamed out of core with prefetch bounded by the policy's capacity and reported through
//! [`ResidencyPolicy::on_progress`]; the design is in `docs/tiled-design.md`.

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
