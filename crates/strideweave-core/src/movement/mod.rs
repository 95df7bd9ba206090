//! Movement: copying a tensor to another carrier and releasing the source
//! (docs/movement.md), and its non-destructive sibling.
//!
//! Routes are chosen by the exact `(source class, destination class)` pair in the
//! [`registry`]; a pair without a registered [`MoveOperation`] uses
//! [`ElementwiseMoveOperation`]. A definition-backed source class moves by its definition's
//! exact `TransferRoute` when it has one ([`move_async`]).
//!
//! [`copy_async`] / [`copy_to`] use the same route selection and transfer but commit without
//! releasing the source: the way to read a region of a carrier in bulk into another class
//! (a tile of a FileBacked tier into a CPU carrier, for instance) without destroying it.

mod asynchronous;
mod blocking;
mod copy;
mod elementwise;
mod operation;
pub mod registry;
mod reverse;
mod unrouted;

pub use asynchronous::{move_async, MoveHandle};
pub use blocking::move_to;
pub use copy::{copy_async, copy_to, copy_to_scratch, move_async_to_scratch, move_to_scratch};
pub use elementwise::ElementwiseMoveOperation;
pub(crate) use operation::SlotJournal;
pub use operation::{MoveOperation, MoveTarget};
pub use registry::{register_move_operation, registered_move_operation, unregister_move_operation};
pub(crate) use reverse::check_route_back;
