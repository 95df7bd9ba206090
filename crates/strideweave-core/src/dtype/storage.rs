//! Storage-dtype helpers for carriers (docs/carriers.md, Storage dtypes).
//!
//! A carrier declares the dtypes it can store as a list of [`DType`]s; membership is by
//! identity, so a category, a dtype merely named like an accepted one, or any dtype not in the
//! list is refused.

use super::dtype::DType;
use crate::error::{Error, Result};

/// Whether `dtype` is one of `accepted` (identity match; categories are never stored, so they
/// match only if a caller lists one, which no shipped carrier does).
pub fn accepts_storage_dtype(dtype: DType, accepted: &[DType]) -> bool {
    accepted.contains(&dtype)
}

/// Returns `dtype` itself if the carrier `carrier_name` can store it, i.e. if it is one of
/// `accepted` (by identity).
///
/// # Errors
/// [`Error::Value`] naming the carrier, the dtype and the accepted dtypes otherwise.
///
/// ```
/// use strideweave::dtype::validate_storage_dtype;
/// use strideweave::{DType, ErrorKind};
/// let accepted = [DType::FLOAT32, DType::INT32, DType::BOOL];
/// assert_eq!(validate_storage_dtype(DType::INT32, "Generic", &accepted)?, DType::INT32);
/// let error = validate_storage_dtype(DType::FLOAT64, "Generic", &accepted).unwrap_err();
/// assert_eq!(error.kind(), ErrorKind::Value);
/// # Ok::<(), strideweave::Error>(())
/// ```
pub fn validate_storage_dtype(
    dtype: DType,
    carrier_name: &str,
    accepted: &[DType],
) -> Result<DType> {
    if accepts_storage_dtype(dtype, accepted) {
        return Ok(dtype);
    }
    let accepted_names = accepted
        .iter()
        .map(|dtype| dtype.name())
        .collect::<Vec<_>>()
        .join(", ");
    let what = if dtype.is_category() {
        "category dtype"
    } else {
        "storage dtype"
    };
    Err(Error::Value(format!(
        "carrier {carrier_name} does not support {what} {dtype} (accepted: [{accepted_names}])"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    const GENERIC: [DType; 3] = [DType::FLOAT32, DType::INT32, DType::BOOL];

    #[test]
    fn accepted_dtypes_are_returned_unchanged() -> Result<()> {
        for dtype in GENERIC {
            assert!(accepts_storage_dtype(dtype, &GENERIC));
            assert_eq!(validate_storage_dtype(dtype, "Generic", &GENERIC)?, dtype);
        }
        Ok(())
    }

    #[test]
    fn unsupported_dtypes_are_value_errors_naming_carrier_and_dtype() {
        for dtype in [
            DType::FLOAT64,
            DType::INT8,
            DType::E4M3,
            DType::ANY,
            DType::FLOATING,
        ] {
            assert!(!accepts_storage_dtype(dtype, &GENERIC), "{dtype}");
            let error = validate_storage_dtype(dtype, "Generic", &GENERIC).unwrap_err();
            assert_eq!(error.kind(), ErrorKind::Value, "{error}");
            let message = error.to_string();
            assert!(message.contains("Generic"), "{message}");
            assert!(message.contains(dtype.name()), "{message}");
        }
    }

    #[test]
    fn matching_is_by_identity_not_by_name() -> Result<()> {
        // A dtype that is not Float32 but shares its structure is refused.
        let lookalike =
            DType::register_simple("dtype_storage_test_f32_lookalike", 32, DType::FLOATING)?;
        assert!(!accepts_storage_dtype(lookalike, &GENERIC));
        assert_eq!(
            validate_storage_dtype(lookalike, "CPU", &GENERIC)
                .unwrap_err()
                .kind(),
            ErrorKind::Value
        );
        assert!(accepts_storage_dtype(lookalike, &[lookalike]));
        Ok(())
    }

    #[test]
    fn an_empty_accepted_list_refuses_everything() {
        assert!(!accepts_storage_dtype(DType::FLOAT32, &[]));
        let error = validate_storage_dtype(DType::FLOAT32, "FileBacked", &[]).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Value);
    }
}
