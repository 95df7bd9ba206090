//! The canonical result layouts a thread made last, shared rather than rebuilt.
//!
//! A compact tensor, and a built-in's result that does not share an operand's layout (a
//! reduction, a contraction, a broadcast to a new shape), gets the column-major layout of its
//! shape. Building one allocates and walks the shape; a loop or a chain of operations asks for
//! the same few shapes again and again, and operands that share one layout compare equal by
//! address on the dispatch path. Layouts are immutable values, so handing out one shared copy is
//! invisible to every reader: equality is by value, and a kernel only reads it.

use std::cell::RefCell;
use std::sync::Arc;

use strideweave_layout::{Layout, Shape};

/// How many recent layouts a thread keeps.
const RECENT: usize = 8;

/// A small ring of recently built canonical layouts.
struct Recent {
    layouts: [Option<Arc<Layout>>; RECENT],
    next: usize,
}

thread_local! {
    static LAYOUTS: RefCell<Recent> = const {
        RefCell::new(Recent { layouts: [const { None }; RECENT], next: 0 })
    };
}

/// `Layout::column_major(shape)`, shared with the last request for an equal shape on this
/// thread when there was one.
pub(crate) fn canonical_layout(shape: Shape) -> Arc<Layout> {
    LAYOUTS
        .try_with(|recent| {
            let Ok(mut recent) = recent.try_borrow_mut() else {
                return Arc::new(Layout::column_major(shape.clone()));
            };
            if let Some(found) = recent
                .layouts
                .iter()
                .flatten()
                .find(|l| *l.shape() == shape)
            {
                return Arc::clone(found);
            }
            let layout = Arc::new(Layout::column_major(shape.clone()));
            let slot = recent.next;
            recent.next = (slot + 1) % RECENT;
            if let Some(entry) = recent.layouts.get_mut(slot) {
                *entry = Some(Arc::clone(&layout));
            }
            layout
        })
        .unwrap_or_else(|_| Arc::new(Layout::column_major(shape)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_equal_shape_gets_the_same_layout_and_another_shape_its_own() {
        let a = canonical_layout(Shape::new((2, 3)).unwrap());
        let b = canonical_layout(Shape::new((2, 3)).unwrap());
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(*a, Layout::column_major(Shape::new((2, 3)).unwrap()));
        let c = canonical_layout(Shape::new((3, 2)).unwrap());
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(*c, Layout::column_major(Shape::new((3, 2)).unwrap()));
        // A nesting that differs is another shape even with the same extents.
        let nested_layout: Layout = "((2,3)):((1,2))".parse().unwrap();
        let nested = canonical_layout(nested_layout.shape().clone());
        assert_eq!(*nested, nested_layout);
        assert_ne!(nested.shape(), a.shape());
        assert!(!Arc::ptr_eq(&a, &nested));
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
