//! The package of the tour (`cargo run --release --example tour`): an unpublished workspace
//! member that depends on both `strideweave` and `strideweave-wgpu`, so the tour can show the
//! GPU carrier while the core crate stays free of wgpu. The tour itself is
//! `examples/tour.rs`; this library is empty.
