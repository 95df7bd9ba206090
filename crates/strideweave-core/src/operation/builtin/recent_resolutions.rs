//! The resolutions of recent built-in calls, remembered per thread.
//!
//! A built-in resolves a call from two things: its plan key (the operands' dtypes, the weak
//! scalars' kinds, the accumulator request) gives the plan, and its tensor operands' layouts
//! give the result layout by the built-in's shape rule. Layouts are immutable and shared
//! (compact tensors and results of one shape share one layout object), so a call in a loop
//! meets the same key and the same layout objects again, and they resolve to the same plan
//! and result specification: a thread keeps its last few resolutions, found by built-in, key
//! and layout objects. Each entry holds its operand layouts alive, so their addresses cannot
//! be reused by other layouts while it is kept. A failed resolution is never remembered, so
//! it is reported on every call.

use std::cell::RefCell;

use super::{Builtin, PlanKey, KEY_OPERANDS};
use crate::operation::invocation::ResultSpec;
use crate::operation::plan::OperationPlan;
use crate::tensor::shared_layout::SharedLayout;

/// How many resolutions a thread keeps.
const RECENT: usize = 4;

/// The layout object of each operand position: `None` for a weak scalar and past the last
/// operand.
pub(super) type OperandLayouts<'a> = [Option<&'a SharedLayout>; KEY_OPERANDS];

/// One remembered resolution.
struct Resolution {
    builtin: Builtin,
    key: PlanKey,
    layouts: [Option<SharedLayout>; KEY_OPERANDS],
    plan: OperationPlan,
    result: ResultSpec,
}

impl Resolution {
    fn matches(&self, builtin: Builtin, key: &PlanKey, layouts: &OperandLayouts<'_>) -> bool {
        self.builtin == builtin
            && self.key == *key
            && self
                .layouts
                .iter()
                .zip(layouts)
                .all(|(kept, given)| match (kept, given) {
                    (Some(kept), Some(given)) => SharedLayout::same(kept, given),
                    (None, None) => true,
                    _ => false,
                })
    }
}

/// A small ring of recent resolutions.
struct Recent {
    resolutions: [Option<Resolution>; RECENT],
    next: usize,
}

thread_local! {
    static RECENT_RESOLUTIONS: RefCell<Recent> = const {
        RefCell::new(Recent { resolutions: [const { None }; RECENT], next: 0 })
    };
}

/// The plan and result specification this thread resolved last for `builtin` with `key` over
/// operands laid out as `layouts` (the same layout objects), if it still keeps them.
#[inline]
pub(super) fn find(
    builtin: Builtin,
    key: &PlanKey,
    layouts: &OperandLayouts<'_>,
) -> Option<(OperationPlan, ResultSpec)> {
    RECENT_RESOLUTIONS
        .try_with(|recent| {
            let recent = recent.try_borrow().ok()?;
            recent
                .resolutions
                .iter()
                .flatten()
                .find(|r| r.matches(builtin, key, layouts))
                .map(|r| (r.plan.clone(), r.result.clone()))
        })
        .ok()
        .flatten()
}

/// Remembers that `builtin` with `key` over `layouts` resolved to `plan` and `result`,
/// replacing the oldest resolution kept.
pub(super) fn remember(
    builtin: Builtin,
    key: PlanKey,
    layouts: &OperandLayouts<'_>,
    plan: &OperationPlan,
    result: &ResultSpec,
) {
    let _ = RECENT_RESOLUTIONS.try_with(|recent| {
        let Ok(mut recent) = recent.try_borrow_mut() else {
            return;
        };
        let slot = recent.next;
        recent.next = (slot + 1) % RECENT;
        if let Some(entry) = recent.resolutions.get_mut(slot) {
            *entry = Some(Resolution {
                builtin,
                key,
                layouts: layouts.map(|layout| layout.cloned()),
                plan: plan.clone(),
                result: result.clone(),
            });
        }
    });
}

#[cfg(test)]
mod tests {
    use super::super::KeyOperand;
    use super::*;
    use crate::dtype::DType;
    use crate::operation::planning::{plan_builtin, PlanOperand};

    fn layout(text: &str) -> SharedLayout {
        SharedLayout::counted(text.parse().unwrap())
    }

    fn key(dtype: DType) -> PlanKey {
        PlanKey {
            operands: [
                Some(KeyOperand::Tensor(dtype)),
                Some(KeyOperand::Tensor(dtype)),
                None,
            ],
            accumulator: None,
        }
    }

    fn plan(dtype: DType) -> OperationPlan {
        plan_builtin(Builtin::Add, &[PlanOperand::Tensor(dtype); 2], None).unwrap()
    }

    #[test]
    fn the_same_key_and_layout_objects_find_the_remembered_resolution() {
        let (a, b) = (layout("(2,3):(1,2)"), layout("(2,3):(1,2)"));
        let result = ResultSpec::shared(DType::FLOAT32, a.clone());
        let float = key(DType::FLOAT32);
        remember(
            Builtin::Add,
            float,
            &[Some(&a), Some(&b), None],
            &plan(DType::FLOAT32),
            &result,
        );
        let (found_plan, found_result) =
            find(Builtin::Add, &float, &[Some(&a), Some(&b), None]).expect("remembered");
        assert_eq!(found_plan, plan(DType::FLOAT32));
        assert_eq!(found_result.dtype(), DType::FLOAT32);
        assert!(SharedLayout::same(found_result.shared_layout(), &a));
    }

    #[test]
    fn another_builtin_key_layout_object_or_operand_position_is_not_found() {
        let (a, b) = (layout("(4):(1)"), layout("(4):(1)"));
        let float = key(DType::FLOAT32);
        let result = ResultSpec::shared(DType::FLOAT32, a.clone());
        remember(
            Builtin::Add,
            float,
            &[Some(&a), Some(&b), None],
            &plan(DType::FLOAT32),
            &result,
        );
        assert!(find(Builtin::Sub, &float, &[Some(&a), Some(&b), None]).is_none());
        assert!(find(
            Builtin::Add,
            &key(DType::INT32),
            &[Some(&a), Some(&b), None]
        )
        .is_none());
        // An equal layout in another object, the operands swapped, a scalar in a tensor's place.
        let equal = layout("(4):(1)");
        assert!(find(Builtin::Add, &float, &[Some(&equal), Some(&b), None]).is_none());
        assert!(find(Builtin::Add, &float, &[Some(&b), Some(&a), None]).is_none());
        assert!(find(Builtin::Add, &float, &[Some(&a), None, None]).is_none());
        assert!(find(Builtin::Add, &float, &[Some(&a), Some(&b), None]).is_some());
    }

    #[test]
    fn older_resolutions_make_room_for_newer_ones() {
        let layouts: Vec<SharedLayout> = (1..=RECENT + 2)
            .map(|n| layout(&format!("({n}):(1)")))
            .collect();
        let float = key(DType::FLOAT32);
        for l in &layouts {
            let result = ResultSpec::shared(DType::FLOAT32, l.clone());
            remember(
                Builtin::Mul,
                float,
                &[Some(l), Some(l), None],
                &plan(DType::FLOAT32),
                &result,
            );
        }
        let kept: Vec<bool> = layouts
            .iter()
            .map(|l| find(Builtin::Mul, &float, &[Some(l), Some(l), None]).is_some())
            .collect();
        let mut expected = vec![false; 2];
        expected.extend([true; RECENT]);
        assert_eq!(kept, expected);
    }

    #[test]
    fn calls_over_one_shared_layout_resolve_by_dtype_and_errors_repeat() -> crate::Result<()> {
        use crate::carriers::Cpu;
        use crate::error::ErrorKind;
        use crate::tensor::Tensor;
        use crate::{ops, Shape, Value};
        let f = Tensor::compact(Cpu::from_f32(&[1.0, 2.0], true)?, Shape::new(2)?)?;
        let i = Tensor::compact(Cpu::from_i32(&[3, 4], true)?, Shape::new(2)?)?;
        assert!(SharedLayout::same(f.shared_layout(), i.shared_layout()));
        for _ in 0..2 {
            let y = ops::add(&f, &f)?;
            assert_eq!(y.dtype(), DType::FLOAT32);
            assert_eq!(y.to_values()?, [Value::Float(2.0), Value::Float(4.0)]);
            let z = ops::add(&i, &i)?;
            assert_eq!(z.dtype(), DType::INT32);
            assert_eq!(z.to_values()?, [Value::Int(6), Value::Int(8)]);
        }
        let wide = Tensor::compact(Cpu::from_f32(&[1.0; 3], true)?, Shape::new(3)?)?;
        for _ in 0..2 {
            let error = ops::add(&f, &wide).unwrap_err();
            assert_eq!(error.kind(), ErrorKind::Value);
            assert!(error.to_string().contains("cannot broadcast"), "{error}");
        }
        Ok(())
    }
}
