//! The shipped definition-free carriers. These carriers are closed:
//! a new carrier is a sibling type implementing
//! [`DefinitionFreeCarrier`](crate::carrier::DefinitionFreeCarrier), never a variant of these.
//! TiledEvictable, the one shipped definition-backed carrier, lives in the
//! `strideweave-tiled` crate and registers its `CarrierDefinition` through the public
//! [`extension`](crate::extension) surface.

mod block_device;
mod bulk_routes;
pub(crate) mod cpu;
mod evictable;
mod file_backed;
mod generic;
mod metal;

pub use block_device::{BlockDevice, BlockDeviceCarrier};
pub use cpu::{Cpu, CpuExport};
pub use evictable::Evictable;
pub use file_backed::FileBacked;
pub use generic::Generic;
pub use metal::Metal;
