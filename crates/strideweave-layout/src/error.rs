//! The error of the layout algebra, and the helpers that keep its messages bounded.

use std::fmt::{self, Write as _};

/// A layout-algebra failure: an invalid extent or stride, an out-of-domain key, a
/// non-divisible tiling, an overflowing size, a tree nested beyond
/// [`MAX_NESTING`](crate::MAX_NESTING), an undecided injectivity search or a malformed layout
/// string.
///
/// Every such failure is a *value* error in the runtime's error model (docs/layouts.md,
/// Conventions); the message names the operation and the value at fault. A value quoted in a
/// message is cut to its first [`QUOTE_LIMIT`](crate::QUOTE_LIMIT) characters (then `…`), and
/// quoted input text has its control characters escaped, so a hostile input never makes a huge or
/// terminal-corrupting message.
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

/// The most characters of one value (a layout, shape, coordinate or input string) that an
/// error message quotes; a longer value is cut there and marked with `…`.
pub const QUOTE_LIMIT: usize = 64;

/// Input text as an error message quotes it: in double quotes with control characters,
/// quotes and backslashes escaped (as `{:?}` does), cut once the escaped text would pass
/// [`QUOTE_LIMIT`] characters, then `…` and the full length in characters. The quote is
/// therefore bounded however many characters need escaping.
pub(crate) fn quote(text: &str) -> String {
    let mut out = String::from("\"");
    let mut written = 0;
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        let escaped = c.escape_debug();
        let len = escaped.len();
        if written + len > QUOTE_LIMIT {
            break;
        }
        out.extend(escaped);
        written += len;
        chars.next();
    }
    out.push('"');
    if chars.peek().is_some() {
        let _ = write!(out, "… ({} characters)", text.chars().count());
    }
    out
}

/// A value as an error message shows it: its `Display` form, cut after [`QUOTE_LIMIT`]
/// characters with `…`. Formatting stops as soon as the limit is passed, so quoting a layout
/// with a million leaves costs no more than quoting a small one.
pub(crate) struct Brief<'a, T: ?Sized>(&'a T);

/// Wraps `value` so that formatting it quotes at most [`QUOTE_LIMIT`] characters.
pub(crate) fn brief<T: fmt::Display + ?Sized>(value: &T) -> Brief<'_, T> {
    Brief(value)
}

/// A writer that keeps the first [`QUOTE_LIMIT`] characters and refuses the rest.
struct Bounded {
    kept: String,
    count: usize,
    cut: bool,
}

impl fmt::Write for Bounded {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        for c in text.chars() {
            if self.count == QUOTE_LIMIT {
                self.cut = true;
                // Stops the value's Display early; the error never reaches a caller's writer.
                return Err(fmt::Error);
            }
            self.kept.push(c);
            self.count += 1;
        }
        Ok(())
    }
}

/// Writes what `show` writes, cut after [`QUOTE_LIMIT`] characters with `…`.
fn write_bounded(
    f: &mut fmt::Formatter<'_>,
    show: impl FnOnce(&mut Bounded) -> fmt::Result,
) -> fmt::Result {
    let mut bounded = Bounded {
        kept: String::new(),
        count: 0,
        cut: false,
    };
    // An error here only means the bounded writer is full.
    let _ = show(&mut bounded);
    f.write_str(&bounded.kept)?;
    if bounded.cut {
        f.write_str("…")?;
    }
    Ok(())
}

impl<T: fmt::Display + ?Sized> fmt::Display for Brief<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_bounded(f, |w| write!(w, "{}", self.0))
    }
}

/// A value's `Debug` form (a list of extents, an order) as an error message shows it, cut
/// like [`Brief`].
pub(crate) struct BriefDebug<'a, T: ?Sized>(&'a T);

/// Wraps `value` so that displaying it quotes at most [`QUOTE_LIMIT`] characters of its
/// `Debug` form.
pub(crate) fn brief_debug<T: fmt::Debug + ?Sized>(value: &T) -> BriefDebug<'_, T> {
    BriefDebug(value)
}

impl<T: fmt::Debug + ?Sized> fmt::Display for BriefDebug<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_bounded(f, |w| write!(w, "{:?}", self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quote_escapes_and_cuts() {
        assert_eq!(quote("a\"b\n"), "\"a\\\"b\\n\"");
        let long = "x".repeat(100);
        assert_eq!(
            quote(&long),
            format!("\"{}\"… (100 characters)", "x".repeat(QUOTE_LIMIT))
        );
        assert_eq!(quote(&"x".repeat(QUOTE_LIMIT)).len(), QUOTE_LIMIT + 2);
        // Escapes count against the limit: 100 control characters quote as 10 of them.
        let controls = "\u{1d}".repeat(100);
        assert_eq!(
            quote(&controls),
            format!("\"{}\"… (100 characters)", "\\u{1d}".repeat(10))
        );
    }

    #[test]
    fn brief_cuts_long_values_only() {
        assert_eq!(brief("short").to_string(), "short");
        let long = "y".repeat(QUOTE_LIMIT + 1);
        assert_eq!(
            brief(long.as_str()).to_string(),
            format!("{}…", "y".repeat(QUOTE_LIMIT))
        );
    }
}
