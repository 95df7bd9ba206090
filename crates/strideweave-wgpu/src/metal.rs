//! The core's shipped `Metal` carriers on wgpu's Metal backend.
//!
//! `strideweave::carriers::Metal` is a definition-free class whose carriers keep their slots in
//! a device carrier on the Metal adapter. This module opens that adapter (wgpu's Metal backend
//! only, [`GpuDevice::open_metal`]), defines a [`Gpu`] class on it once per process, and builds
//! Metal carriers over carriers of that class: they store in device buffers and compute with
//! the class's JIT kernels. wgpu builds its Metal backend for Apple targets only, so elsewhere
//! every call here is a NotImplemented error naming what is missing.
//!
//! Nothing here has run on an Apple GPU: the machines this crate is tested on have none. The
//! tests check the mechanism (`Metal::over` a Gpu carrier, on whatever adapter exists) and the
//! refusal where no Metal adapter exists.

use std::sync::{Arc, OnceLock};

use strideweave::carriers::Metal;
use strideweave::{Carrier, DType, Error, Result};

use crate::{Gpu, GpuDevice, GpuSlots};

/// The Gpu class on this machine's Metal adapter, defined on first use and shared after (the
/// same answer, success or error, every time).
///
/// # Errors
/// NotImplemented when wgpu finds no Metal adapter: "Metal needs an Apple GPU with the Metal
/// API; none was found (wgpu found no Metal adapter: …)"; the device's Runtime error when the
/// adapter refuses to open one.
pub fn metal_gpu() -> Result<Gpu> {
    static METAL: OnceLock<Result<Gpu>> = OnceLock::new();
    METAL
        .get_or_init(|| {
            let device = GpuDevice::open_metal().map_err(|error| match error {
                Error::NotImplemented(reason) => {
                    let wgpu = reason
                        .strip_prefix("no Metal adapter is available: ")
                        .unwrap_or(&reason);
                    Error::NotImplemented(format!(
                        "Metal needs an Apple GPU with the Metal API; none was found (wgpu \
                         found no Metal adapter: {wgpu})"
                    ))
                }
                other => other,
            })?;
            Gpu::define(Arc::new(device))
        })
        .clone()
}

/// A Metal carrier of `slots` zeroed slots of `dtype` (Float32, Int32 or Bool) on the Metal
/// adapter: a carrier of [`metal_gpu`]'s class, owned by the Metal carrier.
///
/// # Errors
/// As [`metal_gpu`]; Value for another dtype; Memory when the device cannot hold it.
pub fn metal_carrier(slots: usize, dtype: DType, mutable: bool) -> Result<Carrier> {
    let gpu = metal_gpu()?;
    let device = Carrier::create(gpu.class(), GpuSlots::default(), slots, dtype, mutable)?;
    Metal::over(&device).inspect_err(|_| {
        // Best effort: the refusal is the error to report.
        let _ = device.release();
    })
}
