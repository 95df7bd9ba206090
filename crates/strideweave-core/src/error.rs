//! The one error type of the runtime.
//!
//! The seed is written against a dynamic language whose exceptions (`TypeError`,
//! `ValueError`, ...) become [`ErrorKind`]s here (docs/errors.md). Every error carries a
//! message that names the class, field or value at fault; the two structured errors of the
//! seed, `UnsupportedOperationPlan` and `ProviderContractError`, are variants of their own,
//! and so are the failures callers branch on without reading messages: a released carrier,
//! a slot out of range, a dtype a class cannot store, and a provider callback that panicked.

use std::fmt;
use std::sync::Arc;

use strideweave_layout::LayoutError;

use crate::carrier::CarrierClass;
use crate::dtype::DType;

/// The category of an [`Error`], one per exception class of the seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A wrong kind of argument (the seed's `TypeError`).
    Type,
    /// A well-typed but invalid value (the seed's `ValueError`).
    Value,
    /// A carrier slot out of range (the seed's `IndexError`).
    Index,
    /// An operation refused in the current state (the seed's `RuntimeError`).
    Runtime,
    /// A capability that is absent (the seed's `NotImplementedError`).
    NotImplemented,
    /// An arithmetic result outside the dtype's range (the seed's `OverflowError`).
    Overflow,
    /// A registry key that is not present (the seed's `KeyError`).
    Key,
    /// A named item that cannot be found (the seed's `LookupError`).
    Lookup,
    /// Storage that cannot be obtained (the seed's `MemoryError`).
    Memory,
    /// An operating-system failure (the seed's `OSError`).
    Io,
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            ErrorKind::Type => "type error",
            ErrorKind::Value => "value error",
            ErrorKind::Index => "index error",
            ErrorKind::Runtime => "runtime error",
            ErrorKind::NotImplemented => "not implemented",
            ErrorKind::Overflow => "overflow error",
            ErrorKind::Key => "key error",
            ErrorKind::Lookup => "lookup error",
            ErrorKind::Memory => "memory error",
            ErrorKind::Io => "I/O error",
        };
        f.write_str(name)
    }
}

/// The seed's `UnsupportedOperationPlan`: no capability (or no kernel) accepts a plan.
///
/// It carries the operation name and the rejection reasons in the order the candidates were
/// consulted; its [`ErrorKind`] is [`ErrorKind::NotImplemented`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsupportedOperationPlan {
    operation: Arc<str>,
    reasons: Arc<[String]>,
}

impl UnsupportedOperationPlan {
    /// Builds the rejection of `operation` with its ordered `reasons`.
    pub fn new(operation: impl Into<Arc<str>>, reasons: impl IntoIterator<Item = String>) -> Self {
        UnsupportedOperationPlan {
            operation: operation.into(),
            reasons: reasons.into_iter().collect(),
        }
    }

    /// The name of the operation whose plan was refused.
    pub fn operation(&self) -> &str {
        &self.operation
    }

    /// The rejection reasons, in the order the candidates were consulted.
    pub fn reasons(&self) -> &[String] {
        &self.reasons
    }
}

impl fmt::Display for UnsupportedOperationPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unsupported operation plan for '{}'", self.operation)?;
        for (i, reason) in self.reasons.iter().enumerate() {
            let sep = if i == 0 { ": " } else { "; " };
            write!(f, "{sep}{reason}")?;
        }
        Ok(())
    }
}

/// Every failure the runtime reports.
///
/// Match on [`Error::kind`] to branch on the category; the message names what is at fault.
/// `Error` is cheap to clone, so a completion can hand the same terminal error to every waiter.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A wrong kind of argument.
    #[error("type error: {0}")]
    Type(String),
    /// A well-typed but invalid value.
    #[error("value error: {0}")]
    Value(String),
    /// A carrier slot out of range.
    #[error("index error: {0}")]
    Index(String),
    /// An operation refused in the current state.
    #[error("runtime error: {0}")]
    Runtime(String),
    /// A capability that is absent.
    #[error("not implemented: {0}")]
    NotImplemented(String),
    /// An arithmetic result outside the dtype's range.
    #[error("overflow error: {0}")]
    Overflow(String),
    /// A registry key that is not present.
    #[error("key error: {0}")]
    Key(String),
    /// A named item that cannot be found.
    #[error("lookup error: {0}")]
    Lookup(String),
    /// Storage that cannot be obtained.
    #[error("memory error: {0}")]
    Memory(String),
    /// An operating-system failure, with what was being done when it happened.
    #[error("I/O error: {context}: {source}")]
    Io {
        /// What the runtime was doing.
        context: String,
        /// The operating system's error.
        #[source]
        source: Arc<std::io::Error>,
    },
    /// A layout-algebra failure (always a value error).
    #[error("value error: {0}")]
    Layout(#[from] LayoutError),
    /// No capability or kernel accepts an operation plan.
    #[error("{0}")]
    UnsupportedOperationPlan(UnsupportedOperationPlan),
    /// A provider broke its callback contract (the seed's `ProviderContractError`).
    #[error("provider contract violated: {0}")]
    ProviderContract(String),
    /// A provider callback panicked; the framework caught it, and nothing was published.
    #[error("provider contract violated: {0}")]
    ProviderPanicked(ProviderPanic),
    /// A carrier was used after its release.
    #[error("runtime error: cannot {action}: {class} is released")]
    Released {
        /// The exact class of the released carrier.
        class: CarrierClass,
        /// What was refused.
        action: String,
    },
    /// A physical slot outside a carrier.
    #[error("index error: slot {index} is out of range for a {class} carrier of size {size}")]
    SlotOutOfRange {
        /// The exact class of the carrier.
        class: CarrierClass,
        /// The slot asked for.
        index: usize,
        /// The carrier's size in slots.
        size: usize,
    },
    /// A dtype the carrier class cannot store.
    #[error("value error: {class} carriers cannot store dtype {dtype}")]
    UnstorableDtype {
        /// The exact carrier class.
        class: CarrierClass,
        /// The dtype refused.
        dtype: DType,
    },
}

/// A panic caught in a provider callback: which provider, which callback, and what the
/// panic said. Every provider callback (storage, kernel `prepare` and `submit`, transfer,
/// composite, completion `wait`) is run through one guard that reports this.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderPanic {
    provider: String,
    callback: &'static str,
    detail: String,
}

impl ProviderPanic {
    /// The provider whose callback panicked, as the message names it.
    pub fn provider(&self) -> &str {
        &self.provider
    }

    /// The callback that panicked (`"prepare"`, `"submit"`, `"wait"`, `"read"`, …).
    pub fn callback(&self) -> &str {
        self.callback
    }

    /// The panic's message (or a note that its payload was not a string).
    pub fn detail(&self) -> &str {
        &self.detail
    }
}

impl fmt::Display for ProviderPanic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} panicked in {}: {}",
            self.provider, self.callback, self.detail
        )
    }
}

/// Runs the provider callback `callback` of `provider` (named lazily, only on a panic):
/// its error propagates as it is, and a panic becomes [`Error::ProviderPanicked`]. The one
/// guard every provider callback goes through, so a provider's panic never unwinds through
/// the framework, and nothing the callback calls records autograd nodes (node construction
/// is framework-owned).
pub(crate) fn guard<T>(
    provider: impl FnOnce() -> String,
    callback: &'static str,
    run: impl FnOnce() -> Result<T>,
) -> Result<T> {
    let _callback = crate::autograd::provider_callback();
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)).unwrap_or_else(|payload| {
        let detail = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a non-string panic payload".to_string());
        Err(Error::ProviderPanicked(ProviderPanic {
            provider: provider(),
            callback,
            detail,
        }))
    })
}

impl Error {
    /// The category of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Type(_) => ErrorKind::Type,
            Error::Value(_) | Error::Layout(_) => ErrorKind::Value,
            Error::Index(_) => ErrorKind::Index,
            Error::Runtime(_)
            | Error::ProviderContract(_)
            | Error::ProviderPanicked(_)
            | Error::Released { .. } => ErrorKind::Runtime,
            Error::SlotOutOfRange { .. } => ErrorKind::Index,
            Error::UnstorableDtype { .. } => ErrorKind::Value,
            Error::NotImplemented(_) | Error::UnsupportedOperationPlan(_) => {
                ErrorKind::NotImplemented
            }
            Error::Overflow(_) => ErrorKind::Overflow,
            Error::Key(_) => ErrorKind::Key,
            Error::Lookup(_) => ErrorKind::Lookup,
            Error::Memory(_) => ErrorKind::Memory,
            Error::Io { .. } => ErrorKind::Io,
        }
    }

    /// Wraps an operating-system error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source: Arc::new(source),
        }
    }
}

/// How many characters of a caller's text an error message quotes before eliding the rest.
pub const QUOTED_PREFIX: usize = 64;

/// `text` as an error message quotes it: in single quotes, control and other unprintable
/// characters escaped, and cut after [`QUOTED_PREFIX`] characters with the full length said,
/// so a hostile input can neither flood a log nor forge its lines.
pub(crate) fn quoted(text: &str) -> String {
    let mut out = String::from("'");
    let mut chars = text.chars();
    for c in chars.by_ref().take(QUOTED_PREFIX) {
        if c == '\'' {
            out.push_str("\\'");
        } else {
            out.extend(c.escape_debug());
        }
    }
    out.push('\'');
    if chars.next().is_some() {
        out.push_str(&format!("… ({} characters)", text.chars().count()));
    }
    out
}

/// The result type of every fallible runtime call.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_variant_reports_its_kind() {
        let probe = CarrierClass::mint("Probe", crate::carrier::ClassKind::Independent);
        let cases = [
            (Error::Type("t".into()), ErrorKind::Type),
            (Error::Value("v".into()), ErrorKind::Value),
            (Error::Index("i".into()), ErrorKind::Index),
            (Error::Runtime("r".into()), ErrorKind::Runtime),
            (Error::NotImplemented("n".into()), ErrorKind::NotImplemented),
            (Error::Overflow("o".into()), ErrorKind::Overflow),
            (Error::Key("k".into()), ErrorKind::Key),
            (Error::Lookup("l".into()), ErrorKind::Lookup),
            (Error::Memory("m".into()), ErrorKind::Memory),
            (
                Error::io("open", std::io::Error::other("boom")),
                ErrorKind::Io,
            ),
            (
                Error::UnsupportedOperationPlan(UnsupportedOperationPlan::new("relu", [])),
                ErrorKind::NotImplemented,
            ),
            (Error::ProviderContract("p".into()), ErrorKind::Runtime),
            (
                guard(
                    || "a provider".into(),
                    "read",
                    || -> Result<()> { panic!("boom") },
                )
                .unwrap_err(),
                ErrorKind::Runtime,
            ),
            (
                Error::Released {
                    class: probe,
                    action: "read".into(),
                },
                ErrorKind::Runtime,
            ),
            (
                Error::SlotOutOfRange {
                    class: probe,
                    index: 3,
                    size: 2,
                },
                ErrorKind::Index,
            ),
            (
                Error::UnstorableDtype {
                    class: probe,
                    dtype: DType::ANY,
                },
                ErrorKind::Value,
            ),
        ];
        for (error, kind) in cases {
            assert_eq!(error.kind(), kind, "{error:?}");
        }
    }

    #[test]
    fn layout_errors_are_value_errors_with_their_message() {
        let layout_error = "(4,2):(1"
            .parse::<strideweave_layout::Layout>()
            .unwrap_err();
        let error = Error::from(layout_error.clone());
        assert_eq!(error.kind(), ErrorKind::Value);
        assert_eq!(error.to_string(), format!("value error: {layout_error}"));
    }

    #[test]
    fn the_guard_passes_errors_through_and_reports_panics_by_provider_and_callback() {
        let passed = guard(
            || unreachable!(),
            "read",
            || -> Result<()> { Err(Error::Memory("full".into())) },
        );
        assert_eq!(passed.unwrap_err().to_string(), "memory error: full");
        let error = guard(
            || "the storage provider of Ring".into(),
            "write",
            || -> Result<()> { panic!("slot {} is gone", 4) },
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "provider contract violated: the storage provider of Ring panicked in write: slot 4 \
             is gone"
        );
        let Error::ProviderPanicked(panic) = error else {
            panic!("expected a provider panic");
        };
        assert_eq!(
            (panic.provider(), panic.callback(), panic.detail()),
            ("the storage provider of Ring", "write", "slot 4 is gone")
        );
    }

    #[test]
    fn quoted_text_is_escaped_and_bounded() {
        assert_eq!(quoted("relu"), "'relu'");
        assert_eq!(quoted("a\nb\u{1b}[2J'"), "'a\\nb\\u{1b}[2J\\''");
        let long = "x".repeat(1000);
        assert_eq!(
            quoted(&long),
            format!("'{}'… (1000 characters)", "x".repeat(QUOTED_PREFIX))
        );
        assert_eq!(
            quoted(&"é".repeat(QUOTED_PREFIX)),
            format!("'{}'", "é".repeat(64))
        );
    }

    #[test]
    fn unsupported_plan_lists_reasons_in_order() {
        let plan =
            UnsupportedOperationPlan::new("relu", ["first".to_string(), "second".to_string()]);
        assert_eq!(plan.operation(), "relu");
        assert_eq!(plan.reasons(), ["first", "second"]);
        let error = Error::UnsupportedOperationPlan(plan);
        assert_eq!(
            error.to_string(),
            "unsupported operation plan for 'relu': first; second"
        );
    }

    #[test]
    fn io_errors_keep_their_context_and_source() {
        let error = Error::io(
            "opening /nowhere",
            std::io::Error::from(std::io::ErrorKind::NotFound),
        );
        assert!(error
            .to_string()
            .starts_with("I/O error: opening /nowhere: "));
        assert!(std::error::Error::source(&error).is_some());
    }
}
