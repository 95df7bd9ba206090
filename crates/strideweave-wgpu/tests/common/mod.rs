//! Shared helpers of the Gpu tests: a device when one exists, and host-side conversions.

#![allow(dead_code)]

use std::sync::Arc;

use strideweave::carriers::Cpu;
use strideweave::movement::move_to;
use strideweave::operation::Operand;
use strideweave::{DType, Error, ErrorKind, Layout, Result, Shape, Tensor, Value};
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

/// The process-wide Gpu class when its device computes in binary64, or `None` after printing
/// `SKIPPED: <reason>` (no adapter, or one without binary64 shader arithmetic).
pub fn f64_gpu(test: &str) -> Option<Gpu> {
    let gpu = shared_gpu(test)?;
    if gpu.device().computes_f64() {
        return Some(gpu);
    }
    println!(
        "SKIPPED: {test}: {} has no binary64 shader arithmetic",
        gpu.device().adapter()
    );
    None
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

/// `operands` with every tensor replaced by its upload to `gpu` (scalars as they are).
pub fn upload_operands(gpu: &Gpu, operands: &[Operand]) -> Result<Vec<Operand>> {
    operands
        .iter()
        .map(|o| match o {
            Operand::Tensor(t) => gpu.upload(t).map(Operand::Tensor),
            Operand::Scalar(v) => Ok(Operand::Scalar(*v)),
        })
        .collect()
}

/// The distance between `g` and `c` in Float32 units in the last place of `c`.
pub fn ulps(g: f64, c: f64) -> f64 {
    let c32 = c as f32;
    let ulp = f64::from(f32::from_bits(c32.abs().to_bits() + 1) - c32.abs());
    (g - c).abs() / ulp
}

/// A layout of shape `(n, m)`: column-major (`kind` 0), permuted to row-major (1), or gapped
/// (2: every stride doubled plus one, so slots between elements are never read).
pub fn layout_of_kind(kind: usize, (n, m): (usize, usize)) -> Result<Layout> {
    let strides = match kind {
        0 => [1, n],
        1 => [m, 1],
        _ => [2, 2 * n + 1],
    };
    Ok(Layout::from_flat(&[n, m], &strides)?)
}

/// An Int32 CPU tensor of `shape` in layout `kind` ([`layout_of_kind`]) at a random offset
/// holding `value(ordinal)` at each element (every other slot random), and its Gpu upload.
pub fn int_pair(
    gpu: &Gpu,
    rng: &mut Rng,
    kind: usize,
    shape: (usize, usize),
    value: impl Fn(usize) -> i32,
) -> Result<(Tensor, Tensor)> {
    let layout = layout_of_kind(kind, shape)?;
    let offset = rng.below(4);
    let mut slots: Vec<i32> = (0..offset + layout.cosize())
        .map(|_| rng.next() as i32)
        .collect();
    for ordinal in 0..shape.0 * shape.1 {
        slots[offset + layout.index_of(ordinal)?] = value(ordinal);
    }
    let cpu = Tensor::new(Cpu::from_i32(&slots, true)?, offset, layout)?;
    let uploaded = gpu.upload(&cpu)?;
    Ok((cpu, uploaded))
}

/// Asserts that every Gpu value of a binary64-accumulated Float32 result is within one
/// Float32 ulp of the CPU's (or 1e-6 of it near zero).
pub fn assert_within_an_ulp(what: &str, gpu: &[f64], cpu: &[f64]) {
    assert_eq!(gpu.len(), cpu.len(), "{what}: lengths");
    for (i, (g, c)) in gpu.iter().zip(cpu).enumerate() {
        assert!(
            ulps(*g, *c) <= 1.0 || (g - c).abs() <= 1e-6,
            "{what}: {i}: gpu {g} vs cpu {c}"
        );
    }
}

/// A Float32 CPU tensor of `shape` in layout `kind` ([`layout_of_kind`]) at a random offset
/// below 4 holding random values in `[lo, hi)` (every other slot random too), and its Gpu
/// upload (which keeps the layout and the offset's slots).
pub fn float_pair(
    gpu: &Gpu,
    rng: &mut Rng,
    kind: usize,
    shape: (usize, usize),
    (lo, hi): (f32, f32),
) -> Result<(Tensor, Tensor)> {
    let layout = layout_of_kind(kind, shape)?;
    let offset = rng.below(4);
    let values: Vec<f32> = (0..offset + layout.cosize())
        .map(|_| rng.float(lo, hi))
        .collect();
    let cpu = Tensor::new(Cpu::from_f32(&values, true)?, offset, layout)?;
    let uploaded = gpu.upload(&cpu)?;
    Ok((cpu, uploaded))
}

/// A compact Float32 CPU tensor of `shape` holding `values`, and its Gpu upload.
pub fn compact_pair(gpu: &Gpu, values: &[f32], shape: (usize, usize)) -> Result<(Tensor, Tensor)> {
    let cpu = Tensor::compact(Cpu::from_f32(values, true)?, Shape::new(shape)?)?;
    let uploaded = gpu.upload(&cpu)?;
    Ok((cpu, uploaded))
}

/// An Int32 CPU tensor of `shape` holding `values` in a random layout (column-major,
/// row-major or gapped) at a random offset, and its upload.
pub fn random_int_pair(
    gpu: &Gpu,
    rng: &mut Rng,
    shape: (usize, usize),
    values: &[i32],
) -> Result<(Tensor, Tensor)> {
    let kind = rng.below(3);
    int_pair(gpu, rng, kind, shape, |ordinal| values[ordinal])
}

/// A random Int32 in the full range, or near one of its ends, or small.
pub fn random_int(rng: &mut Rng) -> i32 {
    match rng.below(4) {
        0 => rng.next() as i32,
        1 => i32::MAX - rng.below(4) as i32,
        2 => i32::MIN + rng.below(4) as i32,
        _ => rng.below(2001) as i32 - 1000,
    }
}

/// Asserts that the Gpu answer equals the CPU answer: the same Int32 values, or an Overflow
/// error on both (the Gpu's naming the operation as the CPU's does; the detail after
/// "Int32:" differs). Whether both overflowed.
pub fn same_outcome(what: &str, cpu: Result<Tensor>, gpu: Result<Tensor>) -> Result<bool> {
    match (cpu, gpu) {
        (Ok(c), Ok(g)) => {
            assert_eq!(g.dtype(), DType::INT32, "{what}");
            assert_eq!(numbers(&download(&g)?)?, numbers(&c)?, "{what}");
            Ok(false)
        }
        (Err(c), Err(g)) => {
            assert_eq!(c.kind(), ErrorKind::Overflow, "{what}: cpu {c}");
            assert_eq!(g.kind(), ErrorKind::Overflow, "{what}: gpu {g}");
            let head = |e: &Error| {
                let text = e.to_string();
                let end = text.find("Int32:").expect("the CPU's wording") + 6;
                text[..end].to_string()
            };
            assert_eq!(head(&g), head(&c), "{what}: {g} vs {c}");
            Ok(true)
        }
        (c, g) => panic!("{what}: cpu {c:?} but gpu {g:?}"),
    }
}
