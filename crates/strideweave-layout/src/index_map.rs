//! `IndexMap`: the family of maps from a shape's ordinals to indices.
//!
//! A [`Layout`] is the member that places and groups tensor data; a composition that is not
//! exactly a layout is a [`ComposedMap`], which evaluates the same values through a chain of
//! layouts (docs/layouts.md, Index maps).

use std::fmt;
use std::sync::Arc;

use crate::error::{brief, fail, Result};
use crate::layout::Layout;
use crate::shape::Shape;

/// A map from the colexicographic ordinals of [`IndexMap::shape`] into
/// `0..codomain_size()`.
pub trait IndexMap {
    /// The domain.
    fn shape(&self) -> &Shape;

    /// The number of ordinals in the domain.
    fn size(&self) -> usize {
        self.shape().size()
    }

    /// One more than the largest value the map may produce.
    fn codomain_size(&self) -> usize;

    /// Whether the map is injective: `Some` when known, `None` when not established.
    fn injectivity(&self) -> Option<bool>;

    /// The value at `ordinal`; fails when `ordinal >= size()`.
    fn apply(&self, ordinal: usize) -> Result<usize>;
}

impl IndexMap for Layout {
    fn shape(&self) -> &Shape {
        Layout::shape(self)
    }

    fn codomain_size(&self) -> usize {
        self.cosize()
    }

    /// `None` only when [`Layout::try_is_injective`] is undecided.
    fn injectivity(&self) -> Option<bool> {
        self.try_is_injective().ok()
    }

    fn apply(&self, ordinal: usize) -> Result<usize> {
        self.index_of(ordinal)
    }
}

/// A composition `outer ∘ … ∘ inner` of layouts that no single layout expresses.
///
/// Its domain is the innermost layout's shape and its codomain the outermost layout's
/// cosize. Cheap to clone.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ComposedMap {
    /// Outermost first; every layout's cosize fits in the next outer layout's size.
    chain: Arc<[Layout]>,
}

impl ComposedMap {
    pub(crate) fn new(chain: Vec<Layout>) -> ComposedMap {
        ComposedMap {
            chain: chain.into(),
        }
    }

    /// The layouts of the chain, outermost first.
    pub fn chain(&self) -> &[Layout] {
        &self.chain
    }

    fn innermost(&self) -> &Layout {
        &self.chain[self.chain.len() - 1]
    }
}

impl IndexMap for ComposedMap {
    fn shape(&self) -> &Shape {
        self.innermost().shape()
    }

    fn codomain_size(&self) -> usize {
        self.chain[0].cosize()
    }

    /// `Some(false)` when the innermost layout is not injective, `Some(true)` when every
    /// layout is, `None` otherwise.
    fn injectivity(&self) -> Option<bool> {
        match self.innermost().try_is_injective() {
            Ok(false) => Some(false),
            Ok(true) if self.chain.iter().all(|l| l.try_is_injective() == Ok(true)) => Some(true),
            _ => None,
        }
    }

    fn apply(&self, ordinal: usize) -> Result<usize> {
        let mut value = ordinal;
        for layout in self.chain.iter().rev() {
            value = layout.index_of(value)?;
        }
        Ok(value)
    }
}

impl fmt::Display for ComposedMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, layout) in self.chain.iter().enumerate() {
            if i > 0 {
                f.write_str(" o ")?;
            }
            write!(f, "{layout}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for ComposedMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ComposedMap({self})")
    }
}

/// The result of a composition: exactly a [`Layout`] where one exists, otherwise a
/// [`ComposedMap`] with the same values.
// The exact case is the common one; boxing its Layout would allocate on every composition.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum Composition {
    /// The composition is exactly this layout.
    Layout(Layout),
    /// No layout expresses the composition; this chain evaluates it.
    Map(ComposedMap),
}

impl Composition {
    /// The layout, when the composition is one.
    pub fn as_layout(&self) -> Option<&Layout> {
        match self {
            Composition::Layout(layout) => Some(layout),
            Composition::Map(_) => None,
        }
    }

    /// The layout, or an error naming the composition that no layout expresses.
    pub fn into_layout(self) -> Result<Layout> {
        match self {
            Composition::Layout(layout) => Ok(layout),
            Composition::Map(map) => fail!("the composition {} is not a Layout", brief(&map)),
        }
    }

    fn chain(&self) -> Vec<Layout> {
        match self {
            Composition::Layout(layout) => vec![layout.clone()],
            Composition::Map(map) => map.chain.to_vec(),
        }
    }

    /// `self ∘ inner`: a layout when both are layouts and the composition is exact,
    /// otherwise a chain. Fails when `inner` reaches beyond `self`'s domain.
    pub fn compose(&self, inner: &Composition) -> Result<Composition> {
        if let (Composition::Layout(outer), Composition::Layout(inner)) = (self, inner) {
            return outer.compose(inner);
        }
        if inner.codomain_size() > self.size() {
            fail!(
                "composition needs the inner codomain ({}) within the outer size ({}): {} o {}",
                inner.codomain_size(),
                self.size(),
                self,
                inner
            );
        }
        let mut chain = self.chain();
        chain.extend(inner.chain());
        Ok(Composition::Map(ComposedMap::new(chain)))
    }
}

impl From<Layout> for Composition {
    fn from(layout: Layout) -> Self {
        Composition::Layout(layout)
    }
}

impl IndexMap for Composition {
    fn shape(&self) -> &Shape {
        match self {
            Composition::Layout(layout) => layout.shape(),
            Composition::Map(map) => map.shape(),
        }
    }

    fn codomain_size(&self) -> usize {
        match self {
            Composition::Layout(layout) => layout.cosize(),
            Composition::Map(map) => map.codomain_size(),
        }
    }

    fn injectivity(&self) -> Option<bool> {
        match self {
            Composition::Layout(layout) => layout.try_is_injective().ok(),
            Composition::Map(map) => map.injectivity(),
        }
    }

    fn apply(&self, ordinal: usize) -> Result<usize> {
        match self {
            Composition::Layout(layout) => layout.index_of(ordinal),
            Composition::Map(map) => map.apply(ordinal),
        }
    }
}

impl fmt::Display for Composition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Composition::Layout(layout) => write!(f, "{layout}"),
            Composition::Map(map) => write!(f, "{map}"),
        }
    }
}
