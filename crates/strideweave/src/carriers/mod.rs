//! The shipped carriers. All are definition-free and closed: a new carrier is a sibling type
//! implementing [`DefinitionFreeCarrier`](crate::carrier::DefinitionFreeCarrier), never a
//! variant of these.

mod generic;

use std::any::TypeId;

pub use generic::Generic;

/// Whether `type_id` is one of the shipped carrier types.
pub(crate) fn is_shipped(type_id: TypeId) -> bool {
    [TypeId::of::<Generic>()].contains(&type_id)
}
