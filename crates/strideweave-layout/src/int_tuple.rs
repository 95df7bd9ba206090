//! `IntTuple`: the written form of hierarchical shapes, strides and coordinates.

use std::fmt;

/// A nested tuple of integers: how shapes, strides and coordinates are written.
///
/// A [`Shape`](crate::Shape) or [`Stride`](crate::Stride) is built from one, and a
/// coordinate passed to [`Layout::index`](crate::Layout::index) or
/// [`Shape::encode`](crate::Shape::encode) is one. In a coordinate an integer may stand for a
/// whole subtree: it is then that subtree's colexicographic ordinal.
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
    /// A tuple of nested items (possibly empty).
    Tuple(Vec<IntTuple>),
}

impl IntTuple {
    /// The empty tuple `()`.
    pub fn unit() -> Self {
        IntTuple::Tuple(Vec::new())
    }
}

impl fmt::Display for IntTuple {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IntTuple::Int(value) => write!(f, "{value}"),
            IntTuple::Tuple(items) => {
                f.write_str("(")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_str(")")
            }
        }
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
        /// Values beyond `i64::MAX` saturate; every extent and ordinal is below that bound,
        /// so a saturated value is always rejected as out of range rather than wrapped.
        impl From<$t> for IntTuple {
            fn from(value: $t) -> Self {
                IntTuple::Int(i64::try_from(value).unwrap_or(i64::MAX))
            }
        }
    )*};
}
from_wide!(u64, usize, isize);

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
