//! [`TileLocation`] and [`TileState`]: where one tile of a TiledEvictable lives.

use std::fmt;

/// Where the valid copy of one tile lives (docs/tiers.md, Tile state and residency:
/// `tile_state(c).location()` is primary, secondary, implicit or invalid).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TileLocation {
    /// The valid copy lives on the primary (fast) tier.
    Primary,
    /// The valid copy lives on the secondary (slow) tier.
    Secondary,
    /// The tile has no storage and reads as the dtype's zero.
    Implicit,
    /// The tile has no valid contents: reading it is a Runtime error naming the tile.
    Invalid,
}

impl TileLocation {
    /// The lower-case name used in messages: `primary`, `secondary`, `implicit`, `invalid`.
    pub fn name(self) -> &'static str {
        match self {
            TileLocation::Primary => "primary",
            TileLocation::Secondary => "secondary",
            TileLocation::Implicit => "implicit",
            TileLocation::Invalid => "invalid",
        }
    }
}

impl fmt::Display for TileLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The state of one tile: its [`TileLocation`], whether it is valid, and whether it is dirty.
///
/// docs/tiers.md, Tile state and residency: `tile_state(c)` reports `location` plus `valid` and
/// `dirty`. Invariants:
/// 1. `valid` is true exactly when the location is not [`TileLocation::Invalid`];
/// 2. `dirty` means the tile was written through the TiledEvictable since it was seeded or
///    last evicted (an eviction writes the contents back to the secondary tier and clears it;
///    a promotion keeps it; an invalid tile is never dirty).
///
/// An immutable record: read it through its getters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TileState {
    location: TileLocation,
    dirty: bool,
}

impl TileState {
    /// The state of a tile at `location`, `dirty` or clean (an invalid tile is never dirty).
    pub(crate) fn new(location: TileLocation, dirty: bool) -> TileState {
        TileState {
            location,
            dirty: dirty && location != TileLocation::Invalid,
        }
    }

    /// Where the tile's valid copy lives.
    pub fn location(&self) -> TileLocation {
        self.location
    }

    /// Whether the tile has valid contents (invariant 1).
    pub fn is_valid(&self) -> bool {
        self.location != TileLocation::Invalid
    }

    /// Whether the tile was written since it was seeded or last evicted (invariant 2).
    pub fn is_dirty(&self) -> bool {
        self.dirty
    }
}

impl fmt::Display for TileState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}{}",
            self.location,
            if self.dirty { " (dirty)" } else { "" }
        )
    }
}
