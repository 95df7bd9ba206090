//! The result layouts a shape rule derived from operand layouts, remembered per thread.
//!
//! A reduction or a contraction in a loop meets the same operand layouts call after call
//! (compact tensors and results of one shape share one `Arc<Layout>`), and deriving its result
//! layout walks the shapes and looks the canonical layout up by value each time. Layouts are
//! immutable, so the result derived from the same operand layout objects is the same: a thread
//! keeps its last few derivations keyed by the operands' layout objects. Each entry holds its
//! operand layouts alive, so their addresses cannot be reused by other layouts while it is kept.

use std::cell::RefCell;
use std::sync::Arc;

use strideweave_layout::Layout;

use crate::error::Result;
use crate::operation::builtin::spec::ShapeRule;

/// How many derivations a thread keeps.
const RECENT: usize = 4;

/// Operand layouts per derivation (a contraction has two).
const OPERANDS: usize = 2;

/// One remembered derivation.
struct Derivation {
    rule: ShapeRule,
    operands: [Option<Arc<Layout>>; OPERANDS],
    result: Arc<Layout>,
}

impl Derivation {
    fn matches(&self, rule: ShapeRule, operands: &[&Arc<Layout>]) -> bool {
        self.rule == rule
            && self.operands.iter().filter(|o| o.is_some()).count() == operands.len()
            && self
                .operands
                .iter()
                .zip(operands)
                .all(|(kept, given)| kept.as_ref().is_some_and(|k| Arc::ptr_eq(k, given)))
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
    operands: &[&Arc<Layout>],
    derive: impl FnOnce() -> Result<Arc<Layout>>,
) -> Result<Arc<Layout>> {
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
                .map(|d| Arc::clone(&d.result))
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
        let mut kept = [const { None }; OPERANDS];
        for (slot, layout) in kept.iter_mut().zip(operands) {
            *slot = Some(Arc::clone(layout));
        }
        let slot = recent.next;
        recent.next = (slot + 1) % RECENT;
        if let Some(entry) = recent.derivations.get_mut(slot) {
            *entry = Some(Derivation {
                rule,
                operands: kept,
                result: Arc::clone(&result),
            });
        }
    });
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    fn layout(text: &str) -> Arc<Layout> {
        Arc::new(text.parse().unwrap())
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
        assert!(Arc::ptr_eq(&first, &again));
    }

    #[test]
    fn an_equal_layout_in_another_object_another_rule_or_order_is_derived_anew() {
        let (a, b) = (layout("(2,3):(1,2)"), layout("(2,3):(1,2)"));
        let calls = std::cell::Cell::new(0);
        let derive = |rule, operands: &[&Arc<Layout>]| {
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
        let layouts: Vec<Arc<Layout>> = (1..=RECENT + 2)
            .map(|n| layout(&format!("({n},2):(1,{n})")))
            .collect();
        for l in &layouts {
            derived_layout(ShapeRule::ReduceMode1, &[l], || Ok(Arc::clone(l))).unwrap();
        }
        let mut derived_again = 0;
        for l in &layouts {
            let result = derived_layout(ShapeRule::ReduceMode1, &[l], || {
                derived_again += 1;
                Ok(Arc::clone(l))
            })
            .unwrap();
            assert!(Arc::ptr_eq(&result, l));
        }
        // Cycling through more layouts than the ring keeps evicts each before it comes back.
        assert_eq!(derived_again, layouts.len());
    }
}
