//! A GPU carrier for StrideWeave over [wgpu] (Vulkan, Metal, DX12), written only against the
//! public carrier extension (`strideweave::carriers::extension`), the way a third party adds
//! an accelerator.
//!
//! - [`GpuDevice`]: one adapter, device and queue; every fallible wgpu call runs inside error
//!   scopes and becomes a [`strideweave::Error`] (wgpu's default panicking handler is
//!   replaced), with fault injection for the failure paths.
//! - [`Gpu`]: an independent, definition-backed carrier class whose storage provider holds
//!   one device buffer per carrier (Float32, Int32 and Bool), whose kernel provider runs the JIT
//!   kernel patterns of the built-ins on a [`GpuInterface`], with the route Gpu → CPU and
//!   the [`GpuUpload`] facet (uploads are a facet because routes start at the defining
//!   class), and the route Gpu → [`GpuHost`].
//! - [`GpuHost`]: the host-side staging class paired with each Gpu class (32-bit words in
//!   host memory) with the routes GpuHost → Gpu, so that tier carriers can stream tiles onto
//!   the device (the secondary tier of an `Evictable` or `TiledEvictable` over a Gpu
//!   primary), and GpuHost → CPU.
//! - [`ReductionRule`]: when a device's reductions loop once per result instead of running
//!   as a tree (chosen by the device's kind, changeable per device).
//! - [`metal`]: the core's shipped `Metal` carriers over a Gpu class on wgpu's Metal backend
//!   (a NotImplemented error wherever wgpu finds no Metal adapter).
//! - [`GpuCompletion`]: the pending outcome of a queue submission (non-blocking `done` that
//!   polls, blocking `wait` on the submission index).
//!
//! ```no_run
//! use strideweave::movement::move_to;
//! use strideweave::carriers::Cpu;
//! use strideweave::{ops, DType, Shape};
//! use strideweave_wgpu::Gpu;
//! let gpu = Gpu::shared()?;                                   // NotImplemented without an adapter
//! let x = gpu.from_f32(&[1.0, -2.0, 3.0, -4.0], Shape::new(4)?)?;
//! let y = ops::relu(&ops::add(&x, &x)?)?;                     // two JIT kernels on the device
//! let back = move_to(&y, &Cpu::carrier(4, DType::FLOAT32, true, false)?)?;
//! assert_eq!(back.to_values()?.len(), 4);
//! # Ok::<(), strideweave::Error>(())
//! ```

mod carrier;
mod completion;
mod device;
mod host;
mod kernels;
pub mod metal;
mod reduction_rule;
mod storage;

pub use carrier::{Gpu, GpuInterface, GpuUpload, UploadHandle, INTERFACE_VERSION};
pub use completion::GpuCompletion;
pub use device::{AdapterSummary, Fault, FaultPoint, GpuDevice};
pub use host::{GpuHost, HostWords};
pub use reduction_rule::ReductionRule;
pub use storage::{stores, GpuSlots};
