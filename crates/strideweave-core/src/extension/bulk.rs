//! Bulk slot reads for carrier extensions: [`read_f32s`] and [`read_i32s`].

use crate::carrier::{Carrier, SpanValues};
use crate::dtype::{DType, Value};
use crate::error::{Error, Result};

/// The Float32 slots `start..start + len` of `carrier`: one consistent read under the
/// carrier's lock when its class reads spans natively (the CPU), slot by slot through the
/// storage surface otherwise. This is how an accelerator extension uploads a tensor's physical span into
/// device memory without a [`Value`] per slot (a move *into* a definition-backed class has
/// no route; docs/extension-design.md, "CPU → custom moves").
///
/// # Errors
/// Type when the carrier does not hold Float32; Index when the slots do not all lie in it;
/// Runtime (released) for a released carrier.
pub fn read_f32s(carrier: &Carrier, start: usize, len: usize) -> Result<Vec<f32>> {
    check(carrier, start, len, DType::FLOAT32)?;
    if let Some(read) = carrier.body().read_span(start, len, DType::FLOAT32) {
        if let SpanValues::F32(values) = read? {
            return Ok(values);
        }
    }
    (start..start + len)
        .map(|slot| match carrier.get(slot)? {
            Value::Float(x) => Ok(x as f32),
            other => Err(Error::Type(format!(
                "slot {slot} of a {} carrier of dtype Float32 read {other:?}",
                carrier.class()
            ))),
        })
        .collect()
}

/// [`read_f32s`] for Int32 slots.
///
/// # Errors
/// As [`read_f32s`], with Int32 for Float32.
pub fn read_i32s(carrier: &Carrier, start: usize, len: usize) -> Result<Vec<i32>> {
    check(carrier, start, len, DType::INT32)?;
    if let Some(read) = carrier.body().read_span(start, len, DType::INT32) {
        if let SpanValues::I32(values) = read? {
            return Ok(values);
        }
    }
    (start..start + len)
        .map(|slot| match carrier.get(slot)? {
            Value::Int(x) => i32::try_from(x).map_err(|_| {
                Error::Overflow(format!(
                    "slot {slot} of a {} carrier read {x}",
                    carrier.class()
                ))
            }),
            other => Err(Error::Type(format!(
                "slot {slot} of a {} carrier of dtype Int32 read {other:?}",
                carrier.class()
            ))),
        })
        .collect()
}

fn check(carrier: &Carrier, start: usize, len: usize, dtype: DType) -> Result<()> {
    carrier.check_live("read")?;
    if carrier.dtype() != dtype {
        return Err(Error::Type(format!(
            "a bulk {dtype} read of a {} carrier of dtype {}",
            carrier.class(),
            carrier.dtype()
        )));
    }
    let size = carrier.size();
    if start.checked_add(len).is_none_or(|end| end > size) {
        return Err(Error::Index(format!(
            "a bulk read of slots {start}..{start}+{len} of a {} carrier of size {size}",
            carrier.class()
        )));
    }
    Ok(())
}
