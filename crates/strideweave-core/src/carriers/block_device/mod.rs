//! Block devices: [`BlockDevice`], a handle to an opened Linux block device node, and
//! [`BlockDeviceCarrier`], the storage-only carrier of Float32 slots it allocates
//! (docs/carriers.md, Block devices). Both stay on the definition-free legacy allocation path: the
//! device is a resource that makes carriers, not a carrier or a storage provider.
//!
//! ```text
//! BlockDevice (Arc) ── path, geometry, Mutex<State { file, fault, extents, live, bounce }>
//!     │  allocate(size): extent = size*4 rounded up to max(logical, physical) block,
//!     │                  first fit at the lowest free aligned address
//!     v
//! device bytes  [ extent A | free | extent B | free ........................ ]
//!                 ^ BlockDeviceCarrier { device, offset, extent, slots }
//!                   slot i = 4 bytes little-endian at offset + 4*i
//! ```
//!
//! Invariants:
//! 1. Every transfer is `O_DIRECT` I/O of whole logical blocks from an aligned bounce
//!    buffer, under the device lock; a slot write reads, modifies and writes its block.
//! 2. The first failed transfer faults the device for good: access and allocation then fail
//!    with a Runtime error, release and close still work.
//! 3. A carrier's extent is retired exactly once, by release or drop, under the device lock
//!    (so a release waits for a transfer in progress); free ranges merge on retirement.
//! 4. `live` counts carriers whose extent is not retired; the device closes only at 0.
//!
//! Files: `device.rs` (the handle and its I/O), `extents.rs` (the first-fit allocator),
//! `carrier.rs` (the carrier), `bounce.rs` (aligned staging memory), `sys.rs` (opening
//! and the geometry ioctls, the only `unsafe` code).

mod bounce;
mod carrier;
mod device;
mod extents;
pub(crate) mod routes;
mod sys;

pub use carrier::BlockDeviceCarrier;
pub use device::BlockDevice;
