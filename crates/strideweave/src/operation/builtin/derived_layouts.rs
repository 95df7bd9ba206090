//! The result layouts a shape rule derived from operand layouts, remembered per thread.
//!
//! A reduction or a contraction in a loop meets the same operand layouts call after call
//! (compact tensors and results of one shape share one layout object), and deriving its result
//! layout walks the shapes and looks the canonical layout up by value each time. Layouts are
//! immutable, so the result derived from the same operand layout objects is the same: a thread
//! keeps its last few derivations keyed by the operands' layout objects. Each entry holds its
//! operand layouts alive, so their addresses cannot be reused by other layouts while it is kept.

use std::cell::RefCell;

use crate::error::Result;
use crate::operation::builtin::spec::ShapeRule;
use crate::tensor::shared_layout::SharedLayout;

/// How many derivations a thread keeps.
const RECENT: usize = 4;

/// Operand layouts per derivation (a contraction has two).
const OPERANDS: usize = 2;

/// One remembered derivation.
struct Derivation {
    rule: ShapeRule,
    operands: [Option<SharedLayout>; OPERANDS],
    result: SharedLayout,
}

impl Derivation {
    fn matches(&self, rule: ShapeRule, operands: &[&SharedLayout]) -> bool {
        self.rule == rule
            && self.operands.iter().filter(|o| o.is_some()).count() == operands.len()
            && self
                .operands
                .iter()
                .zip(operands)
                .all(|(kept, given)| kept.as_ref().is_some_and(|k| SharedLayout::same(k, given)))
    }
}

/// A small ring of recent derivations.
struct Recent {
    derivations: [Option<Derivation>; RECENT],
    next: usize,
}

thread_local! {
    static DERIVED: RefCell<Recent> = const {
        RefCell::new(Recent { derivations: [const { None }; RECENT], next: 0 })
    };
}

/// The result layout `rule` gives for the tensor operands laid out as `operands`: what
/// `derive` returned for the same layout objects last time on this thread, or `derive`'s
/// answer now (remembered when it succeeds). An error is never remembered, so it is reported
/// on every call. More operands than a derivation keeps are derived every time.
pub(super) fn derived_layout(
    rule: ShapeRule,
    operands: &[&SharedLayout],
    derive: impl FnOnce() -> Result<SharedLayout>,
) -> Result<SharedLayout> {
    if operands.len() > OPERANDS {
        return derive();
    }
    let found = DERIVED
        .try_with(|recent| {
            let recent = recent.try_borrow().ok()?;
            recent
                .derivations
                .iter()
                .flatten()
                .find(|d| d.matches(rule, operands))
                .map(|d| d.result.clone())
        })
        .ok()
        .flatten();
    if let Some(result) = found {
        return Ok(result);
    }
    let result = derive()?;
    let _ = DERIVED.try_with(|recent| {
        let Ok(mut recent) = recent.try_borrow_mut() else {
            return;
        };
        let mut kept: [Option<SharedLayout>; OPERANDS] = [const { None }; OPERANDS];
        for (slot, layout) in kept.iter_mut().zip(operands) {
            *slot = Some((*layout).clone());
        }
        let slot = recent.next;
        recent.next = (slot + 1) % RECENT;
        if let Some(entry) = recent.derivations.get_mut(slot) {
            *entry = Some(Derivation {
                rule,
                operands: kept,
                result: result.clone(),
            });
        }
    });
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    fn layout(text: &str) -> SharedLayout {
        SharedLayout::counted(text.parse().unwrap())
    }

    #[test]
    fn the_same_operand_layout_objects_get_the_remembered_result() {
        let (a, b) = (layout("(2,3):(1,2)"), layout("(4,3):(1,4)"));
        let first =
            derived_layout(ShapeRule::Contract, &[&a, &b], || Ok(layout("(2,4):(1,2)"))).unwrap();
        let again = derived_layout(ShapeRule::Contract, &[&a, &b], || {
            panic!("a remembered derivation is not derived again")
        })
        .unwrap();
        assert!(SharedLayout::same(&first, &again));
    }

    #[test]
    fn an_equal_layout_in_another_object_another_rule_or_order_is_derived_anew() {
        let (a, b) = (layout("(2,3):(1,2)"), layout("(2,3):(1,2)"));
        let calls = std::cell::Cell::new(0);
        let derive = |rule, operands: &[&SharedLayout]| {
            derived_layout(rule, operands, || {
                calls.set(calls.get() + 1);
                Ok(layout("(2):(1)"))
            })
            .unwrap()
        };
        derive(ShapeRule::ReduceMode1, &[&a]);
        derive(ShapeRule::ReduceMode1, &[&b]);
        derive(ShapeRule::Contract, &[&a]);
        derive(ShapeRule::Contract, &[&a, &b]);
        derive(ShapeRule::Contract, &[&b, &a]);
        assert_eq!(calls.get(), 5);
        derive(ShapeRule::Contract, &[&b, &a]);
        assert_eq!(calls.get(), 5);
    }

    #[test]
    fn errors_are_not_remembered_and_older_derivations_make_room() {
        let a = layout("(2,3,4):(1,2,6)");
        for _ in 0..2 {
            let error = derived_layout(ShapeRule::ReduceMode1, &[&a], || {
                Err(Error::Value("three modes".into()))
            })
            .unwrap_err();
            assert_eq!(error.to_string(), "value error: three modes");
        }
        let layouts: Vec<SharedLayout> = (1..=RECENT + 2)
            .map(|n| layout(&format!("({n},2):(1,{n})")))
            .collect();
        for l in &layouts {
            derived_layout(ShapeRule::ReduceMode1, &[l], || Ok(l.clone())).unwrap();
        }
        let mut derived_again = 0;
        for l in &layouts {
            let result = derived_layout(ShapeRule::ReduceMode1, &[l], || {
                derived_again += 1;
                Ok(l.clone())
            })
            .unwrap();
            assert!(SharedLayout::same(&result, l));
        }
        // Cycling through more layouts than the ring keeps evicts each before it comes back.
        assert_eq!(derived_again, layouts.len());
    }
}
