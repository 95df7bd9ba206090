//! `eq`, `lt` and `le`: Bool results, no gradients.

use crate::operation::builtin::spec::{Arity, BuiltinSpec, ShapeRule};
use crate::operation::planning::Family;

/// `eq`: also compares Bool tensors.
pub(super) const EQ: BuiltinSpec = BuiltinSpec {
    arity: Arity::Compare,
    rule: ShapeRule::Broadcast,
    family: Family::Compare { accepts_bool: true },
    saved: &[],
    vjp: None,
    shapes_only: false,
};

/// `lt`.
pub(super) const LT: BuiltinSpec = BuiltinSpec {
    family: Family::Compare {
        accepts_bool: false,
    },
    ..EQ
};

/// `le`.
pub(super) const LE: BuiltinSpec = LT;
