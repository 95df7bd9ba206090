//! Typed access to CPU slots for the kernels: operands borrowed as native slices under their
//! carrier's read lock ([`Slots`]), the element types kernels compute in ([`Compute`]) and
//! the ones results store ([`Stored`]).

use crate::carrier::Carrier;
use crate::carriers::cpu::{INLINE_BOOL, INLINE_F32};
use crate::carriers::Cpu;
use crate::dtype::{DType, Value};
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// The slots of one CPU carrier, borrowed as native values (Bool as bytes 0/1).
#[derive(Debug, Clone, Copy)]
pub(super) enum Slots<'a> {
    /// Float32 slots.
    F32(&'a [f32]),
    /// Int32 slots.
    I32(&'a [i32]),
    /// Bool slots, one byte each.
    Bool(&'a [u8]),
}

impl Slots<'_> {
    /// The number of slots.
    pub(super) fn len(self) -> usize {
        match self {
            Slots::F32(s) => s.len(),
            Slots::I32(s) => s.len(),
            Slots::Bool(s) => s.len(),
        }
    }
}

/// The CPU body of `tensor`'s carrier (a Type error for another class).
pub(super) fn cpu_of<'a>(name: &str, tensor: &'a Tensor) -> Result<&'a Cpu> {
    tensor.carrier().downcast_ref::<Cpu>().ok_or_else(|| {
        Error::Type(format!(
            "the CPU kernel of '{name}' got a {} tensor",
            tensor.carrier().class()
        ))
    })
}

/// Runs `f` on the slots of `tensor`'s CPU carrier under its read lock, after checking that
/// the tensor's slots `offset .. offset + cosize` lie inside them (so kernels can index
/// without panicking).
///
/// # Errors
/// A Type error for a non-CPU carrier, a NotImplemented error for a dtype CPU does not store,
/// a Runtime error once released, an Index error when the tensor does not fit its slots.
pub(super) fn with_slots<R>(
    name: &str,
    tensor: &Tensor,
    f: impl FnOnce(Slots<'_>) -> Result<R>,
) -> Result<R> {
    let cpu = cpu_of(name, tensor)?;
    let dtype = tensor.dtype();
    let end = tensor.offset().checked_add(tensor.layout().cosize());
    let checked = move |slots: Slots<'_>| {
        if end.is_none_or(|end| end > slots.len()) {
            return Err(Error::Index(format!(
                "'{name}': {tensor:?} does not fit the {} slots of its carrier",
                slots.len()
            )));
        }
        f(slots)
    };
    if dtype == DType::FLOAT32 {
        cpu.with_f32(|s| checked(Slots::F32(s)))?
    } else if dtype == DType::INT32 {
        cpu.with_i32(|s| checked(Slots::I32(s)))?
    } else if dtype == DType::BOOL {
        cpu.with_bytes(|s| checked(Slots::Bool(s)))?
    } else {
        Err(Error::NotImplemented(format!(
            "the CPU kernel of '{name}' does not read {dtype} tensors"
        )))
    }
}

/// An element type kernels compute in: `f32` (Float32), `i32` (Int32) or `u8` (Bool as 0/1).
pub(super) trait Compute:
    bytemuck::Pod + Default + Send + Sync + PartialEq + std::fmt::Debug
{
    /// The dtype it computes.
    const DTYPE: DType;

    /// Whether slots of `dtype` convert to this type (Float32 also reads Int32, exactly as
    /// `as f32` rounds).
    fn reads(dtype: DType) -> bool;

    /// The slots as a slice of this very type, when they are stored as it (no conversion).
    fn direct(slots: Slots<'_>) -> Option<&[Self]>;

    /// The converted value of slot `index` (the default for storage [`reads`](Self::reads)
    /// refuses, which callers rule out first). `index` must be in range.
    fn load(slots: Slots<'_>, index: usize) -> Self;

    /// Converts the slots `base + t·stride` into `out[t]` for every `t < out.len()`; the
    /// slots must be in range.
    fn gather(slots: Slots<'_>, base: usize, stride: usize, out: &mut [Self]);

    /// A weak scalar converted once as operand conversion does (Int → Float32 rounds, a Bool
    /// is 1.0 or 0.0 in Float32; Int32 is range-checked).
    fn from_value(name: &str, value: Value) -> Result<Self>;
}

/// `out[t] = convert(slots[base + t·stride])`, without bounds checks in the loop.
#[inline(always)]
fn gather_with<S: Copy, T: Copy>(
    slots: &[S],
    base: usize,
    stride: usize,
    out: &mut [T],
    convert: impl Fn(S) -> T,
) {
    match (stride, slots.get(base..)) {
        (_, None) => {}
        (0, Some(rest)) => {
            if let Some(&x) = rest.first() {
                out.fill(convert(x));
            }
        }
        (stride, Some(rest)) => {
            for (o, &x) in out.iter_mut().zip(rest.iter().step_by(stride)) {
                *o = convert(x);
            }
        }
    }
}

/// The Type error of a weak scalar that does not convert to `dtype`.
fn scalar_refused(name: &str, value: Value, dtype: DType) -> Error {
    Error::Type(format!(
        "'{name}': cannot convert the {} operand value {value} to {dtype}",
        value.type_name()
    ))
}

impl Compute for f32 {
    const DTYPE: DType = DType::FLOAT32;

    fn reads(dtype: DType) -> bool {
        dtype == DType::FLOAT32 || dtype == DType::INT32
    }

    #[inline]
    fn direct(slots: Slots<'_>) -> Option<&[f32]> {
        match slots {
            Slots::F32(s) => Some(s),
            _ => None,
        }
    }

    #[inline]
    fn load(slots: Slots<'_>, index: usize) -> f32 {
        match slots {
            Slots::F32(s) => s.get(index).copied().unwrap_or_default(),
            Slots::I32(s) => s.get(index).map_or(0.0, |&i| i as f32),
            Slots::Bool(_) => 0.0,
        }
    }

    fn gather(slots: Slots<'_>, base: usize, stride: usize, out: &mut [f32]) {
        match slots {
            Slots::F32(s) => gather_with(s, base, stride, out, |x| x),
            Slots::I32(s) => gather_with(s, base, stride, out, |i| i as f32),
            Slots::Bool(_) => {}
        }
    }

    fn from_value(_name: &str, value: Value) -> Result<f32> {
        Ok(match value {
            Value::Float(x) => x as f32,
            Value::Int(i) => i as f32,
            Value::Bool(b) => f32::from(u8::from(b)),
        })
    }
}

impl Compute for i32 {
    const DTYPE: DType = DType::INT32;

    fn reads(dtype: DType) -> bool {
        dtype == DType::INT32
    }

    #[inline]
    fn direct(slots: Slots<'_>) -> Option<&[i32]> {
        match slots {
            Slots::I32(s) => Some(s),
            _ => None,
        }
    }

    #[inline]
    fn load(slots: Slots<'_>, index: usize) -> i32 {
        match slots {
            Slots::I32(s) => s.get(index).copied().unwrap_or_default(),
            _ => 0,
        }
    }

    fn gather(slots: Slots<'_>, base: usize, stride: usize, out: &mut [i32]) {
        if let Slots::I32(s) = slots {
            gather_with(s, base, stride, out, |i| i);
        }
    }

    fn from_value(name: &str, value: Value) -> Result<i32> {
        match value {
            Value::Int(i) => i32::try_from(i).map_err(|_| {
                Error::Overflow(format!(
                    "'{name}': operand value {i} is outside the Int32 range"
                ))
            }),
            _ => Err(scalar_refused(name, value, DType::INT32)),
        }
    }
}

impl Compute for u8 {
    const DTYPE: DType = DType::BOOL;

    fn reads(dtype: DType) -> bool {
        dtype == DType::BOOL
    }

    #[inline]
    fn direct(slots: Slots<'_>) -> Option<&[u8]> {
        match slots {
            Slots::Bool(s) => Some(s),
            _ => None,
        }
    }

    #[inline]
    fn load(slots: Slots<'_>, index: usize) -> u8 {
        match slots {
            Slots::Bool(s) => s.get(index).map_or(0, |&b| u8::from(b != 0)),
            _ => 0,
        }
    }

    fn gather(slots: Slots<'_>, base: usize, stride: usize, out: &mut [u8]) {
        if let Slots::Bool(s) = slots {
            gather_with(s, base, stride, out, |b| u8::from(b != 0));
        }
    }

    fn from_value(name: &str, value: Value) -> Result<u8> {
        match value {
            Value::Bool(b) => Ok(u8::from(b)),
            _ => Err(scalar_refused(name, value, DType::BOOL)),
        }
    }
}

/// An element type a result stores: `f32`, `i32` or `u8` (Bool 0/1).
pub(super) trait Stored: bytemuck::Pod + Default + Send + Sync {
    /// The result dtype.
    const DTYPE: DType;

    /// How many slots of this dtype a CPU carrier keeps inline.
    const INLINE: usize;

    /// Runs `f` on the slots of a fresh CPU body of this dtype, which nobody else sees yet.
    fn with_out<R>(cpu: &mut Cpu, f: impl FnOnce(&mut [Self]) -> R) -> Result<R>;

    /// A fresh mutable CPU carrier holding at most [`INLINE`](Self::INLINE) `values` inline.
    fn inline(values: &[Self]) -> Carrier;
}

impl Stored for f32 {
    const DTYPE: DType = DType::FLOAT32;
    const INLINE: usize = INLINE_F32;

    fn with_out<R>(cpu: &mut Cpu, f: impl FnOnce(&mut [f32]) -> R) -> Result<R> {
        cpu.with_f32_exclusive(f)
    }

    fn inline(values: &[f32]) -> Carrier {
        Cpu::inline_f32(values, true)
    }
}

impl Stored for i32 {
    const DTYPE: DType = DType::INT32;
    const INLINE: usize = INLINE_F32;

    fn with_out<R>(cpu: &mut Cpu, f: impl FnOnce(&mut [i32]) -> R) -> Result<R> {
        cpu.with_i32_exclusive(f)
    }

    fn inline(values: &[i32]) -> Carrier {
        Cpu::inline_i32(values, true)
    }
}

impl Stored for u8 {
    const DTYPE: DType = DType::BOOL;
    const INLINE: usize = INLINE_BOOL;

    fn with_out<R>(cpu: &mut Cpu, f: impl FnOnce(&mut [u8]) -> R) -> Result<R> {
        cpu.with_bytes_exclusive(f)
    }

    fn inline(values: &[u8]) -> Carrier {
        Cpu::inline_bool(values, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gathers_convert_and_broadcast() {
        let ints = [1, -2, 3, -4, 5];
        let mut out = [0.0f32; 3];
        f32::gather(Slots::I32(&ints), 0, 2, &mut out);
        assert_eq!(out, [1.0, 3.0, 5.0]);
        f32::gather(Slots::I32(&ints), 1, 0, &mut out);
        assert_eq!(out, [-2.0; 3]);
        let mut bools = [9u8; 2];
        u8::gather(Slots::Bool(&[0, 7, 1]), 1, 1, &mut bools);
        assert_eq!(bools, [1, 1]);
        assert_eq!(f32::load(Slots::I32(&ints), 3), -4.0);
        assert_eq!(u8::load(Slots::Bool(&[0, 5]), 1), 1);
    }

    #[test]
    fn weak_scalars_convert_once() -> Result<()> {
        assert_eq!(f32::from_value("add", Value::Bool(true))?, 1.0);
        assert_eq!(
            f32::from_value("add", Value::Int(16_777_217))?,
            16_777_216.0
        );
        assert_eq!(i32::from_value("mul", Value::Int(-7))?, -7);
        assert!(i32::from_value("mul", Value::Int(1 << 40)).is_err());
        assert!(i32::from_value("mul", Value::Float(1.0)).is_err());
        assert_eq!(u8::from_value("eq", Value::Bool(true))?, 1);
        assert!(u8::from_value("eq", Value::Int(1)).is_err());
        Ok(())
    }
}
