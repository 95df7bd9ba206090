//! DTypes: the process-global registry of element types, and the scalar [`Value`].
//!
//! A [`DType`] is a `Copy` handle compared by **identity** (docs/tensors.md, DTypes): the
//! built-ins are associated consts ([`DType::FLOAT32`], [`DType::ANY`], ...) pointing at
//! `static` descriptors, and extensions are registered once, under a unique name, for the
//! life of the process. Every dtype is either a category ([`DTypeCategory`]: `Any` ⊃
//! {`Floating`, `Integer`}) or a simple storage dtype ([`SimpleDType`]) of a fixed bit width
//! under a category; compound dtypes will be a further [`DTypeKind`].
//!
//! | built-in | kind | bits | supertype |
//! |---|---|---|---|
//! | `Any` | category | – | – |
//! | `Floating`, `Integer` | category | – | `Any` |
//! | `Bool` | simple | 8 | `Any` |
//! | `Int32`, `Int8` | simple | 32, 8 | `Integer` |
//! | `Float32`, `Float64` | simple | 32, 64 | `Floating` |
//! | `E8M0`, `E5M2`, `E4M3` | simple | 8 | `Floating` |
//! | `E3M2`, `E2M3` | simple | 6 | `Floating` |
//! | `E2M1` | simple | 4 | `Floating` |
//!
//! [`DType::normalize`] converts a [`Value`] to what a slot of that dtype stores, and
//! [`validate_storage_dtype`] / [`accepts_storage_dtype`] are the carriers' identity checks
//! against the dtypes they can store.
//!
//! ```
//! use strideweave::{DType, ErrorKind, Value};
//! let fp4 = DType::from_name("E2M1")?;
//! assert_eq!(fp4, DType::E2M1);
//! assert_eq!(fp4.bits(), Some(4));
//! assert_eq!(fp4.supertypes(), [DType::FLOATING, DType::ANY]);
//! assert_eq!(DType::FLOAT32.normalize(Value::Float(1e40))?, Value::Float(f64::INFINITY));
//! let error = DType::INT32.normalize(Value::Int(1 << 31)).unwrap_err();
//! assert_eq!(error.kind(), ErrorKind::Overflow);
//! # Ok::<(), strideweave::Error>(())
//! ```

// The handle lives in `dtype.rs` (docs/conventions.md, One concept per file).
#[allow(clippy::module_inception)]
mod dtype;
mod registry;
mod storage;
mod value;

pub use dtype::{DType, DTypeCategory, DTypeKind, SimpleDType};
pub use storage::{accepts_storage_dtype, validate_storage_dtype};
pub use value::Value;
