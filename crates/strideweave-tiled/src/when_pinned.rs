//! [`WhenPinned`]: what a residency request does about a tile a running operation pins.

/// What a residency request does when a tile it would move is **pinned** — being read or
/// written by a running tiled operation, or by one element access (docs/tiers.md, Pinned
/// tiles).
///
/// Either way no pinned tile's copy is ever replaced under the work using it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum WhenPinned {
    /// Wait until every pin on the moving tiles is released, then start (the default of
    /// `promote_async` / `evict_async`). A request made from inside the pinned work itself —
    /// a policy's progress hook, a tier calling back — cannot wait for itself and fails with
    /// a Runtime error instead.
    #[default]
    Wait,
    /// Fail at once with a Runtime error naming the pinned tile; nothing changes.
    Fail,
}
