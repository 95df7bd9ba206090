//! `IntTuple`: the written form of hierarchical shapes, strides and coordinates.

use std::fmt;

/// A nested tuple of integers: how shapes, strides and coordinates are written.
///
/// A [`Shape`](crate::Shape) or [`Stride`](crate::Stride) is built from one, and a
/// coordinate passed to [`Layout::index`](crate::Layout::index) or
/// [`Shape::encode`](crate::Shape::encode) is one. In a coordinate an integer may stand for a
/// whole subtree: it is then that subtree's colexicographic ordinal.
///
/// Every consumer in this crate measures the depth ([`IntTuple::depth`]) without recursion
/// and rejects a tree deeper than [`MAX_NESTING`](crate::MAX_NESTING) before walking it;
/// `Display` works on any depth. The derived `Clone`, `Debug`, `PartialEq`, `Hash` and drop
/// recurse like those of any Rust tree, so a caller that builds a far deeper tree itself
/// should take it apart iteratively.
///
/// Rust integers, arrays, vectors and tuples convert into it, so shapes read naturally:
///
/// ```
/// use strideweave_layout::IntTuple;
/// let written: IntTuple = (2, (3, 4)).into();
/// assert_eq!(written.to_string(), "(2,(3,4))");
/// assert_eq!(IntTuple::from([1, 2]), IntTuple::Tuple(vec![1.into(), 2.into()]));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum IntTuple {
    /// A single integer.
    Int(i64),
    /// An integer outside `i64`, from a `u64`, `usize`, `isize` or `i128` conversion. It is
    /// kept exactly rather than clamped, and every consumer — [`Shape::new`](crate::Shape::new),
    /// [`Stride::new`](crate::Stride::new), coordinates — rejects it with an error naming it.
    Wide(i128),
    /// A tuple of nested items (possibly empty).
    Tuple(Vec<IntTuple>),
}

impl IntTuple {
    /// The empty tuple `()`.
    pub fn unit() -> Self {
        IntTuple::Tuple(Vec::new())
    }

    /// The nesting depth, counted like [`Profile::depth`](crate::Profile::depth): 1 for an
    /// integer or a tuple of integers, one more per level of nesting. Computed without
    /// recursion, so it is safe on any tree; consumers reject a depth beyond
    /// [`MAX_NESTING`](crate::MAX_NESTING).
    pub fn depth(&self) -> usize {
        let IntTuple::Tuple(items) = self else {
            return 1;
        };
        let mut deepest = 1;
        let mut stack: Vec<(std::slice::Iter<'_, IntTuple>, usize)> = vec![(items.iter(), 1)];
        while let Some((iter, depth)) = stack.last_mut() {
            let depth = *depth;
            match iter.next() {
                None => {
                    stack.pop();
                }
                Some(IntTuple::Tuple(children)) => {
                    deepest = deepest.max(depth + 1);
                    stack.push((children.iter(), depth + 1));
                }
                Some(_) => {}
            }
        }
        deepest
    }
}

/// Takes a written tree apart without recursion, so that dropping even a very deep one
/// cannot overflow the stack.
pub(crate) fn dismantle(tree: IntTuple) {
    let mut stack = vec![tree];
    while let Some(node) = stack.pop() {
        if let IntTuple::Tuple(items) = node {
            stack.extend(items);
        }
    }
}

/// Prints the notation (`(2,(3,4))`) without recursion, so any depth prints.
impl fmt::Display for IntTuple {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let items = match self {
            IntTuple::Int(value) => return write!(f, "{value}"),
            IntTuple::Wide(value) => return write!(f, "{value}"),
            IntTuple::Tuple(items) => items,
        };
        f.write_str("(")?;
        // Each open tuple: its remaining items and whether one was written yet.
        let mut stack: Vec<(std::slice::Iter<'_, IntTuple>, bool)> = vec![(items.iter(), false)];
        while let Some((iter, written)) = stack.last_mut() {
            let Some(item) = iter.next() else {
                f.write_str(")")?;
                stack.pop();
                continue;
            };
            if std::mem::replace(written, true) {
                f.write_str(",")?;
            }
            match item {
                IntTuple::Int(value) => write!(f, "{value}")?,
                IntTuple::Wide(value) => write!(f, "{value}")?,
                IntTuple::Tuple(children) => {
                    f.write_str("(")?;
                    stack.push((children.iter(), false));
                }
            }
        }
        Ok(())
    }
}

macro_rules! from_signed {
    ($($t:ty),*) => {$(
        impl From<$t> for IntTuple {
            fn from(value: $t) -> Self {
                IntTuple::Int(i64::from(value))
            }
        }
    )*};
}
from_signed!(i8, i16, i32, i64, u8, u16, u32);

macro_rules! from_wide {
    ($($t:ty),*) => {$(
        /// A value beyond `i64` becomes [`IntTuple::Wide`], never a clamped one, so the
        /// shape, stride or coordinate it is used for rejects it by its exact value.
        impl From<$t> for IntTuple {
            fn from(value: $t) -> Self {
                match i64::try_from(value) {
                    Ok(value) => IntTuple::Int(value),
                    // Lossless: every supported target's usize and isize are at most 64 bits.
                    Err(_) => IntTuple::Wide(value as i128),
                }
            }
        }
    )*};
}
from_wide!(u64, usize, isize);

/// A value beyond `i64` becomes [`IntTuple::Wide`], never a clamped one.
impl From<i128> for IntTuple {
    fn from(value: i128) -> Self {
        match i64::try_from(value) {
            Ok(value) => IntTuple::Int(value),
            Err(_) => IntTuple::Wide(value),
        }
    }
}

impl<T: Into<IntTuple>, const N: usize> From<[T; N]> for IntTuple {
    fn from(items: [T; N]) -> Self {
        IntTuple::Tuple(items.into_iter().map(Into::into).collect())
    }
}

impl<T: Into<IntTuple>> From<Vec<T>> for IntTuple {
    fn from(items: Vec<T>) -> Self {
        IntTuple::Tuple(items.into_iter().map(Into::into).collect())
    }
}

impl<T: Into<IntTuple> + Clone> From<&[T]> for IntTuple {
    fn from(items: &[T]) -> Self {
        IntTuple::Tuple(items.iter().cloned().map(Into::into).collect())
    }
}

impl From<()> for IntTuple {
    fn from(_: ()) -> Self {
        IntTuple::unit()
    }
}

macro_rules! from_tuple {
    ($($name:ident),+) => {
        impl<$($name: Into<IntTuple>),+> From<($($name,)+)> for IntTuple {
            #[allow(non_snake_case)]
            fn from(($($name,)+): ($($name,)+)) -> Self {
                IntTuple::Tuple(vec![$($name.into()),+])
            }
        }
    };
}
from_tuple!(A);
from_tuple!(A, B);
from_tuple!(A, B, C);
from_tuple!(A, B, C, D);
from_tuple!(A, B, C, D, E);
from_tuple!(A, B, C, D, E, F);
from_tuple!(A, B, C, D, E, F, G);
from_tuple!(A, B, C, D, E, F, G, H);
