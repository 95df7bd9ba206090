//! The construction checks every tier carrier (Evictable, TiledEvictable, or a tier carrier of
//! another crate) makes of its two tiers, in the order docs/tiers.md gives them (Evictable,
//! Construction).

use crate::carrier::Carrier;
use crate::error::{Error, Result};

/// Checks, in order, that `primary` and `secondary` are two distinct carriers (Value), both
/// live (Runtime, primary first), both unowned (Runtime, primary first), of one dtype
/// (Type), with an intrinsically mutable secondary (Runtime). `owner` names the tier carrier
/// being built in the messages ("an Evictable").
pub fn check_tier_pair(primary: &Carrier, secondary: &Carrier, owner: &str) -> Result<()> {
    if primary.same_as(secondary) {
        return Err(Error::Value(format!(
            "{owner} needs two distinct tiers, got the same {} carrier twice",
            primary.class()
        )));
    }
    let tiers = [("primary", primary), ("secondary", secondary)];
    for (role, tier) in tiers {
        if tier.is_released() {
            return Err(Error::Runtime(format!(
                "the {role} {} tier of {owner} is released",
                tier.class()
            )));
        }
    }
    for (role, tier) in tiers {
        if tier.is_owned() {
            return Err(Error::Runtime(format!(
                "the {role} {} tier of {owner} is owned by another carrier",
                tier.class()
            )));
        }
    }
    if primary.dtype() != secondary.dtype() {
        return Err(Error::Type(format!(
            "{} tiers must share one dtype, got {} ({}) and {} ({})",
            capitalized(owner),
            primary.dtype(),
            primary.class(),
            secondary.dtype(),
            secondary.class()
        )));
    }
    if !secondary.is_intrinsically_mutable() {
        return Err(Error::Runtime(format!(
            "the secondary {} tier of {owner} must be mutable",
            secondary.class()
        )));
    }
    Ok(())
}

/// "an Evictable" → "Evictable": the carrier's name for a sentence start.
fn capitalized(owner: &str) -> &str {
    owner.split_once(' ').map_or(owner, |(_, name)| name)
}
