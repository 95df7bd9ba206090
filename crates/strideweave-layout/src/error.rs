//! The error of the layout algebra.

use std::fmt;

/// A layout-algebra failure: an invalid extent or stride, an out-of-domain key, a
/// non-divisible tiling, an overflowing size or a malformed layout string.
///
/// Every such failure is a *value* error in the runtime's error model (semantics-core.md §0);
/// the message names the operation and the value at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayoutError {
    message: String,
}

impl LayoutError {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        LayoutError {
            message: message.into(),
        }
    }

    /// The human-readable description of the failure.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for LayoutError {}

/// Builds an `Err(LayoutError)` from a format string.
macro_rules! fail {
    ($($arg:tt)*) => {
        return Err($crate::error::LayoutError::new(format!($($arg)*)))
    };
}
pub(crate) use fail;

/// The result type of the layout algebra.
pub type Result<T, E = LayoutError> = std::result::Result<T, E>;
