//! The shipped carriers. All but [`TiledEvictable`] are definition-free and closed: a new
//! carrier is a sibling type implementing
//! [`DefinitionFreeCarrier`](crate::carrier::DefinitionFreeCarrier), never a variant of these.
//! [`TiledEvictable`] is the one shipped definition-backed carrier; it registers its
//! `CarrierDefinition` through the public [`extension`] surface.

mod block_device;
pub(crate) mod cpu;
mod evictable;
pub mod extension;
mod file_backed;
mod generic;
mod metal;
mod tier_pair;
mod tiled;

pub use block_device::{BlockDevice, BlockDeviceCarrier};
pub use cpu::{Cpu, CpuExport};
pub use evictable::Evictable;
pub use file_backed::FileBacked;
pub use generic::Generic;
pub use metal::Metal;
pub use tiled::{
    AwaitProjection, AwaitResidency, AwaitScatter, CapacityPolicy, ResidencyPlan, ResidencyPolicy,
    ResidencyPurpose, ScatterReduction, TileLocation, TileProgress, TileResidency, TileSelection,
    TileSet, TileState, TiledEvictable, WhenPinned,
};
