//! `Unsupported`: the immutable rejection value a provider returns instead of prepared work.

use std::fmt;
use std::sync::Arc;

use crate::error::{Error, Result};

/// A provider's refusal of one request, with its reason.
///
/// Seed rule: "Unsupported(reason) SHALL be an immutable rejection value whose reason SHALL
/// be a non-empty string"; a non-string reason (the seed's `TypeError`) is impossible here
/// because the reason is typed, and an empty one is a Value error. The value is immutable
/// (private field, no setter) and cheap to clone.
///
/// ```
/// use strideweave::carriers::extension::Unsupported;
/// let rejection = Unsupported::new("needs 16-byte alignment")?;
/// assert_eq!(rejection.reason(), "needs 16-byte alignment");
/// assert!(Unsupported::new("").is_err());
/// # Ok::<(), strideweave::Error>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Unsupported {
    reason: Arc<str>,
}

impl Unsupported {
    /// The rejection with `reason`.
    ///
    /// Seed rule: the reason "SHALL be a non-empty string"; an empty reason fails with a
    /// Value error naming `Unsupported`.
    pub fn new(reason: impl Into<Arc<str>>) -> Result<Unsupported> {
        let reason = reason.into();
        if reason.is_empty() {
            return Err(Error::Value(
                "Unsupported reason must be a non-empty string".to_string(),
            ));
        }
        Ok(Unsupported { reason })
    }

    /// Why the request was refused (never empty, per the seed's non-empty reason rule).
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl fmt::Debug for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Unsupported").field(&self.reason).finish()
    }
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unsupported: {}", self.reason)
    }
}
