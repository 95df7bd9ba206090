//! `CarrierClass`: the exact-class identity every carrier registry is keyed by.

use std::any::TypeId;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{LazyLock, PoisonError, RwLock};

use rustc_hash::FxHashMap;

/// Whether a carrier class stores its own slots or composes other carriers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClassKind {
    /// Owns its storage (Generic, CPU, FileBacked, custom accelerators).
    Independent,
    /// Composes other carriers and derives what it can do from them (Evictable,
    /// TiledEvictable).
    Dependent,
}

struct ClassInfo {
    name: &'static str,
    kind: ClassKind,
    shipped: bool,
}

/// The identity of one exact carrier class (architecture.md §3, "exact class").
///
/// Two classes are equal only when they are the same class: there is no inheritance to
/// traverse, so a registry keyed by `CarrierClass` never consults a "base". Rust carrier
/// types get theirs from [`CarrierClass::of`]; classes created at run time (for a language
/// binding) from [`CarrierClass::mint`]. It is `Copy` and compares by address.
#[derive(Clone, Copy)]
pub struct CarrierClass(&'static ClassInfo);

static BY_TYPE: LazyLock<RwLock<FxHashMap<TypeId, CarrierClass>>> =
    LazyLock::new(|| RwLock::new(FxHashMap::default()));

impl CarrierClass {
    /// The class of the Rust carrier type `T`, interned on first use.
    pub fn of<T: crate::carrier::DefinitionFreeCarrier>() -> CarrierClass {
        CarrierClass::interned(TypeId::of::<T>(), T::NAME, T::KIND)
    }

    pub(crate) fn interned(type_id: TypeId, name: &'static str, kind: ClassKind) -> CarrierClass {
        if let Some(class) = BY_TYPE
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&type_id)
        {
            return *class;
        }
        let mut by_type = BY_TYPE.write().unwrap_or_else(PoisonError::into_inner);
        *by_type.entry(type_id).or_insert_with(|| {
            let shipped = crate::carriers::is_shipped(type_id);
            CarrierClass(Box::leak(Box::new(ClassInfo {
                name,
                kind,
                shipped,
            })))
        })
    }

    /// A new class created at run time, distinct from every other class (even one of the
    /// same name). The identity lives for the rest of the process.
    pub fn mint(name: &str, kind: ClassKind) -> CarrierClass {
        let name: &'static str = Box::leak(Box::<str>::from(name));
        CarrierClass(Box::leak(Box::new(ClassInfo {
            name,
            kind,
            shipped: false,
        })))
    }

    /// The class name, used in every message about it.
    pub fn name(self) -> &'static str {
        self.0.name
    }

    /// Independent or dependent.
    pub fn kind(self) -> ClassKind {
        self.0.kind
    }

    /// Whether the class ships with StrideWeave (Generic, CPU, FileBacked, ...); shipped
    /// classes are closed to manual capability declaration and kernel packs.
    pub fn is_shipped(self) -> bool {
        self.0.shipped
    }
}

impl PartialEq for CarrierClass {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.0, other.0)
    }
}

impl Eq for CarrierClass {}

impl Hash for CarrierClass {
    fn hash<H: Hasher>(&self, state: &mut H) {
        std::ptr::hash(self.0, state)
    }
}

impl fmt::Display for CarrierClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.name)
    }
}

impl fmt::Debug for CarrierClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CarrierClass({})", self.0.name)
    }
}
