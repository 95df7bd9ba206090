//! `eq`, `lt` and `le`: Bool results, no gradients.

use crate::operation::builtin::kernel::{KernelKind, TestFn};
use crate::operation::builtin::spec::{Accuracy, Arity, BuiltinSpec, Domain, ShapeRule};
use crate::operation::planning::Family;

/// `eq`: also compares Bool tensors.
pub(super) const EQ: BuiltinSpec = BuiltinSpec {
    name: "eq",
    arity: Arity::Compare,
    rule: ShapeRule::Broadcast,
    family: Family::Compare { accepts_bool: true },
    kernel: KernelKind::Test(TestFn::Equal),
    domain: Domain::Everywhere,
    accuracy: Accuracy::Exact,
    central: false,
    saved: &[],
    vjp: None,
    shapes_only: false,
};

/// `lt`.
pub(super) const LT: BuiltinSpec = BuiltinSpec {
    name: "lt",
    kernel: KernelKind::Test(TestFn::Less),
    family: Family::Compare {
        accepts_bool: false,
    },
    ..EQ
};

/// `le`.
pub(super) const LE: BuiltinSpec = BuiltinSpec {
    name: "le",
    kernel: KernelKind::Test(TestFn::LessOrEqual),
    ..LT
};
