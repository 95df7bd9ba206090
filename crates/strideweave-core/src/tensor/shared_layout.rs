//! `SharedLayout`: a layout shared between tensors, result specifications and caches, either
//! counted or kept for the life of the process.
//!
//! Layouts are immutable values, so sharing one object is invisible to every reader. A tiny
//! operation clones and drops its result layout several times (into its result specification,
//! into the result tensor, through the derivation cache); for the canonical layouts of the
//! shapes a process uses most, those clones are plain copies of a reference instead of atomic
//! count updates (see `canonical_layouts`).

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use strideweave_layout::Layout;

/// A shared, immutable layout: reference-counted, or kept for the life of the process.
#[derive(Clone)]
pub(crate) enum SharedLayout {
    /// A layout that lives as long as the process (one of the bounded set of canonical
    /// layouts); cloning copies the reference.
    Static(&'static Layout),
    /// Any other layout, freed with its last handle.
    Counted(Arc<Layout>),
}

impl SharedLayout {
    /// `layout`, counted.
    pub(crate) fn counted(layout: Layout) -> SharedLayout {
        SharedLayout::Counted(Arc::new(layout))
    }

    /// Whether `a` and `b` are the same layout object (not merely equal layouts).
    pub(crate) fn same(a: &SharedLayout, b: &SharedLayout) -> bool {
        std::ptr::eq::<Layout>(&**a, &**b)
    }
}

impl Deref for SharedLayout {
    type Target = Layout;

    #[inline]
    fn deref(&self) -> &Layout {
        match self {
            SharedLayout::Static(layout) => layout,
            SharedLayout::Counted(layout) => layout,
        }
    }
}

impl PartialEq for SharedLayout {
    /// Equality of the layouts' values, as for `Layout`.
    fn eq(&self, other: &SharedLayout) -> bool {
        **self == **other
    }
}

impl fmt::Debug for SharedLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl fmt::Display for SharedLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sameness_is_by_object_and_equality_by_value() {
        let layout: Layout = "(2,3):(1,2)".parse().unwrap();
        let counted = SharedLayout::counted(layout.clone());
        let clone = counted.clone();
        let other = SharedLayout::counted(layout.clone());
        let kept: &'static Layout = Box::leak(Box::new(layout.clone()));
        let fixed = SharedLayout::Static(kept);
        assert!(SharedLayout::same(&counted, &clone));
        assert!(!SharedLayout::same(&counted, &other));
        assert!(!SharedLayout::same(&counted, &fixed));
        assert!(SharedLayout::same(&fixed, &fixed.clone()));
        assert_eq!(counted, other);
        assert_eq!(counted, fixed);
        assert_ne!(
            counted,
            SharedLayout::counted("(3,2):(1,3)".parse().unwrap())
        );
        assert_eq!(format!("{fixed}"), format!("{layout}"));
        assert_eq!(format!("{counted:?}"), format!("{layout:?}"));
    }
}
