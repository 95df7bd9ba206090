//! `CarrierClass`: the exact-class identity every carrier registry is keyed by.

use std::any::{Any, TypeId};
use std::cell::RefCell;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{LazyLock, Once, OnceLock, PoisonError, RwLock};

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
    /// [`OPEN`], [`OBSERVED`], [`CONSTRUCTED`] or [`DEFINED`]: the one atomic arbiter
    /// between the definition-free path (construction, capability declaration or query, move
    /// registration) and a carrier definition.
    authority: AtomicU8,
    /// What the definition-backed authoring path binds to the class (its definition and, once
    /// frozen, its execution set), offered at registration before the arbiter decides; it
    /// counts only once `authority` is [`DEFINED`]. Read without a lock by every construction
    /// of a definition-backed carrier. The class record does not know its type: the
    /// authoring path that offered it reads it back.
    binding: OnceLock<Box<dyn Any + Send + Sync>>,
    /// The addresses of the last few plans in static memory the class's capabilities
    /// authorized (0 for none), see [`CarrierClass::authorized_before`].
    authorized: [AtomicUsize; AUTHORIZED],
    /// The next entry of `authorized` to overwrite.
    next_authorized: AtomicUsize,
    /// The class's own declaration hook
    /// ([`DefinitionFreeCarrier::declare_class`](crate::carrier::DefinitionFreeCarrier::declare_class)),
    /// run once by [`CarrierClass::declare_once`]; `None` for a class without a Rust type of
    /// the definition-free path.
    declare: Option<fn(CarrierClass)>,
    /// Completed once `declare` has run.
    declared: Once,
}

/// How many authorized plans a class remembers.
const AUTHORIZED: usize = 4;

impl ClassInfo {
    fn new(
        name: &'static str,
        kind: ClassKind,
        shipped: bool,
        declare: Option<fn(CarrierClass)>,
    ) -> ClassInfo {
        ClassInfo {
            name,
            kind,
            shipped,
            authority: AtomicU8::new(OPEN),
            binding: OnceLock::new(),
            authorized: [const { AtomicUsize::new(0) }; AUTHORIZED],
            next_authorized: AtomicUsize::new(0),
            declare,
            declared: Once::new(),
        }
    }
}

thread_local! {
    /// The classes whose declaration hook runs on this thread: a registry the hook calls
    /// back into does not wait for the hook itself.
    static DECLARING: RefCell<Vec<CarrierClass>> = const { RefCell::new(Vec::new()) };
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

/// Whether a carrier type ships with StrideWeave. Only this crate can name
/// [`ClassOrigin::SHIPPED`]; a carrier type keeps the default of
/// [`DefinitionFreeCarrier::ORIGIN`](crate::carrier::DefinitionFreeCarrier::ORIGIN).
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClassOrigin(bool);

impl ClassOrigin {
    /// A class written outside StrideWeave: open to capability declarations, kernel packs and
    /// carrier definitions.
    pub const THIRD_PARTY: ClassOrigin = ClassOrigin(false);
    /// A shipped class: closed to all three.
    pub(crate) const SHIPPED: ClassOrigin = ClassOrigin(true);
}

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
        CarrierClass::interned(
            TypeId::of::<T>(),
            T::NAME,
            T::KIND,
            T::ORIGIN,
            Some(T::declare_class),
        )
    }

    /// The class of the Rust type `T` that names a (typically definition-backed) carrier
    /// class, interned on first use. Distinct Rust types are distinct classes: nothing is
    /// inherited from another type's definition.
    pub fn of_type<T: CarrierType>() -> CarrierClass {
        CarrierClass::interned(
            TypeId::of::<T>(),
            T::NAME,
            T::KIND,
            ClassOrigin::THIRD_PARTY,
            None,
        )
    }

    fn interned(
        type_id: TypeId,
        name: &'static str,
        kind: ClassKind,
        origin: ClassOrigin,
        declare: Option<fn(CarrierClass)>,
    ) -> CarrierClass {
        if let Some(class) = BY_TYPE
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&type_id)
        {
            return *class;
        }
        let mut by_type = BY_TYPE.write().unwrap_or_else(PoisonError::into_inner);
        *by_type.entry(type_id).or_insert_with(|| {
            let shipped = origin == ClassOrigin::SHIPPED;
            CarrierClass(Box::leak(Box::new(ClassInfo::new(
                name, kind, shipped, declare,
            ))))
        })
    }

    /// A new class created at run time, distinct from every other class (even one of the
    /// same name). The identity lives for the rest of the process.
    pub fn mint(name: &str, kind: ClassKind) -> CarrierClass {
        let name: &'static str = Box::leak(Box::<str>::from(name));
        CarrierClass(Box::leak(Box::new(ClassInfo::new(name, kind, false, None))))
    }

    /// Runs the class's own declaration hook, once per process, before a registry answers
    /// anything about the class (its capabilities, its move operations): the registries call
    /// this first, so what a class declares of itself is there before the first question.
    /// Another thread waits for a hook that is running; the hook's own calls back into the
    /// registries do not.
    pub(crate) fn declare_once(self) {
        let Some(declare) = self.0.declare else {
            return;
        };
        if self.0.declared.is_completed()
            || DECLARING.with(|declaring| declaring.borrow().contains(&self))
        {
            return;
        }
        self.0.declared.call_once(|| {
            DECLARING.with(|declaring| declaring.borrow_mut().push(self));
            // A panicking hook declares what it declared before the panic; the class stays
            // usable (the panic is reported by the panic hook, the registries answer).
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| declare(self)));
            DECLARING.with(|declaring| {
                declaring.borrow_mut().retain(|class| *class != self);
            });
        });
    }

    /// The class name, used in every message about it.
    pub fn name(self) -> &'static str {
        self.0.name
    }

    /// Independent or dependent.
    pub fn kind(self) -> ClassKind {
        self.0.kind
    }

    /// Whether the class's capabilities authorized the plan whose fields live in static
    /// memory at `address` before. Capabilities never change once sealed, so an answer of
    /// yes stays true, and a plan in static memory is never freed, so its address names it
    /// for the life of the process.
    #[inline]
    pub(crate) fn authorized_before(self, address: usize) -> bool {
        self.0
            .authorized
            .iter()
            .any(|entry| entry.load(Ordering::Relaxed) == address)
    }

    /// Remembers that the class's capabilities authorized the plan in static memory at
    /// `address`, replacing the oldest address remembered.
    pub(crate) fn remember_authorized(self, address: usize) {
        let next = self.0.next_authorized.fetch_add(1, Ordering::Relaxed) % AUTHORIZED;
        if let Some(entry) = self.0.authorized.get(next) {
            entry.store(address, Ordering::Relaxed);
        }
    }

    /// Whether the class ships with StrideWeave (Generic, CPU, FileBacked, ...); shipped
    /// classes are closed to manual capability declaration and kernel packs.
    pub fn is_shipped(self) -> bool {
        self.0.shipped
    }

    /// What the definition-backed authoring path bound to this class: `None` unless the
    /// class is definition-backed.
    pub(crate) fn binding(self) -> Option<&'static (dyn Any + Send + Sync)> {
        if !self.is_definition_backed() {
            return None;
        }
        self.0.binding.get().map(|binding| &**binding)
    }

    /// Offers `binding` for this class ahead of [`mark_defined`](Self::mark_defined), under
    /// the registration lock: it becomes the class's binding only if that wins. (Both
    /// transitions are one-way, so a binding offered to a class that cannot be defined is
    /// never read.)
    pub(crate) fn offer_binding(self, binding: Box<dyn Any + Send + Sync>) {
        let _ = self.0.binding.set(binding);
    }

    /// Whether a `CarrierDefinition` is registered for exactly this class.
    pub fn is_definition_backed(self) -> bool {
        self.0.authority.load(Ordering::Acquire) == DEFINED
    }

    /// Records an observation on the definition-free path (capability declaration or query,
    /// move registration, a binding's attempt to construct a foreign class without a
    /// definition), sealing the class against a definition. A Type error when the class is
    /// definition-backed.
    pub fn observe_definition_free(self, action: &str) -> Result<()> {
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
                "{self} already has a CarrierDefinition; a definition is registered once"
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
