//! [`TileCopy`] and [`Tier`]: where the slots of one tile's valid copy are stored.

use crate::TileLocation;
use strideweave_core::carrier::{Carrier, OwnershipToken};
use strideweave_core::dtype::Value;
use strideweave_core::error::Result;

/// One of the two tiers of a TiledEvictable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tier {
    Primary,
    Secondary,
}

impl Tier {
    /// The location of a tile whose valid copy is on this tier.
    pub(crate) fn location(self) -> TileLocation {
        match self {
            Tier::Primary => TileLocation::Primary,
            Tier::Secondary => TileLocation::Secondary,
        }
    }

    /// The lower-case name used in messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Tier::Primary => "primary",
            Tier::Secondary => "secondary",
        }
    }
}

/// The storage of one tile's copy on a tier.
#[derive(Debug, Clone)]
pub(crate) enum TileCopy {
    /// The tile's home slots in the tier carrier the TiledEvictable was constructed over (the
    /// full *seed* tier): logical slot `s` of the tile is slot `s` there.
    Seed,
    /// A carrier of `tile_size` slots made by the tier's own factory: local index `l`
    /// (canonical over the tile shape) is slot `l`.
    Own(Carrier),
}

impl TileCopy {
    /// The value of the tile's local index `local` (logical `slot`), read from this copy on
    /// the tier owned through `seed`.
    pub(crate) fn read(&self, seed: &OwnershipToken, slot: usize, local: usize) -> Result<Value> {
        match self {
            TileCopy::Seed => seed.carrier().get(slot),
            TileCopy::Own(carrier) => carrier.get(local),
        }
    }

    /// Writes `value` at the tile's local index `local` (logical `slot`) of this copy; a seed
    /// write runs inside the owner's access scope.
    pub(crate) fn write(
        &self,
        seed: &OwnershipToken,
        slot: usize,
        local: usize,
        value: Value,
    ) -> Result<()> {
        match self {
            TileCopy::Seed => {
                let _access = seed.access()?;
                seed.carrier().set(slot, value)
            }
            TileCopy::Own(carrier) => carrier.set(local, value),
        }
    }

    /// Drops this copy: an own carrier is released (best effort: the copy is no longer
    /// referenced either way); seed slots simply become stale.
    pub(crate) fn discard(&self) {
        if let TileCopy::Own(carrier) = self {
            let _ = carrier.release();
        }
    }
}
