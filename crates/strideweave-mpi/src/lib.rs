//! Data-parallel collectives for StrideWeave over MPI (Open MPI through the `mpi` crate),
//! written only against StrideWeave's public API.
//!
//! - [`Mpi`]: MPI in this process (initialized once, finalized on drop) and its
//!   [`world`](Mpi::world) communicator.
//! - [`Communicator`]: ranks that run collectives together, each bounded by a timeout
//!   ([`STRIDEWEAVE_MPI_TIMEOUT`](TIMEOUT_VARIABLE), 60 s by default).
//! - [`all_reduce`] with [`Reduction::Sum`] or [`Reduction::Mean`]: the operation
//!   `mpi.all_reduce` on a tensor of any carrier that can move to the CPU, differentiable
//!   (its backward pass all-reduces the cotangents).
//! - [`average_gradients`]: the gradient exchange of data-parallel training, after
//!   `backward`, in one collective.
//! - [`MpiHost`]: the host-memory carrier class the operation runs on.
//! - [`Cluster`], [`ClusterMemory`] and [`ClusterLocal`]: cluster memory as a tier — a
//!   carrier class whose slots live in other ranks' memory, and the host-memory class that
//!   computes on this rank, the two tiers of a `TiledEvictable` that streams a tensor held
//!   by other ranks.
//!
//! Every collective first exchanges a small header, so ranks that pass different shapes,
//! dtypes or reductions each get an error saying what differed, and waits for its peers at
//! most the communicator's timeout: a rank that exited, crashed or is stuck makes the others
//! fail with an error naming it and the collective, never a hang. docs/distributed.md
//! describes the protocol, its limits, how to run it (`mpirun -n 4 …`) and how it maps onto
//! a cluster.
//!
//! ```no_run
//! use strideweave::{Shape, Tensor};
//! use strideweave_mpi::{all_reduce, Mpi, Reduction};
//! let mpi = Mpi::init()?;
//! let world = mpi.world();
//! let x = Tensor::from_f32(&[world.rank() as f32; 4], Shape::new(4)?)?;
//! let total = all_reduce(&x, Reduction::Sum, world)?;      // 0 + 1 + … on every rank
//! let n = world.size() as f32;
//! assert_eq!(total.to_f32_vec()?, [n * (n - 1.0) / 2.0; 4]);
//! # Ok::<(), strideweave::Error>(())
//! ```

mod all_reduce;
mod cluster;
mod communicator;
mod gradients;
mod host;
mod protocol;
mod registration;
mod runtime;

pub use all_reduce::{all_reduce, Reduction, OPERATION};
pub use cluster::{
    Cluster, ClusterLocal, ClusterMemory, LocalSlots, RemoteSlots, RequestKind, ServeSummary,
    ServerFault,
};
pub use communicator::{Communicator, FailPoint};
pub use gradients::average_gradients;
pub use host::{MpiHost, POOLED_BUFFERS, POOLED_BYTES, POOLED_MIN};
pub use runtime::{Mpi, DEFAULT_TIMEOUT, MAX_TIMEOUT, TIMEOUT_VARIABLE};
