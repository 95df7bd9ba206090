//! Shared helpers of the Gpu tests: a device when one exists, and host-side conversions.

#![allow(dead_code)]

use std::sync::Arc;

use strideweave::carriers::Cpu;
use strideweave::movement::move_to;
use strideweave::{DType, Error, ErrorKind, Result, Tensor, Value};
use strideweave_wgpu::{Gpu, GpuDevice};

/// The process-wide Gpu class, or `None` after printing `SKIPPED: <reason>` when this
/// machine has no adapter (CI installs Mesa's software Vulkan driver, so there it runs).
pub fn shared_gpu(test: &str) -> Option<Gpu> {
    match Gpu::shared() {
        Ok(gpu) => Some(gpu),
        Err(error) => skip(test, error),
    }
}

/// A Gpu class on a device of its own (for tests that inject faults or lose the device), or
/// `None` after printing `SKIPPED: <reason>`.
pub fn own_gpu(test: &str) -> Option<Gpu> {
    match GpuDevice::open().and_then(|device| Gpu::define(Arc::new(device))) {
        Ok(gpu) => Some(gpu),
        Err(error) => skip(test, error),
    }
}

fn skip(test: &str, error: Error) -> Option<Gpu> {
    assert_eq!(error.kind(), ErrorKind::NotImplemented, "{error}");
    println!("SKIPPED: {test}: {error}");
    None
}

/// The values of `t` as `f64`s (Float32 or Int32).
pub fn numbers(t: &Tensor) -> Result<Vec<f64>> {
    t.to_values()?
        .into_iter()
        .map(|v| match v {
            Value::Float(x) => Ok(x),
            Value::Int(x) => Ok(x as f64),
            other => Err(Error::Type(format!("not a number: {other:?}"))),
        })
        .collect()
}

/// `t` moved to a fresh CPU carrier through the Gpu → CPU route.
pub fn download(t: &Tensor) -> Result<Tensor> {
    let cpu = Cpu::carrier(t.carrier().size(), t.dtype(), true, false)?;
    move_to(t, &cpu)
}

/// A small deterministic generator (xorshift), so failures reproduce.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A value in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// A float in `[lo, hi)`, rounded to f32.
    pub fn float(&mut self, lo: f32, hi: f32) -> f32 {
        let unit = (self.next() >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * unit
    }
}

/// Float32 bits equal (NaN equal to NaN), for exact comparisons.
pub fn same_f32(a: f64, b: f64) -> bool {
    let (a, b) = (a as f32, b as f32);
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// The dtype's name, for messages.
pub fn dtype_name(dtype: DType) -> String {
    dtype.to_string()
}
