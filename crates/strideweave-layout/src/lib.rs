//! The StrideWeave layout algebra: CuTe-style hierarchical layouts, pure and
//! dependency-free.
//!
//! A [`Layout`] pairs a hierarchical [`Shape`] with a [`Stride`] of the same tree and maps a
//! coordinate `c` to `Σ c_leaf · stride_leaf`. Every order is colexicographic (first mode
//! fastest). The algebra — [`Layout::coalesce`], composition, complement, division,
//! products, inverses — follows CuTe, with every failure reported as a [`LayoutError`]
//! instead of an assertion.
//!
//! ```
//! use strideweave_layout::Layout;
//! let a: Layout = "(4,2,3):(2,1,8)".parse()?;
//! let tile: Layout = "4:2".parse()?;
//! assert_eq!(a.divide(&tile)?.to_string(), "((2,2),(2,3)):((4,1),(2,8))");
//! # Ok::<(), strideweave_layout::LayoutError>(())
//! ```

mod complement;
mod compose;
mod divide;
mod error;
mod index_map;
mod indices;
mod int_tuple;
mod inverse;
mod layout;
mod node;
mod notation;
mod product;
mod profile;
mod rearrange;
mod shape;
mod small;
mod stride;
mod view;

pub use error::{LayoutError, Result};
pub use index_map::{ComposedMap, Composition, IndexMap};
pub use indices::Indices;
pub use int_tuple::IntTuple;
pub use layout::Layout;
pub use profile::{Profile, ProfileToken};
pub use rearrange::{Tree, TreeNode};
pub use shape::Shape;
pub use stride::Stride;
pub use view::SliceKey;
