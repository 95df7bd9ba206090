//! The CuTe text notation: `"(4,(2,3)):(1,(4,8))"`, `"8:2"`, `"():()"`.
//!
//! A rank-1 leaf prints bare (`8:2`); every other tree prints its top-level tuple in
//! parentheses. Parsing also accepts square brackets and spaces, and reports a malformed
//! string as a [`LayoutError`] naming the byte position. A string whose brackets nest deeper
//! than [`MAX_NESTING`] is rejected before the recursive descent starts, so the descent never
//! goes deeper than that limit; messages quote at most
//! [`QUOTE_LIMIT`](crate::QUOTE_LIMIT) characters of the input, escaped.

use std::fmt;
use std::str::FromStr;

use crate::error::{fail, quote, LayoutError, Result};
use crate::layout::Layout;
use crate::node::Node;
use crate::profile::{Profile, ProfileToken, MAX_NESTING};
use crate::shape::Shape;
use crate::stride::Stride;

/// Writes a flattened tree in the notation.
pub(crate) fn write_tree(
    f: &mut fmt::Formatter<'_>,
    profile: &Profile,
    values: &[usize],
) -> fmt::Result {
    let tokens = profile.tokens();
    if tokens == [ProfileToken::Leaf] {
        return write!(f, "{}", values[0]);
    }
    f.write_str("(")?;
    let mut leaf = 0;
    let mut need_comma = false;
    for token in tokens {
        match token {
            ProfileToken::Leaf => {
                if need_comma {
                    f.write_str(",")?;
                }
                write!(f, "{}", values[leaf])?;
                leaf += 1;
                need_comma = true;
            }
            ProfileToken::Push => {
                if need_comma {
                    f.write_str(",")?;
                }
                f.write_str("(")?;
                need_comma = false;
            }
            ProfileToken::Pop => {
                f.write_str(")")?;
                need_comma = true;
            }
        }
    }
    f.write_str(")")
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.shape(), self.stride())
    }
}

impl fmt::Debug for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Layout({self})")
    }
}

/// A recursive-descent reader of one tree of non-negative integers.
struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Parser<'a> {
    fn new(text: &'a str, what: &'static str) -> Self {
        Parser {
            text,
            bytes: text.as_bytes(),
            pos: 0,
            what,
        }
    }

    fn skip_spaces(&mut self) {
        while self.pos < self.bytes.len() && self.bytes[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }

    fn error<T>(&self, expected: &str) -> Result<T> {
        let found = match self
            .text
            .get(self.pos..)
            .and_then(|rest| rest.chars().next())
        {
            Some(c) => format!("{c:?}"),
            None => "the end".to_string(),
        };
        fail!(
            "malformed {} {}: expected {expected} at position {}, found {found}",
            self.what,
            quote(self.text),
            self.pos
        )
    }

    /// Fails when the brackets of the text nest deeper than [`MAX_NESTING`], before the
    /// recursive descent starts, naming the depth reached (counted without recursion).
    fn check_nesting(&self) -> Result<()> {
        let mut depth = 0usize;
        let mut deepest = 0usize;
        for &byte in self.bytes {
            match byte {
                b'(' | b'[' => {
                    depth += 1;
                    deepest = deepest.max(depth);
                }
                b')' | b']' => depth = depth.saturating_sub(1),
                // A layout's shape and stride are two trees, measured separately.
                b':' => depth = 0,
                _ => {}
            }
        }
        if deepest > MAX_NESTING {
            fail!(
                "malformed {} {}: it nests {deepest} levels deep, beyond the limit of {MAX_NESTING} levels (MAX_NESTING)",
                self.what,
                quote(self.text)
            );
        }
        Ok(())
    }

    /// The top-level tree: a bare integer is a rank-1 leaf, a bracketed tuple its modes.
    fn top(&mut self) -> Result<Vec<Node<usize>>> {
        self.skip_spaces();
        match self.node()? {
            Node::Tuple(children) => Ok(children),
            leaf => Ok(vec![leaf]),
        }
    }

    fn node(&mut self) -> Result<Node<usize>> {
        self.skip_spaces();
        match self.bytes.get(self.pos) {
            Some(b'(') => self.tuple(b')'),
            Some(b'[') => self.tuple(b']'),
            Some(c) if c.is_ascii_digit() => self.integer(),
            _ => self.error("an integer, '(' or '['"),
        }
    }

    fn tuple(&mut self, close: u8) -> Result<Node<usize>> {
        self.pos += 1;
        let mut children = Vec::new();
        self.skip_spaces();
        if self.bytes.get(self.pos) == Some(&close) {
            self.pos += 1;
            return Ok(Node::Tuple(children));
        }
        loop {
            children.push(self.node()?);
            self.skip_spaces();
            match self.bytes.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(c) if *c == close => {
                    self.pos += 1;
                    return Ok(Node::Tuple(children));
                }
                _ => return self.error(&format!("',' or '{}'", close as char)),
            }
        }
    }

    fn integer(&mut self) -> Result<Node<usize>> {
        let start = self.pos;
        while self.pos < self.bytes.len() && self.bytes[self.pos].is_ascii_digit() {
            self.pos += 1;
        }
        match self.text[start..self.pos].parse::<i64>() {
            Ok(value) => Ok(Node::Leaf(value as usize)),
            Err(_) => fail!(
                "malformed {} {}: the integer at position {start} exceeds i64::MAX",
                self.what,
                quote(self.text)
            ),
        }
    }

    fn expect_end(&mut self) -> Result<()> {
        self.skip_spaces();
        if self.pos != self.bytes.len() {
            return self.error("the end");
        }
        Ok(())
    }
}

fn parse_tree(text: &str, what: &'static str) -> Result<Vec<Node<usize>>> {
    let mut parser = Parser::new(text, what);
    parser.check_nesting()?;
    let tree = parser.top()?;
    parser.expect_end()?;
    Ok(tree)
}

impl FromStr for Shape {
    type Err = LayoutError;

    /// Parses `"(4,(2,3))"`, `"8"` or `"()"`.
    fn from_str(text: &str) -> Result<Shape> {
        Shape::from_nodes(&parse_tree(text, "Shape")?)
    }
}

impl FromStr for Stride {
    type Err = LayoutError;

    /// Parses `"(1,(4,8))"`, `"2"` or `"()"`.
    fn from_str(text: &str) -> Result<Stride> {
        let nodes = parse_tree(text, "Stride")?;
        let (profile, values) = crate::node::from_nodes(&nodes, &"Stride")?;
        Stride::from_parts(profile, values)
    }
}

impl FromStr for Layout {
    type Err = LayoutError;

    /// Parses `"shape:stride"`, e.g. `"(4,(2,3)):(1,(4,8))"` or `"8:2"`.
    fn from_str(text: &str) -> Result<Layout> {
        let mut parser = Parser::new(text, "Layout");
        parser.check_nesting()?;
        let shape = parser.top()?;
        parser.skip_spaces();
        if parser.pos == parser.bytes.len() {
            // A shape alone: say how a layout is written, with the column-major one meant.
            let compact = Shape::from_nodes(&shape).map(|s| Layout::column_major(s).to_string());
            let example = compact.unwrap_or_else(|_| "(2,3):(1,2)".to_string());
            fail!(
                "malformed Layout {}: a layout is written shape:stride and this one has no \
                 stride; the column-major layout of that shape is \"{example}\"",
                quote(text)
            )
        }
        if parser.bytes.get(parser.pos) != Some(&b':') {
            return parser.error("':'");
        }
        parser.pos += 1;
        let stride = parser.top()?;
        parser.expect_end()?;
        let shape = Shape::from_nodes(&shape)?;
        let (profile, values) = crate::node::from_nodes(&stride, &"Stride")?;
        let stride = Stride::from_parts(profile, values)?;
        Layout::new(shape, stride)
    }
}
