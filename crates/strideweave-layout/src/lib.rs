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
//!
//! # Hostile input
//!
//! Every function of the crate is total and bounded: any input gives a value or a
//! [`LayoutError`], never a panic, a stack overflow, an enumeration of indices or an
//! allocation proportional to a layout's size.
//!
//! - **Nesting** is limited to [`MAX_NESTING`] (64) levels. The parser, [`Shape::new`],
//!   [`Stride::new`], [`Layout::rearrange`] and every operation that builds a deeper tree
//!   fail with a message naming the limit and the depth found; depths are measured and
//!   written trees converted without recursion, so the recursive walks of the algebra never
//!   run deeper than the limit allows.
//! - **Values** beyond `i64` are never clamped: a `u64`, `usize`, `isize` or `i128` too large
//!   for `i64` becomes [`IntTuple::Wide`], which shapes, strides and coordinates reject by
//!   its exact value.
//! - **Injectivity** is decided exactly from the leaves, in time independent of the extents
//!   (see [`Layout::try_is_injective`]); the one residual search is bounded by
//!   [`INJECTIVITY_SEARCH_BUDGET`] and reports an error when it runs out.
//! - **Messages** quote at most [`QUOTE_LIMIT`] characters of any value, with control
//!   characters escaped.
//!
//! The crate has no `unsafe` code (`#![forbid(unsafe_code)]`).
//!
//! # Fuzzing
//!
//! `crates/strideweave-layout/fuzz/` holds `cargo fuzz`
//! targets for the parser (`parse`) and the algebra (`algebra`). They are a separate
//! workspace, not built by `cargo test --workspace` and not part of CI; they need a nightly
//! toolchain and `cargo install cargo-fuzz`, then, from `crates/strideweave-layout/`:
//! `cargo +nightly fuzz run parse -- -max_total_time=60` (see `fuzz/README.md`). The test
//! suite's `tests/hostile.rs` runs the same properties on stable.

#![forbid(unsafe_code)]

mod complement;
mod compose;
mod divide;
mod error;
mod index_map;
mod indices;
mod injective;
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

pub use error::{LayoutError, Result, QUOTE_LIMIT};
pub use index_map::{ComposedMap, Composition, IndexMap};
pub use indices::Indices;
pub use injective::INJECTIVITY_SEARCH_BUDGET;
pub use int_tuple::IntTuple;
pub use layout::Layout;
pub use profile::{Profile, ProfileToken, MAX_NESTING};
pub use rearrange::{Tree, TreeNode};
pub use shape::Shape;
pub use stride::Stride;
pub use view::SliceKey;
