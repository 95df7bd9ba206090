//! `CarrierClass`: the exact-class identity every carrier registry is keyed by.

use std::any::TypeId;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{LazyLock, PoisonError, RwLock};

use rustc_hash::FxHashMap;

use crate::error::{Error, Result};

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
    /// [`OPEN`], [`OBSERVED`] or [`DEFINED`]: the one atomic arbiter between the
    /// definition-free path (construction, capability declaration or query, move
    /// registration) and a carrier definition.
    authority: AtomicU8,
}

/// Neither observed nor defined: a definition may still be registered.
const OPEN: u8 = 0;
/// Observed on the definition-free path: sealed against a definition.
const OBSERVED: u8 = 1;
/// Bound to a carrier definition: closed to the definition-free path.
const DEFINED: u8 = 2;

/// A Rust type naming a carrier class that is not a definition-free carrier type, typically
/// one whose storage a `CarrierDefinition` provides. Its class is [`CarrierClass::of_type`].
pub trait CarrierType: 'static {
    /// The class name used in messages.
    const NAME: &'static str;
    /// Independent (owns storage) or dependent (composes other carriers).
    const KIND: ClassKind = ClassKind::Independent;
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

    /// The class of the Rust type `T` that names a (typically definition-backed) carrier
    /// class, interned on first use. Distinct Rust types are distinct classes: nothing is
    /// inherited from another type's definition.
    pub fn of_type<T: CarrierType>() -> CarrierClass {
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
                authority: AtomicU8::new(OPEN),
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
            authority: AtomicU8::new(OPEN),
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

    /// Whether a `CarrierDefinition` is registered for exactly this class.
    pub fn is_definition_backed(self) -> bool {
        self.0.authority.load(Ordering::Acquire) == DEFINED
    }

    /// Records an observation on the definition-free path (construction, capability
    /// declaration or query, move registration), sealing the class against a definition.
    /// A Type error when the class is definition-backed.
    pub(crate) fn observe_definition_free(self, action: &str) -> Result<()> {
        let state = self.0.authority.load(Ordering::Acquire);
        if state == OBSERVED {
            return Ok(());
        }
        match self
            .0
            .authority
            .compare_exchange(OPEN, OBSERVED, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) | Err(OBSERVED) => Ok(()),
            Err(_) => Err(Error::Type(format!(
                "cannot {action}: {self} is a definition-backed carrier class and uses only its \
                 CarrierDefinition"
            ))),
        }
    }

    /// Binds the class to a definition: the single winner of the arbiter. A Type error when
    /// it is already defined or already observed on the definition-free path.
    pub(crate) fn mark_defined(self) -> Result<()> {
        match self
            .0
            .authority
            .compare_exchange(OPEN, DEFINED, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => Ok(()),
            Err(DEFINED) => Err(Error::Type(format!(
                "{self} already has a carrier definition; a definition is registered once"
            ))),
            Err(_) => Err(Error::Type(format!(
                "{self} was already observed (constructed, queried or given definition-free \
                 authority); a definition must be registered before the first observation"
            ))),
        }
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
