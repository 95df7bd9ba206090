//! The [`DType`] handle, its descriptor kinds and the queries on it.
//!
//! A `DType` is a `Copy` handle to a `&'static` descriptor. Two handles are equal exactly when
//! they point at the same descriptor (identity, the seed's `is`), never because two
//! descriptors share a name or a structure. Descriptors are created only by the registry
//! (`registry.rs`), which keeps names unique, so "same name" and "same dtype" coincide for
//! everything reachable through [`DType::from_name`].

use std::collections::HashMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{LazyLock, PoisonError, RwLock};

use crate::error::{Error, Result};

/// A dtype: a registered, process-lifetime descriptor compared by identity.
///
/// Built-ins are the associated consts ([`DType::FLOAT32`], [`DType::ANY`], ...); extensions
/// are made with [`DType::register_simple`] / [`DType::register_category`] and found again
/// with [`DType::from_name`] or [`DType::registered`].
///
/// ```
/// use strideweave::DType;
/// assert_eq!(DType::from_name("Float32")?, DType::FLOAT32);
/// assert!(DType::FLOAT32.is_subtype_of(DType::FLOATING));
/// assert_eq!(DType::FLOAT32.to_string(), "Float32");
/// # Ok::<(), strideweave::Error>(())
/// ```
#[derive(Clone, Copy)]
pub struct DType(pub(super) &'static Descriptor);

/// What a dtype is: a category of dtypes or a simple (single-plane) storage dtype.
///
/// Compound dtypes (several storage planes, e.g. block-scaled formats) will be added as a
/// further variant, hence `#[non_exhaustive]`.
#[derive(Debug)]
#[non_exhaustive]
pub enum DTypeKind {
    /// An abstract grouping of dtypes (`Any`, `Floating`, `Integer`); never stored.
    Category(DTypeCategory),
    /// A storage dtype of a fixed bit width (`Float32`, `Int8`, `E2M1`, ...).
    Simple(SimpleDType),
}

/// The descriptor of a category dtype: a name and an optional supertype category.
#[derive(Debug)]
pub struct DTypeCategory {
    name: &'static str,
    supertype: Option<DType>,
}

impl DTypeCategory {
    /// The category's unique name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The enclosing category, if any (`None` only for roots such as `Any`).
    pub fn supertype(&self) -> Option<DType> {
        self.supertype
    }
}

/// The descriptor of a simple dtype: a name, a bit width > 0 and a category supertype.
#[derive(Debug)]
pub struct SimpleDType {
    name: &'static str,
    bits: u32,
    supertype: DType,
}

impl SimpleDType {
    /// The dtype's unique name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The number of bits one element occupies (always > 0).
    pub fn bits(&self) -> u32 {
        self.bits
    }

    /// The category this dtype belongs to (always a category).
    pub fn supertype(&self) -> DType {
        self.supertype
    }
}

/// The static (or leaked) record a [`DType`] points at.
///
/// Only the registry builds these; the invariants of the kinds (bits > 0, a simple dtype's
/// supertype is a category) are checked there. A descriptor has no interior mutability, so
/// a `DType` is a sound hash-map key (clippy's `mutable_key_type` stays quiet for users).
pub(super) struct Descriptor {
    kind: DTypeKind,
}

impl Descriptor {
    /// A category descriptor; the caller guarantees `supertype` is a category.
    pub(super) const fn category(name: &'static str, supertype: Option<DType>) -> Self {
        Descriptor {
            kind: DTypeKind::Category(DTypeCategory { name, supertype }),
        }
    }

    /// A simple descriptor; the caller guarantees `bits > 0` and a category `supertype`.
    pub(super) const fn simple(name: &'static str, bits: u32, supertype: DType) -> Self {
        Descriptor {
            kind: DTypeKind::Simple(SimpleDType {
                name,
                bits,
                supertype,
            }),
        }
    }
}

impl DType {
    /// The dtype's unique name (also its `Display` form).
    pub fn name(self) -> &'static str {
        match &self.0.kind {
            DTypeKind::Category(category) => category.name,
            DTypeKind::Simple(simple) => simple.name,
        }
    }

    /// The descriptor kind, for callers that need the kind-specific fields.
    pub fn kind(self) -> &'static DTypeKind {
        &self.0.kind
    }

    /// Whether this dtype is a category (`Any`, `Floating`, `Integer`, or a registered one).
    pub fn is_category(self) -> bool {
        matches!(self.0.kind, DTypeKind::Category(_))
    }

    /// Whether this dtype is a simple storage dtype.
    pub fn is_simple(self) -> bool {
        matches!(self.0.kind, DTypeKind::Simple(_))
    }

    /// The element width in bits of a simple dtype; `None` for a category.
    pub fn bits(self) -> Option<u32> {
        match &self.0.kind {
            DTypeKind::Category(_) => None,
            DTypeKind::Simple(simple) => Some(simple.bits),
        }
    }

    /// The direct supertype; `None` only for a root category such as `Any`.
    pub fn supertype(self) -> Option<DType> {
        match &self.0.kind {
            DTypeKind::Category(category) => category.supertype,
            DTypeKind::Simple(simple) => Some(simple.supertype),
        }
    }

    /// Every proper supertype, nearest first (`Float32` → `[Floating, Any]`).
    pub fn supertypes(self) -> Vec<DType> {
        std::iter::successors(self.supertype(), |dtype| dtype.supertype()).collect()
    }

    /// Whether `self` is `other` or one of its descendants (reflexive).
    pub fn is_subtype_of(self, other: DType) -> bool {
        std::iter::successors(Some(self), |dtype| dtype.supertype()).any(|dtype| dtype == other)
    }

    /// Whether gradients may flow through tensors of this dtype (only `Float32`).
    pub fn is_differentiable(self) -> bool {
        self == DType::FLOAT32
    }

    /// The simple dtypes a tensor of this dtype is stored as: `[self]` for a simple dtype.
    ///
    /// # Errors
    /// [`Error::Value`] for a category: no carrier stores a category.
    pub fn storage_schema(self) -> Result<&'static [DType]> {
        match &self.0.kind {
            DTypeKind::Category(category) => Err(Error::Value(format!(
                "dtype {} is a category and has no storage schema",
                category.name
            ))),
            DTypeKind::Simple(_) => Ok(simple_schema(self)),
        }
    }
}

/// The one-element storage schemas handed out so far, one shared slice per simple dtype.
///
/// A descriptor cannot hold its own schema (it would have to point at itself, which needs
/// interior mutability or `unsafe` for leaked descriptors), so the slices live here.
static SIMPLE_SCHEMAS: LazyLock<RwLock<HashMap<DType, &'static [DType]>>> =
    LazyLock::new(|| RwLock::new(HashMap::new()));

/// `[dtype]` as a `'static` slice, leaked once per dtype and then shared. Poisoning is
/// recovered: the map is only ever changed by one `entry` insertion.
fn simple_schema(dtype: DType) -> &'static [DType] {
    let existing = SIMPLE_SCHEMAS
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&dtype)
        .copied();
    existing.unwrap_or_else(|| {
        *SIMPLE_SCHEMAS
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(dtype)
            .or_insert_with(|| Box::leak(Box::new([dtype])))
    })
}

impl PartialEq for DType {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.0, other.0)
    }
}

impl Eq for DType {}

impl Hash for DType {
    fn hash<H: Hasher>(&self, state: &mut H) {
        std::ptr::hash(self.0, state);
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Debug for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DType({})", self.name())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::hash_map::DefaultHasher;
    use std::collections::HashSet;

    use super::*;
    use crate::error::ErrorKind;

    fn hash_of(dtype: DType) -> u64 {
        let mut hasher = DefaultHasher::new();
        dtype.hash(&mut hasher);
        hasher.finish()
    }

    #[test]
    fn handles_to_one_builtin_are_equal_and_hash_alike() {
        let a = DType::FLOAT32;
        let b = DType::FLOAT32;
        assert_eq!(a, b);
        assert_eq!(hash_of(a), hash_of(b));
        assert_ne!(DType::FLOAT32, DType::FLOAT64);
        assert_ne!(
            DType::INT8,
            DType::BOOL,
            "same bits and name length, still distinct"
        );
    }

    #[test]
    fn equality_is_identity_not_structure() {
        // Two unregistered descriptors with the same name and structure are still different
        // dtypes: equality never looks at the name or the fields.
        static TWIN_A: Descriptor = Descriptor::simple("DtypeTestTwin", 32, DType::FLOATING);
        static TWIN_B: Descriptor = Descriptor::simple("DtypeTestTwin", 32, DType::FLOATING);
        let (a, b) = (DType(&TWIN_A), DType(&TWIN_B));
        assert_eq!(a.name(), b.name());
        assert_ne!(a, b);
        assert_eq!(a, DType(&TWIN_A));
        let set: HashSet<DType> = [a, b, DType(&TWIN_A)].into_iter().collect();
        assert_eq!(set.len(), 2);
    }

    #[test]
    fn bits_match_the_builtin_table() {
        let table = [
            (DType::BOOL, 8),
            (DType::INT8, 8),
            (DType::INT32, 32),
            (DType::FLOAT32, 32),
            (DType::FLOAT64, 64),
            (DType::E8M0, 8),
            (DType::E5M2, 8),
            (DType::E4M3, 8),
            (DType::E3M2, 6),
            (DType::E2M3, 6),
            (DType::E2M1, 4),
        ];
        for (dtype, bits) in table {
            assert_eq!(dtype.bits(), Some(bits), "{dtype}");
            assert!(dtype.is_simple() && !dtype.is_category(), "{dtype}");
        }
        for category in [DType::ANY, DType::FLOATING, DType::INTEGER] {
            assert_eq!(category.bits(), None, "{category}");
            assert!(
                category.is_category() && !category.is_simple(),
                "{category}"
            );
        }
    }

    #[test]
    fn supertypes_are_listed_nearest_first() {
        assert_eq!(DType::ANY.supertype(), None);
        assert_eq!(DType::ANY.supertypes(), Vec::<DType>::new());
        assert_eq!(DType::FLOATING.supertypes(), [DType::ANY]);
        assert_eq!(DType::INTEGER.supertypes(), [DType::ANY]);
        assert_eq!(DType::BOOL.supertypes(), [DType::ANY]);
        for dtype in [DType::INT8, DType::INT32] {
            assert_eq!(dtype.supertype(), Some(DType::INTEGER), "{dtype}");
            assert_eq!(dtype.supertypes(), [DType::INTEGER, DType::ANY], "{dtype}");
        }
        for dtype in [
            DType::FLOAT32,
            DType::FLOAT64,
            DType::E8M0,
            DType::E5M2,
            DType::E4M3,
            DType::E3M2,
            DType::E2M3,
            DType::E2M1,
        ] {
            assert_eq!(dtype.supertype(), Some(DType::FLOATING), "{dtype}");
            assert_eq!(dtype.supertypes(), [DType::FLOATING, DType::ANY], "{dtype}");
        }
    }

    #[test]
    fn subtyping_is_reflexive_and_follows_the_chain() {
        assert!(DType::FLOAT32.is_subtype_of(DType::FLOAT32));
        assert!(DType::ANY.is_subtype_of(DType::ANY));
        assert!(DType::FLOAT32.is_subtype_of(DType::FLOATING));
        assert!(DType::E2M1.is_subtype_of(DType::ANY));
        assert!(DType::INT8.is_subtype_of(DType::INTEGER));
        assert!(DType::BOOL.is_subtype_of(DType::ANY));
        assert!(DType::FLOATING.is_subtype_of(DType::ANY));
        assert!(!DType::BOOL.is_subtype_of(DType::INTEGER));
        assert!(!DType::INT32.is_subtype_of(DType::FLOATING));
        assert!(!DType::FLOATING.is_subtype_of(DType::FLOAT32));
        assert!(!DType::ANY.is_subtype_of(DType::FLOATING));
        assert!(!DType::FLOAT32.is_subtype_of(DType::FLOAT64));
    }

    #[test]
    fn only_float32_is_differentiable() {
        assert!(DType::FLOAT32.is_differentiable());
        for dtype in [
            DType::FLOAT64,
            DType::INT32,
            DType::BOOL,
            DType::E4M3,
            DType::FLOATING,
        ] {
            assert!(!dtype.is_differentiable(), "{dtype}");
        }
    }

    #[test]
    fn a_simple_dtype_is_its_own_storage_schema() -> Result<()> {
        for dtype in [DType::FLOAT32, DType::INT8, DType::BOOL, DType::E2M1] {
            assert_eq!(dtype.storage_schema()?, [dtype]);
            // The schema is built once and then shared.
            assert!(std::ptr::eq(
                dtype.storage_schema()?,
                dtype.storage_schema()?
            ));
        }
        Ok(())
    }

    #[test]
    fn categories_have_no_storage_schema() {
        for category in [DType::ANY, DType::FLOATING, DType::INTEGER] {
            let error = category.storage_schema().unwrap_err();
            assert_eq!(error.kind(), ErrorKind::Value, "{category}");
            assert!(error.to_string().contains(category.name()), "{error}");
        }
    }

    #[test]
    fn kind_exposes_the_descriptor_fields() {
        match DType::E3M2.kind() {
            DTypeKind::Simple(simple) => {
                assert_eq!(simple.name(), "E3M2");
                assert_eq!(simple.bits(), 6);
                assert_eq!(simple.supertype(), DType::FLOATING);
            }
            other => panic!("E3M2 should be simple, got {other:?}"),
        }
        match DType::INTEGER.kind() {
            DTypeKind::Category(category) => {
                assert_eq!(category.name(), "Integer");
                assert_eq!(category.supertype(), Some(DType::ANY));
            }
            other => panic!("Integer should be a category, got {other:?}"),
        }
    }

    #[test]
    fn display_is_the_name_and_debug_names_it() {
        assert_eq!(DType::E4M3.to_string(), "E4M3");
        assert_eq!(DType::ANY.to_string(), "Any");
        assert_eq!(format!("{:?}", DType::INT32), "DType(Int32)");
    }
}
