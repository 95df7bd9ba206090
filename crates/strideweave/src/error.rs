//! The one error type of the runtime.
//!
//! The seed is written against a dynamic language whose exceptions (`TypeError`,
//! `ValueError`, ...) become [`ErrorKind`]s here (docs/errors.md). Every error carries a
//! message that names the class, field or value at fault; the two structured errors of the
//! seed, `UnsupportedOperationPlan` and `ProviderContractError`, are variants of their own.

use std::fmt;
use std::sync::Arc;

use strideweave_layout::LayoutError;

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
}

impl Error {
    /// The category of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Type(_) => ErrorKind::Type,
            Error::Value(_) | Error::Layout(_) => ErrorKind::Value,
            Error::Index(_) => ErrorKind::Index,
            Error::Runtime(_) | Error::ProviderContract(_) => ErrorKind::Runtime,
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
