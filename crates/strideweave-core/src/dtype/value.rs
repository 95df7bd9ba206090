//! The public scalar [`Value`] and the per-dtype normalization of scalars written to storage.
//!
//! Normalization follows docs/tensors.md, Values and normalization: a carrier stores exactly what
//! [`DType::normalize`] returns, so `Float32` slots hold binary32-rounded values (widened back
//! to `f64`), `Int32`/`Int8` slots hold range-checked integers and `Bool` slots hold exact
//! booleans.

use std::fmt;

use super::dtype::DType;
use crate::error::{Error, Result};

/// A scalar as the public API passes it: one slot's value, independent of any carrier.
///
/// ```
/// use strideweave::{DType, Value};
/// assert_eq!(DType::FLOAT32.normalize(Value::from(0.1))?, Value::Float(0.10000000149011612));
/// assert_eq!(DType::INT32.normalize(7.into())?.as_i64(), Some(7));
/// # Ok::<(), strideweave::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    /// A boolean.
    Bool(bool),
    /// An integer (any width up to 64 bits; dtypes range-check on normalization).
    Int(i64),
    /// A floating-point number (`Float32` values are stored widened to `f64`).
    Float(f64),
}

impl Value {
    /// The boolean, if this is a [`Value::Bool`] (no conversion from numbers).
    pub fn as_bool(self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// The integer, if this is a [`Value::Int`] (no conversion from floats or booleans).
    pub fn as_i64(self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(i),
            _ => None,
        }
    }

    /// The float, if this is a [`Value::Float`] (no conversion from integers or booleans).
    pub fn as_f64(self) -> Option<f64> {
        match self {
            Value::Float(x) => Some(x),
            _ => None,
        }
    }

    /// The name of the variant as used in error messages: `"bool"`, `"int"` or `"float"`.
    pub fn type_name(self) -> &'static str {
        match self {
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
        }
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

impl From<i32> for Value {
    fn from(i: i32) -> Self {
        Value::Int(i64::from(i))
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Value::Int(i)
    }
}

impl From<f32> for Value {
    fn from(x: f32) -> Self {
        Value::Float(f64::from(x))
    }
}

impl From<f64> for Value {
    fn from(x: f64) -> Self {
        Value::Float(x)
    }
}

/// `true`/`false`, integers in decimal, floats always with a fraction or exponent
/// (`1.0`, `0.1`, `inf`, `NaN`) so that `Int(1)` and `Float(1.0)` read differently.
impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => write!(f, "{x:?}"),
        }
    }
}

impl DType {
    /// Converts `value` to the form a slot of this dtype stores, or explains why it cannot.
    ///
    /// | dtype | accepts | result |
    /// |---|---|---|
    /// | `Float32` | `Float`, `Int` | rounded to binary32 (overflow → ±inf), as `Float` |
    /// | `Float64` | `Float`, `Int` | `Float` |
    /// | `Int32`, `Int8` | `Int` in range | `Int` |
    /// | `Bool` | `Bool` | `Bool` |
    ///
    /// # Errors
    /// - [`Error::Type`] for a value kind the dtype does not accept (e.g. `Bool` into
    ///   `Float32`, `Float` into `Int32`, `Int` into `Bool`);
    /// - [`Error::Overflow`] for an integer outside the dtype's range;
    /// - [`Error::Value`] for a category (it has no storage schema);
    /// - [`Error::NotImplemented`] for any other simple dtype (the narrow floating formats and
    ///   extensions have no scalar normalization).
    pub fn normalize(self, value: Value) -> Result<Value> {
        if self.is_category() {
            return Err(Error::Value(format!(
                "dtype {self} is a category and has no storage schema; cannot normalize \
                 {} value {value}",
                value.type_name()
            )));
        }
        if self == DType::FLOAT32 {
            match value {
                // Rust's float and int casts round to nearest, ties to even; an f64 beyond
                // the binary32 range becomes ±inf, NaN stays NaN.
                Value::Float(x) => Ok(Value::Float(f64::from(x as f32))),
                Value::Int(i) => Ok(Value::Float(f64::from(i as f32))),
                Value::Bool(_) => Err(reject(self, value)),
            }
        } else if self == DType::FLOAT64 {
            match value {
                Value::Float(x) => Ok(Value::Float(x)),
                Value::Int(i) => Ok(Value::Float(i as f64)),
                Value::Bool(_) => Err(reject(self, value)),
            }
        } else if self == DType::INT32 {
            check_int_range(self, value, i64::from(i32::MIN), i64::from(i32::MAX))
        } else if self == DType::INT8 {
            check_int_range(self, value, i64::from(i8::MIN), i64::from(i8::MAX))
        } else if self == DType::BOOL {
            match value {
                Value::Bool(_) => Ok(value),
                _ => Err(reject(self, value)),
            }
        } else {
            Err(Error::NotImplemented(format!(
                "no scalar normalization for {self} (cannot normalize {} value {value})",
                value.type_name()
            )))
        }
    }

    /// The value a freshly zeroed slot of this dtype holds: `Float(0.0)` for `Float32` and
    /// `Float64`, `Int(0)` for `Int32` and `Int8`, `Bool(false)` for `Bool`, else `None`.
    pub fn zero(self) -> Option<Value> {
        if self == DType::FLOAT32 || self == DType::FLOAT64 {
            Some(Value::Float(0.0))
        } else if self == DType::INT32 || self == DType::INT8 {
            Some(Value::Int(0))
        } else if self == DType::BOOL {
            Some(Value::Bool(false))
        } else {
            None
        }
    }
}

/// The type error for a value kind `dtype` does not accept.
fn reject(dtype: DType, value: Value) -> Error {
    Error::Type(format!(
        "dtype {dtype} does not accept {} value {value}",
        value.type_name()
    ))
}

/// Accepts only `Value::Int` within `[min, max]`.
fn check_int_range(dtype: DType, value: Value, min: i64, max: i64) -> Result<Value> {
    match value {
        Value::Int(i) if (min..=max).contains(&i) => Ok(value),
        Value::Int(i) => Err(Error::Overflow(format!(
            "int value {i} is out of range for dtype {dtype} [{min}, {max}]"
        ))),
        _ => Err(reject(dtype, value)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    fn error_of(dtype: DType, value: Value) -> Error {
        match dtype.normalize(value) {
            Ok(normalized) => panic!("{dtype} accepted {value:?} as {normalized:?}"),
            Err(error) => error,
        }
    }

    /// Asserts the error kind and that the message names both the dtype and the value.
    fn assert_rejects(dtype: DType, value: Value, kind: ErrorKind) {
        let error = error_of(dtype, value);
        assert_eq!(error.kind(), kind, "{dtype} {value:?}: {error}");
        let message = error.to_string();
        assert!(message.contains(dtype.name()), "{message}");
        assert!(message.contains(&value.to_string()), "{message}");
    }

    #[test]
    fn float32_rounds_to_binary32_and_widens() -> Result<()> {
        let f32 = DType::FLOAT32;
        assert_eq!(
            f32.normalize(Value::Float(0.1))?,
            Value::Float(0.10000000149011612)
        );
        assert_eq!(f32.normalize(Value::Float(1.5))?, Value::Float(1.5));
        assert_eq!(f32.normalize(Value::Float(-2.0))?, Value::Float(-2.0));
        // 2^24 + 1 is not representable in binary32 and rounds (ties to even) to 2^24.
        assert_eq!(
            f32.normalize(Value::Int(16_777_217))?,
            Value::Float(16_777_216.0)
        );
        assert_eq!(f32.normalize(Value::Int(3))?, Value::Float(3.0));
        Ok(())
    }

    #[test]
    fn float32_overflow_becomes_infinity() -> Result<()> {
        let f32 = DType::FLOAT32;
        assert_eq!(
            f32.normalize(Value::Float(1e40))?,
            Value::Float(f64::INFINITY)
        );
        assert_eq!(
            f32.normalize(Value::Float(-1e40))?,
            Value::Float(f64::NEG_INFINITY)
        );
        assert_eq!(f32.normalize(Value::Float(1e40))?.to_string(), "inf");
        let nan = f32.normalize(Value::Float(f64::NAN))?.as_f64();
        assert!(nan.is_some_and(f64::is_nan), "{nan:?}");
        Ok(())
    }

    #[test]
    fn float32_rejects_bool() {
        assert_rejects(DType::FLOAT32, Value::Bool(true), ErrorKind::Type);
    }

    #[test]
    fn float64_keeps_floats_and_converts_ints() -> Result<()> {
        let f64_dtype = DType::FLOAT64;
        assert_eq!(f64_dtype.normalize(Value::Float(0.1))?, Value::Float(0.1));
        assert_eq!(f64_dtype.normalize(Value::Float(1e40))?, Value::Float(1e40));
        assert_eq!(f64_dtype.normalize(Value::Int(-7))?, Value::Float(-7.0));
        assert_rejects(f64_dtype, Value::Bool(false), ErrorKind::Type);
        Ok(())
    }

    #[test]
    fn int32_accepts_in_range_ints_only() -> Result<()> {
        let i32_dtype = DType::INT32;
        assert_eq!(i32_dtype.normalize(Value::Int(42))?, Value::Int(42));
        let max = i64::from(i32::MAX);
        let min = i64::from(i32::MIN);
        assert_eq!(i32_dtype.normalize(Value::Int(max))?, Value::Int(max));
        assert_eq!(i32_dtype.normalize(Value::Int(min))?, Value::Int(min));
        assert_rejects(i32_dtype, Value::Int(1 << 31), ErrorKind::Overflow);
        assert_rejects(i32_dtype, Value::Int(min - 1), ErrorKind::Overflow);
        assert_rejects(i32_dtype, Value::Float(1.5), ErrorKind::Type);
        assert_rejects(i32_dtype, Value::Float(2.0), ErrorKind::Type);
        assert_rejects(i32_dtype, Value::Bool(true), ErrorKind::Type);
        Ok(())
    }

    #[test]
    fn int8_uses_the_i8_range() -> Result<()> {
        let i8_dtype = DType::INT8;
        assert_eq!(i8_dtype.normalize(Value::Int(127))?, Value::Int(127));
        assert_eq!(i8_dtype.normalize(Value::Int(-128))?, Value::Int(-128));
        assert_rejects(i8_dtype, Value::Int(128), ErrorKind::Overflow);
        assert_rejects(i8_dtype, Value::Int(-129), ErrorKind::Overflow);
        assert_rejects(i8_dtype, Value::Float(1.0), ErrorKind::Type);
        assert_rejects(i8_dtype, Value::Bool(false), ErrorKind::Type);
        Ok(())
    }

    #[test]
    fn bool_accepts_exact_bools_only() -> Result<()> {
        assert_eq!(DType::BOOL.normalize(Value::Bool(true))?, Value::Bool(true));
        assert_eq!(
            DType::BOOL.normalize(Value::Bool(false))?,
            Value::Bool(false)
        );
        assert_rejects(DType::BOOL, Value::Int(1), ErrorKind::Type);
        assert_rejects(DType::BOOL, Value::Float(0.0), ErrorKind::Type);
        Ok(())
    }

    #[test]
    fn categories_cannot_normalize() {
        for category in [DType::ANY, DType::FLOATING, DType::INTEGER] {
            assert_rejects(category, Value::Float(1.0), ErrorKind::Value);
        }
    }

    #[test]
    fn narrow_and_custom_dtypes_have_no_scalar_normalization() -> Result<()> {
        let custom = DType::register_simple("dtype_value_test_custom", 16, DType::FLOATING)?;
        for dtype in [
            DType::E8M0,
            DType::E5M2,
            DType::E4M3,
            DType::E3M2,
            DType::E2M3,
            DType::E2M1,
            custom,
        ] {
            let error = error_of(dtype, Value::Float(1.0));
            assert_eq!(error.kind(), ErrorKind::NotImplemented, "{error}");
            assert!(
                error
                    .to_string()
                    .contains(&format!("no scalar normalization for {dtype}")),
                "{error}"
            );
        }
        Ok(())
    }

    #[test]
    fn zero_per_dtype() {
        assert_eq!(DType::FLOAT32.zero(), Some(Value::Float(0.0)));
        assert_eq!(DType::FLOAT64.zero(), Some(Value::Float(0.0)));
        assert_eq!(DType::INT32.zero(), Some(Value::Int(0)));
        assert_eq!(DType::INT8.zero(), Some(Value::Int(0)));
        assert_eq!(DType::BOOL.zero(), Some(Value::Bool(false)));
        for dtype in [DType::ANY, DType::FLOATING, DType::E4M3, DType::E2M1] {
            assert_eq!(dtype.zero(), None, "{dtype}");
        }
    }

    #[test]
    fn zero_values_normalize_to_themselves() -> Result<()> {
        for dtype in [
            DType::FLOAT32,
            DType::FLOAT64,
            DType::INT32,
            DType::INT8,
            DType::BOOL,
        ] {
            if let Some(zero) = dtype.zero() {
                assert_eq!(dtype.normalize(zero)?, zero, "{dtype}");
            }
        }
        Ok(())
    }

    #[test]
    fn conversions_accessors_and_display() {
        assert_eq!(Value::from(true), Value::Bool(true));
        assert_eq!(Value::from(-3_i32), Value::Int(-3));
        assert_eq!(Value::from(1_i64 << 40), Value::Int(1 << 40));
        assert_eq!(Value::from(0.5_f32), Value::Float(0.5));
        assert_eq!(Value::from(0.1_f32), Value::Float(0.10000000149011612));
        assert_eq!(Value::from(0.1_f64), Value::Float(0.1));

        assert_eq!(Value::Bool(true).as_bool(), Some(true));
        assert_eq!(Value::Int(1).as_bool(), None);
        assert_eq!(Value::Int(5).as_i64(), Some(5));
        assert_eq!(Value::Float(5.0).as_i64(), None);
        assert_eq!(Value::Float(2.5).as_f64(), Some(2.5));
        assert_eq!(Value::Int(2).as_f64(), None);

        assert_eq!(Value::Bool(false).to_string(), "false");
        assert_eq!(Value::Int(-12).to_string(), "-12");
        assert_eq!(Value::Float(1.0).to_string(), "1.0");
        assert_eq!(Value::Float(0.1).to_string(), "0.1");
        assert_eq!(Value::Float(f64::NEG_INFINITY).to_string(), "-inf");
        assert_eq!(Value::Int(1).type_name(), "int");
    }
}
