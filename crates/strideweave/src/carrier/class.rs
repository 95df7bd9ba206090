//! `CarrierClass`: the exact-class identity every carrier registry is keyed by.

use std::any::TypeId;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, LazyLock, OnceLock, PoisonError, RwLock};

use rustc_hash::FxHashMap;

use crate::carriers::extension::{CarrierDefinition, ExecutionSet};
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
    /// [`OPEN`], [`OBSERVED`], [`CONSTRUCTED`] or [`DEFINED`]: the one atomic arbiter
    /// between the definition-free path (construction, capability declaration or query, move
    /// registration) and a carrier definition.
    authority: AtomicU8,
    /// The definition offered at registration, stored before the arbiter decides; it
    /// counts only once `authority` is [`DEFINED`]. Read without a lock by every
    /// construction of a definition-backed carrier.
    definition: OnceLock<CarrierDefinition>,
    /// The kernel execution set frozen when a kernel-backed class is first observed.
    execution: OnceLock<Arc<ExecutionSet>>,
}

impl ClassInfo {
    fn new(name: &'static str, kind: ClassKind, shipped: bool) -> ClassInfo {
        ClassInfo {
            name,
            kind,
            shipped,
            authority: AtomicU8::new(OPEN),
            definition: OnceLock::new(),
            execution: OnceLock::new(),
        }
    }
}

/// Neither observed nor defined: a definition may still be registered.
const OPEN: u8 = 0;
/// Observed on the definition-free path (a capability declaration or query, a move
/// registration): sealed against a definition.
const OBSERVED: u8 = 1;
/// Bound to a carrier definition: closed to the definition-free path.
const DEFINED: u8 = 2;
/// A definition-free carrier of the class was constructed: observed (sealed against a
/// definition) and, in addition, closed to a capability declaration.
const CONSTRUCTED: u8 = 3;

/// A Rust type naming a carrier class that is not a definition-free carrier type, typically
/// one whose storage a `CarrierDefinition` provides. Its class is [`CarrierClass::of_type`].
pub trait CarrierType: 'static {
    /// The class name used in messages.
    const NAME: &'static str;
    /// Independent (owns storage) or dependent (composes other carriers).
    const KIND: ClassKind = ClassKind::Independent;
}

/// The identity of one exact carrier class (docs/carriers.md, Carrier classes).
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
            CarrierClass(Box::leak(Box::new(ClassInfo::new(name, kind, shipped))))
        })
    }

    /// A new class created at run time, distinct from every other class (even one of the
    /// same name). The identity lives for the rest of the process.
    pub fn mint(name: &str, kind: ClassKind) -> CarrierClass {
        let name: &'static str = Box::leak(Box::<str>::from(name));
        CarrierClass(Box::leak(Box::new(ClassInfo::new(name, kind, false))))
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

    /// The definition registered for this class: `None` unless it is definition-backed.
    pub(crate) fn definition(self) -> Option<&'static CarrierDefinition> {
        if !self.is_definition_backed() {
            return None;
        }
        self.0.definition.get()
    }

    /// Offers `definition` for this class ahead of [`mark_defined`](Self::mark_defined),
    /// under the registration lock: it becomes the class's definition only if that wins.
    /// (Both transitions are one-way, so a definition offered to a class that cannot be
    /// defined is never read.)
    pub(crate) fn offer_definition(self, definition: &CarrierDefinition) {
        let _ = self.0.definition.set(definition.clone());
    }

    /// The kernel execution set frozen for this class, if it has been frozen.
    pub(crate) fn frozen_execution_set(self) -> Option<&'static Arc<ExecutionSet>> {
        self.0.execution.get()
    }

    /// Records the execution set frozen for this class (once; later calls keep the first).
    pub(crate) fn record_execution_set(self, set: &Arc<ExecutionSet>) {
        let _ = self.0.execution.set(Arc::clone(set));
    }

    /// Whether a `CarrierDefinition` is registered for exactly this class.
    pub fn is_definition_backed(self) -> bool {
        self.0.authority.load(Ordering::Acquire) == DEFINED
    }

    /// Records an observation on the definition-free path (capability declaration or query,
    /// move registration), sealing the class against a definition. A Type error when the
    /// class is definition-backed.
    pub(crate) fn observe_definition_free(self, action: &str) -> Result<()> {
        let state = self.0.authority.load(Ordering::Acquire);
        if state == OBSERVED || state == CONSTRUCTED {
            return Ok(());
        }
        match self
            .0
            .authority
            .compare_exchange(OPEN, OBSERVED, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) | Err(OBSERVED) | Err(CONSTRUCTED) => Ok(()),
            Err(_) => Err(self.definition_backed(action)),
        }
    }

    /// Records the construction of a definition-free carrier of this class: an observation
    /// that seals the class against a definition and against a capability declaration (the
    /// carrier exists, so the class's answers are fixed). Called only once the construction
    /// can no longer be refused, so a refused construction seals nothing. A Type error when
    /// the class is definition-backed.
    #[inline]
    pub(crate) fn observe_construction(self, action: &str) -> Result<()> {
        if self.0.authority.load(Ordering::Acquire) == CONSTRUCTED {
            return Ok(());
        }
        self.observe_construction_slow(action)
    }

    #[cold]
    fn observe_construction_slow(self, action: &str) -> Result<()> {
        let mut state = self.0.authority.load(Ordering::Acquire);
        loop {
            match state {
                CONSTRUCTED => return Ok(()),
                DEFINED => return Err(self.definition_backed(action)),
                _ => {}
            }
            match self.0.authority.compare_exchange(
                state,
                CONSTRUCTED,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Ok(()),
                Err(now) => state = now,
            }
        }
    }

    /// A Type error when the class is definition-backed (an observation-free check, made
    /// before a definition-free construction validates anything).
    pub(crate) fn check_definition_free(self, action: &str) -> Result<()> {
        if self.is_definition_backed() {
            return Err(self.definition_backed(action));
        }
        Ok(())
    }

    /// Whether a definition-free carrier of this class has been constructed.
    pub(crate) fn was_constructed(self) -> bool {
        self.0.authority.load(Ordering::Acquire) == CONSTRUCTED
    }

    fn definition_backed(self, action: &str) -> Error {
        Error::Type(format!(
            "cannot {action}: {self} is a definition-backed carrier class and uses only its \
             CarrierDefinition"
        ))
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
