//! The process-global dtype registry: the built-ins, registration and lookup by name.
//!
//! Invariants:
//! 1. Names are unique: at most one registered dtype has a given name.
//! 2. Registration is atomic: the duplicate check and the insertion happen under one write
//!    lock, so a race between registrations of one name has exactly one winner, and a failed
//!    registration changes nothing.
//! 3. The built-ins come first in [`DType::registered`], in the order of docs/tensors.md, DTypes;
//!    extensions follow in registration order.
//! 4. Descriptors live for the whole process: built-ins are `static`s, extensions are leaked
//!    with `Box::leak` once their registration has succeeded.

use std::collections::HashMap;
use std::sync::{LazyLock, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::dtype::{DType, Descriptor};
use crate::error::{quoted, Error, Result};

static ANY: Descriptor = Descriptor::category("Any", None);
static FLOATING: Descriptor = Descriptor::category("Floating", Some(DType(&ANY)));
static INTEGER: Descriptor = Descriptor::category("Integer", Some(DType(&ANY)));
static BOOL: Descriptor = Descriptor::simple("Bool", 8, DType(&ANY));
static INT32: Descriptor = Descriptor::simple("Int32", 32, DType(&INTEGER));
static INT8: Descriptor = Descriptor::simple("Int8", 8, DType(&INTEGER));
static FLOAT32: Descriptor = Descriptor::simple("Float32", 32, DType(&FLOATING));
static FLOAT64: Descriptor = Descriptor::simple("Float64", 64, DType(&FLOATING));
static E8M0: Descriptor = Descriptor::simple("E8M0", 8, DType(&FLOATING));
static E5M2: Descriptor = Descriptor::simple("E5M2", 8, DType(&FLOATING));
static E4M3: Descriptor = Descriptor::simple("E4M3", 8, DType(&FLOATING));
static E3M2: Descriptor = Descriptor::simple("E3M2", 6, DType(&FLOATING));
static E2M3: Descriptor = Descriptor::simple("E2M3", 6, DType(&FLOATING));
static E2M1: Descriptor = Descriptor::simple("E2M1", 4, DType(&FLOATING));

/// The built-in dtypes, in registration order.
const BUILTINS: [DType; 14] = [
    DType::ANY,
    DType::FLOATING,
    DType::INTEGER,
    DType::BOOL,
    DType::INT32,
    DType::INT8,
    DType::FLOAT32,
    DType::FLOAT64,
    DType::E8M0,
    DType::E5M2,
    DType::E4M3,
    DType::E3M2,
    DType::E2M3,
    DType::E2M1,
];

impl DType {
    /// The root category; every dtype is a subtype of `Any`.
    pub const ANY: DType = DType(&ANY);
    /// The category of floating-point dtypes (supertype `Any`).
    pub const FLOATING: DType = DType(&FLOATING);
    /// The category of integer dtypes (supertype `Any`).
    pub const INTEGER: DType = DType(&INTEGER);
    /// Booleans, 8 bits (supertype `Any`).
    pub const BOOL: DType = DType(&BOOL);
    /// Signed 32-bit integers (supertype `Integer`).
    pub const INT32: DType = DType(&INT32);
    /// Signed 8-bit integers (supertype `Integer`).
    pub const INT8: DType = DType(&INT8);
    /// IEEE 754 binary32, the only differentiable dtype (supertype `Floating`).
    pub const FLOAT32: DType = DType(&FLOAT32);
    /// IEEE 754 binary64, used as an accumulator (supertype `Floating`).
    pub const FLOAT64: DType = DType(&FLOAT64);
    /// The 8-bit exponent-only scale format of MX block scaling (supertype `Floating`).
    pub const E8M0: DType = DType(&E8M0);
    /// FP8 with 5 exponent and 2 mantissa bits (supertype `Floating`).
    pub const E5M2: DType = DType(&E5M2);
    /// FP8 with 4 exponent and 3 mantissa bits (supertype `Floating`).
    pub const E4M3: DType = DType(&E4M3);
    /// FP6 with 3 exponent and 2 mantissa bits (supertype `Floating`).
    pub const E3M2: DType = DType(&E3M2);
    /// FP6 with 2 exponent and 3 mantissa bits (supertype `Floating`).
    pub const E2M3: DType = DType(&E2M3);
    /// FP4 with 2 exponent bits and 1 mantissa bit (supertype `Floating`).
    pub const E2M1: DType = DType(&E2M1);

    /// Registers a new simple (single-plane) dtype of `bits` bits under the category
    /// `supertype`, and returns its handle.
    ///
    /// # Errors
    /// - [`Error::Value`] if `name` is empty or `bits` is 0;
    /// - [`Error::Type`] if `supertype` is not a category;
    /// - [`Error::Value`] if a dtype named `name` is already registered (nothing changes).
    pub fn register_simple(name: &str, bits: u32, supertype: DType) -> Result<DType> {
        check_name(name, "simple")?;
        if bits == 0 {
            return Err(Error::Value(format!(
                "simple dtype '{name}' needs bits > 0, got 0"
            )));
        }
        check_category_supertype(name, "simple", supertype)?;
        register(name, |name| Descriptor::simple(name, bits, supertype))
    }

    /// Registers a new category dtype, optionally nested under the category `supertype`, and
    /// returns its handle.
    ///
    /// # Errors
    /// - [`Error::Value`] if `name` is empty;
    /// - [`Error::Type`] if `supertype` is not a category;
    /// - [`Error::Value`] if a dtype named `name` is already registered (nothing changes).
    pub fn register_category(name: &str, supertype: Option<DType>) -> Result<DType> {
        check_name(name, "category")?;
        if let Some(supertype) = supertype {
            check_category_supertype(name, "category", supertype)?;
        }
        register(name, |name| Descriptor::category(name, supertype))
    }

    /// The registered dtype named `name` (built-in or extension).
    ///
    /// # Errors
    /// [`Error::Lookup`] naming `name` if no dtype has that name.
    pub fn from_name(name: &str) -> Result<DType> {
        read_registry()
            .by_name
            .get(name)
            .copied()
            .ok_or_else(|| Error::Lookup(format!("no dtype named {} is registered", quoted(name))))
    }

    /// Every registered dtype: the built-ins first, then extensions in registration order.
    pub fn registered() -> Vec<DType> {
        read_registry().order.clone()
    }
}

/// The registry's state; one lock guards both fields so they never disagree.
struct Registry {
    by_name: HashMap<&'static str, DType>,
    order: Vec<DType>,
}

static REGISTRY: LazyLock<RwLock<Registry>> = LazyLock::new(|| {
    let by_name = BUILTINS
        .iter()
        .map(|&dtype| (dtype.name(), dtype))
        .collect();
    RwLock::new(Registry {
        by_name,
        order: BUILTINS.to_vec(),
    })
});

/// The registry for reading. A poisoned lock is recovered: every mutation is a single
/// check-then-insert that cannot leave the state half-updated.
fn read_registry() -> RwLockReadGuard<'static, Registry> {
    REGISTRY.read().unwrap_or_else(PoisonError::into_inner)
}

/// The registry for writing (poisoning recovered as in [`read_registry`]).
fn write_registry() -> RwLockWriteGuard<'static, Registry> {
    REGISTRY.write().unwrap_or_else(PoisonError::into_inner)
}

fn check_name(name: &str, what: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::Value(format!(
            "cannot register a {what} dtype with an empty name (\"\")"
        )));
    }
    Ok(())
}

fn check_category_supertype(name: &str, what: &str, supertype: DType) -> Result<()> {
    if !supertype.is_category() {
        return Err(Error::Type(format!(
            "{what} dtype '{name}' needs a category as supertype, got the non-category \
             dtype {supertype}"
        )));
    }
    Ok(())
}

/// Checks uniqueness and inserts under one write lock; leaks only after the check passed.
fn register(name: &str, build: impl FnOnce(&'static str) -> Descriptor) -> Result<DType> {
    let mut registry = write_registry();
    if let Some(existing) = registry.by_name.get(name) {
        return Err(Error::Value(format!(
            "a dtype named '{name}' is already registered ({existing:?})"
        )));
    }
    let name: &'static str = Box::leak(Box::<str>::from(name));
    let dtype = DType(Box::leak(Box::new(build(name))));
    registry.by_name.insert(name, dtype);
    registry.order.push(dtype);
    Ok(dtype)
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Barrier};

    use super::*;
    use crate::error::ErrorKind;

    const PREFIX: &str = "dtype_registry_test_";

    fn unique(suffix: &str) -> String {
        format!("{PREFIX}{suffix}")
    }

    #[test]
    fn builtins_come_first_in_order() {
        let registered = DType::registered();
        assert!(registered.len() >= BUILTINS.len());
        assert_eq!(registered[..BUILTINS.len()], BUILTINS);
        let names: Vec<&str> = BUILTINS.iter().map(|dtype| dtype.name()).collect();
        assert_eq!(
            names,
            [
                "Any", "Floating", "Integer", "Bool", "Int32", "Int8", "Float32", "Float64",
                "E8M0", "E5M2", "E4M3", "E3M2", "E2M3", "E2M1"
            ]
        );
    }

    #[test]
    fn from_name_finds_every_builtin() -> Result<()> {
        for dtype in BUILTINS {
            assert_eq!(DType::from_name(dtype.name())?, dtype);
        }
        Ok(())
    }

    #[test]
    fn from_name_of_an_unknown_name_is_a_lookup_error_naming_it() {
        let name = unique("never_registered");
        let error = DType::from_name(&name).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Lookup);
        assert!(error.to_string().contains(&name), "{error}");
        // Lookup is by exact name.
        assert_eq!(
            DType::from_name("float32").unwrap_err().kind(),
            ErrorKind::Lookup
        );
    }

    #[test]
    fn a_custom_dtype_is_registered_found_and_distinct() -> Result<()> {
        let name = unique("custom_fp8");
        let custom = DType::register_simple(&name, 8, DType::FLOATING)?;
        assert_eq!(custom.name(), name);
        assert_eq!(custom.bits(), Some(8));
        assert_eq!(custom.supertypes(), [DType::FLOATING, DType::ANY]);
        assert_eq!(DType::from_name(&name)?, custom);
        for builtin in BUILTINS {
            assert_ne!(custom, builtin);
        }
        // Same bits and supertype as E4M3, still a different dtype.
        assert_ne!(custom, DType::E4M3);
        assert!(!custom.is_differentiable());
        assert_eq!(custom.storage_schema()?, [custom]);
        Ok(())
    }

    #[test]
    fn custom_categories_nest_and_extensions_follow_in_order() -> Result<()> {
        let category = DType::register_category(&unique("quantized"), Some(DType::INTEGER))?;
        let leaf = DType::register_simple(&unique("uint4"), 4, category)?;
        let root = DType::register_category(&unique("root"), None)?;
        assert!(category.is_category());
        assert_eq!(category.supertypes(), [DType::INTEGER, DType::ANY]);
        assert_eq!(leaf.supertypes(), [category, DType::INTEGER, DType::ANY]);
        assert!(leaf.is_subtype_of(DType::INTEGER));
        assert_eq!(root.supertype(), None);
        assert!(!leaf.is_subtype_of(root));
        assert_eq!(
            category.storage_schema().unwrap_err().kind(),
            ErrorKind::Value
        );

        let registered = DType::registered();
        let position = |dtype: DType| registered.iter().position(|&d| d == dtype);
        let (c, l, r) = (position(category), position(leaf), position(root));
        assert!(c.is_some() && l.is_some() && r.is_some());
        assert!(c > Some(BUILTINS.len() - 1) && c < l && l < r);
        Ok(())
    }

    #[test]
    fn registering_a_builtin_name_again_fails_and_changes_nothing() {
        let before = DType::registered();
        let error = DType::register_simple("Float32", 32, DType::FLOATING).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Value);
        assert!(error.to_string().contains("Float32"), "{error}");
        let error = DType::register_category("Any", None).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Value);

        // Other tests register concurrently, so compare what this test could have changed:
        // the old entries are all still there in order, and "Float32" is still the built-in.
        let after = DType::registered();
        assert_eq!(after[..before.len()], before[..]);
        assert_eq!(DType::from_name("Float32").ok(), Some(DType::FLOAT32));
        assert_eq!(
            after
                .iter()
                .filter(|dtype| dtype.name() == "Float32")
                .count(),
            1
        );
    }

    #[test]
    fn a_duplicate_custom_name_fails_and_keeps_the_first() -> Result<()> {
        let name = unique("duplicate");
        let first = DType::register_simple(&name, 16, DType::FLOATING)?;
        let error = DType::register_simple(&name, 8, DType::INTEGER).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Value);
        assert!(error.to_string().contains(&name), "{error}");
        let error = DType::register_category(&name, None).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Value);
        assert_eq!(DType::from_name(&name)?, first);
        assert_eq!(DType::from_name(&name)?.bits(), Some(16));
        let count = DType::registered()
            .iter()
            .filter(|dtype| dtype.name() == name)
            .count();
        assert_eq!(count, 1);
        Ok(())
    }

    #[test]
    fn invalid_registrations_are_rejected_with_their_kind_and_register_nothing() {
        let error = DType::register_simple("", 8, DType::FLOATING).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Value);
        let error = DType::register_category("", None).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Value);

        let zero_bits = unique("zero_bits");
        let error = DType::register_simple(&zero_bits, 0, DType::FLOATING).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Value);
        assert!(error.to_string().contains(&zero_bits), "{error}");

        let bad_super = unique("bad_super");
        let error = DType::register_simple(&bad_super, 8, DType::FLOAT32).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Type);
        assert!(error.to_string().contains(&bad_super), "{error}");
        assert!(error.to_string().contains("Float32"), "{error}");

        let bad_category = unique("bad_category_super");
        let error = DType::register_category(&bad_category, Some(DType::INT8)).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Type);

        for name in [zero_bits, bad_super, bad_category] {
            assert_eq!(
                DType::from_name(&name).unwrap_err().kind(),
                ErrorKind::Lookup,
                "{name}"
            );
        }
        assert!(DType::registered()
            .iter()
            .all(|dtype| !dtype.name().is_empty()));
    }

    #[test]
    fn concurrent_registrations_of_one_name_have_exactly_one_winner() -> Result<()> {
        const THREADS: usize = 8;
        // Several rounds, each with a fresh name, so a non-atomic check-then-insert is
        // caught reliably rather than by luck.
        const ROUNDS: usize = 64;
        for round in 0..ROUNDS {
            let name = Arc::new(unique(&format!("race_{round}")));
            let barrier = Arc::new(Barrier::new(THREADS));
            let handles: Vec<_> = (0..THREADS)
                .map(|i| {
                    let (name, barrier) = (Arc::clone(&name), Arc::clone(&barrier));
                    std::thread::spawn(move || {
                        barrier.wait();
                        let bits = u32::try_from(i + 1).unwrap_or(1);
                        DType::register_simple(&name, bits, DType::FLOATING)
                    })
                })
                .collect();
            let results: Vec<Result<DType>> = handles
                .into_iter()
                .map(|handle| handle.join().expect("registration thread panicked"))
                .collect();

            let winners: Vec<DType> = results
                .iter()
                .filter_map(|r| r.as_ref().ok())
                .copied()
                .collect();
            assert_eq!(winners.len(), 1, "round {round}: {results:?}");
            for result in &results {
                if let Err(error) = result {
                    assert_eq!(error.kind(), ErrorKind::Value, "{error}");
                }
            }
            assert_eq!(DType::from_name(&name)?, winners[0]);
            let count = DType::registered()
                .iter()
                .filter(|dtype| dtype.name() == name.as_str())
                .count();
            assert_eq!(count, 1, "round {round}");
        }
        Ok(())
    }
}
