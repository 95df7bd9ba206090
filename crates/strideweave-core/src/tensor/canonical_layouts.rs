//! The canonical (column-major) layouts, shared rather than rebuilt.
//!
//! A compact tensor, and a built-in's result that does not share an operand's layout (a
//! reduction, a contraction, a broadcast to a new shape), gets the column-major layout of its
//! shape. Building one allocates and walks the shape; a loop or a chain of operations asks for
//! the same few shapes again and again, and operands that share one layout compare equal by
//! address on the dispatch path. Layouts are immutable values, so handing out one shared copy is
//! invisible to every reader: equality is by value, and a kernel only reads it.
//!
//! The process keeps the canonical layout of each of the first [`KEPT`] shapes it meets for
//! its whole life, so cloning one is a copy rather than an atomic count update; a thread looks
//! its last few up without a lock.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use parking_lot::Mutex;
use strideweave_layout::{Layout, Shape};

use super::shared_layout::SharedLayout;

/// How many recent layouts a thread keeps.
const RECENT: usize = 8;

/// How many canonical layouts the process keeps for its whole life. Past this many distinct
/// shapes, canonical layouts are counted like any other, so memory stays bounded.
const KEPT: usize = 1024;

/// A small ring of recently built canonical layouts.
struct Recent {
    layouts: [Option<SharedLayout>; RECENT],
    next: usize,
}

thread_local! {
    static LAYOUTS: RefCell<Recent> = const {
        RefCell::new(Recent { layouts: [const { None }; RECENT], next: 0 })
    };
}

/// The canonical layouts kept for the life of the process, by shape.
static KEPT_LAYOUTS: LazyLock<Mutex<HashMap<Shape, &'static Layout>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// The canonical layout of `shape` kept for the process (see [`kept_in`]).
fn build(shape: Shape) -> SharedLayout {
    kept_in(&mut KEPT_LAYOUTS.lock(), KEPT, shape)
}

/// The canonical layout of `shape` from `kept`, built and added to it while it holds fewer
/// than `cap` layouts, or a counted one once it is full.
fn kept_in(kept: &mut HashMap<Shape, &'static Layout>, cap: usize, shape: Shape) -> SharedLayout {
    if let Some(layout) = kept.get(&shape) {
        return SharedLayout::Static(layout);
    }
    if kept.len() >= cap {
        return SharedLayout::Counted(Arc::new(Layout::column_major(shape)));
    }
    let layout: &'static Layout = Box::leak(Box::new(Layout::column_major(shape.clone())));
    kept.insert(shape, layout);
    SharedLayout::Static(layout)
}

/// `Layout::column_major(shape)`, shared with every earlier request for an equal shape (the
/// process keeps the first [`KEPT`] shapes it meets; a thread its last few).
pub(crate) fn canonical_layout(shape: Shape) -> SharedLayout {
    LAYOUTS
        .try_with(|recent| {
            let Ok(mut recent) = recent.try_borrow_mut() else {
                return build(shape.clone());
            };
            if let Some(found) = recent
                .layouts
                .iter()
                .flatten()
                .find(|l| *l.shape() == shape)
            {
                return found.clone();
            }
            let layout = build(shape.clone());
            let slot = recent.next;
            recent.next = (slot + 1) % RECENT;
            if let Some(entry) = recent.layouts.get_mut(slot) {
                *entry = Some(layout.clone());
            }
            layout
        })
        .unwrap_or_else(|_| build(shape))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_equal_shape_gets_the_same_layout_and_another_shape_its_own() {
        let a = canonical_layout(Shape::new((2, 3)).unwrap());
        let b = canonical_layout(Shape::new((2, 3)).unwrap());
        assert!(SharedLayout::same(&a, &b));
        assert_eq!(*a, Layout::column_major(Shape::new((2, 3)).unwrap()));
        let c = canonical_layout(Shape::new((3, 2)).unwrap());
        assert!(!SharedLayout::same(&a, &c));
        assert_eq!(*c, Layout::column_major(Shape::new((3, 2)).unwrap()));
        // A nesting that differs is another shape even with the same extents.
        let nested_layout: Layout = "((2,3)):((1,2))".parse().unwrap();
        let nested = canonical_layout(nested_layout.shape().clone());
        assert_eq!(*nested, nested_layout);
        assert_ne!(nested.shape(), a.shape());
        assert!(!SharedLayout::same(&a, &nested));
    }

    #[test]
    fn a_kept_shape_has_one_layout_object_on_every_thread() {
        let shape = Shape::new((7, 11, 13)).unwrap();
        let here = canonical_layout(shape.clone());
        let there = std::thread::spawn({
            let shape = shape.clone();
            move || canonical_layout(shape)
        })
        .join()
        .unwrap();
        assert!(matches!(here, SharedLayout::Static(_)));
        assert!(SharedLayout::same(&here, &there));
        assert_eq!(*there, Layout::column_major(shape));
    }

    #[test]
    fn past_the_cap_canonical_layouts_are_counted_and_still_right() {
        let mut kept = HashMap::new();
        let shapes: Vec<Shape> = (1..=3).map(|n| Shape::new((n, 5)).unwrap()).collect();
        let first: Vec<SharedLayout> = shapes
            .iter()
            .map(|s| kept_in(&mut kept, 2, s.clone()))
            .collect();
        assert!(matches!(first[0], SharedLayout::Static(_)));
        assert!(matches!(first[1], SharedLayout::Static(_)));
        assert!(matches!(first[2], SharedLayout::Counted(_)));
        assert_eq!(kept.len(), 2);
        let again = kept_in(&mut kept, 2, shapes[0].clone());
        assert!(SharedLayout::same(&first[0], &again));
        let counted_again = kept_in(&mut kept, 2, shapes[2].clone());
        assert!(!SharedLayout::same(&first[2], &counted_again));
        for (layout, shape) in first.iter().zip(&shapes) {
            assert_eq!(**layout, Layout::column_major(shape.clone()));
        }
    }

    #[test]
    fn more_shapes_than_the_ring_holds_are_still_right() {
        let shapes: Vec<Shape> = (1..=RECENT + 3)
            .map(|n| Shape::new((n, 2)).unwrap())
            .collect();
        for _ in 0..2 {
            for shape in &shapes {
                let layout = canonical_layout(shape.clone());
                assert_eq!(*layout, Layout::column_major(shape.clone()));
            }
        }
    }
}
