//! `KernelExecutionInterface`: the compatibility base of a carrier's execution context, the
//! [`ExecutionInterface`] trait concrete interface types implement, and the type-erased
//! [`InterfaceHandle`] the framework stores.

use std::any::{Any, TypeId};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use crate::error::{Error, Result};

/// The compatibility base every execution interface embeds: a validated, non-empty version.
///
/// Seed rule: "A KernelExecutionInterface(version) SHALL be an immutable compatibility base for
/// carrier-specific execution context. version SHALL be a non-empty string; another type SHALL
/// fail with TypeError and an empty value with ValueError." A non-string version is impossible
/// here (the type system enforces it); an empty one is a Value error. On its own it is also a
/// usable interface without extra facilities.
///
/// A carrier author embeds it in a concrete interface type that adds the carrier's immutable
/// device, stream, addressing, workspace or submission facilities:
///
/// ```
/// use strideweave::carriers::extension::{
///     ExecutionInterface, InterfaceHandle, KernelExecutionInterface,
/// };
/// struct RingInterface {
///     base: KernelExecutionInterface,
///     stream: u32,
/// }
/// impl ExecutionInterface for RingInterface {
///     fn version(&self) -> &str {
///         self.base.version()
///     }
/// }
/// let handle = InterfaceHandle::new(RingInterface {
///     base: KernelExecutionInterface::new("ring-1")?,
///     stream: 3,
/// })?;
/// assert_eq!(handle.identity().version(), "ring-1");
/// assert_eq!(handle.downcast_ref::<RingInterface>().map(|i| i.stream), Some(3));
/// # Ok::<(), strideweave::Error>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct KernelExecutionInterface {
    version: Arc<str>,
}

impl KernelExecutionInterface {
    /// The compatibility base of `version`.
    ///
    /// Seed rule: "version SHALL be a non-empty string ... an empty value (fails) with
    /// ValueError" — here a Value error naming `KernelExecutionInterface`.
    pub fn new(version: impl Into<Arc<str>>) -> Result<KernelExecutionInterface> {
        let version = version.into();
        check_version(&version, "KernelExecutionInterface")?;
        Ok(KernelExecutionInterface { version })
    }

    /// The interface version (seed: the second half of the compatibility identity).
    pub fn version(&self) -> &str {
        &self.version
    }
}

impl fmt::Debug for KernelExecutionInterface {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KernelExecutionInterface")
            .field("version", &self.version)
            .finish()
    }
}

fn check_version(version: &str, type_name: &str) -> Result<()> {
    if version.is_empty() {
        return Err(Error::Value(format!(
            "KernelExecutionInterface version of {type_name} must be a non-empty string"
        )));
    }
    Ok(())
}

/// A concrete execution-interface type: the carrier-specific execution context kernels use.
///
/// Seed rule: "Concrete subclasses MAY add immutable device, stream, addressing, workspace, or
/// submission facilities used by kernels for that exact carrier, but those additions SHALL not
/// change the common identity rule." The identity is always `(exact Rust type, version)`;
/// nothing else a type adds takes part in it. Implementors should keep their facilities
/// immutable (the seed's "immutable" base) and usually embed a [`KernelExecutionInterface`] so
/// the version is validated at construction; [`InterfaceHandle::new`] validates it again.
pub trait ExecutionInterface: Any + Send + Sync {
    /// The interface version (seed: "version SHALL be a non-empty string").
    fn version(&self) -> &str;

    /// The compatibility identity `(TypeId of Self, version)` (seed: "Its public compatibility
    /// identity SHALL be (type(interface), interface.version)").
    fn identity(&self) -> InterfaceIdentity
    where
        Self: Sized,
    {
        InterfaceIdentity {
            type_id: TypeId::of::<Self>(),
            type_name: std::any::type_name::<Self>(),
            version: Arc::from(self.version()),
        }
    }
}

impl ExecutionInterface for KernelExecutionInterface {
    fn version(&self) -> &str {
        &self.version
    }
}

/// The public compatibility identity of an execution interface: its exact type and version.
///
/// Seed rule: "Its public compatibility identity SHALL be (type(interface), interface.version)".
/// Two identities are equal exactly when the concrete types are the same (by `TypeId`; a
/// wrapper, "subclass" or sibling type is a different identity) and the versions are equal;
/// the facilities a concrete type adds never take part. The type name is kept for messages
/// only.
#[derive(Clone)]
pub struct InterfaceIdentity {
    type_id: TypeId,
    type_name: &'static str,
    version: Arc<str>,
}

impl InterfaceIdentity {
    /// The `TypeId` of the exact concrete interface type (seed: `type(interface)`).
    pub fn type_id(&self) -> TypeId {
        self.type_id
    }

    /// The Rust name of the concrete interface type, for messages (not part of equality).
    pub fn type_name(&self) -> &'static str {
        self.type_name
    }

    /// The interface version (seed: `interface.version`).
    pub fn version(&self) -> &str {
        &self.version
    }
}

impl PartialEq for InterfaceIdentity {
    fn eq(&self, other: &Self) -> bool {
        self.type_id == other.type_id && self.version == other.version
    }
}

impl Eq for InterfaceIdentity {}

impl Hash for InterfaceIdentity {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.type_id.hash(state);
        self.version.hash(state);
    }
}

impl fmt::Debug for InterfaceIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({}, {:?})", self.type_name, self.version)
    }
}

impl fmt::Display for InterfaceIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} version '{}'", self.type_name, self.version)
    }
}

/// A type-erased, shareable execution interface: what kernel providers, packs and prepared
/// kernels hold.
///
/// Seed rule: the interface is immutable and its identity is `(type(interface),
/// interface.version)`. The handle captures that identity once at construction, so it is
/// stable for the handle's life; cloning is cheap and shares the same interface instance (the
/// seed's "exact interface instance owned by the carrier's KernelProvider"). Every prepared
/// kernel clones the provider's handle: the handle a frozen execution set gives its patterns
/// lives as long as the class, so cloning it copies a reference; any other clone is one
/// reference count.
#[derive(Clone)]
pub struct InterfaceHandle {
    shared: SharedRef,
}

/// How a handle reaches what its clones share.
#[derive(Clone)]
enum SharedRef {
    /// Counted: freed with the last handle.
    Counted(Arc<Shared>),
    /// Kept for the life of the process (a frozen execution set's interface).
    Static(&'static Shared),
}

impl std::ops::Deref for SharedRef {
    type Target = Shared;

    #[inline]
    fn deref(&self) -> &Shared {
        match self {
            SharedRef::Counted(shared) => shared,
            SharedRef::Static(shared) => shared,
        }
    }
}

/// What the clones of one [`InterfaceHandle`] share.
struct Shared {
    interface: Arc<dyn ExecutionInterface>,
    any: Arc<dyn Any + Send + Sync>,
    identity: InterfaceIdentity,
}

impl InterfaceHandle {
    /// Wraps the concrete `interface`.
    ///
    /// Seed rule: "version SHALL be a non-empty string ... an empty value (fails) with
    /// ValueError" — an interface reporting an empty version is a Value error naming its type.
    pub fn new<T: ExecutionInterface>(interface: T) -> Result<InterfaceHandle> {
        let identity = interface.identity();
        check_version(identity.version(), identity.type_name())?;
        let interface = Arc::new(interface);
        Ok(InterfaceHandle {
            shared: SharedRef::Counted(Arc::new(Shared {
                any: Arc::clone(&interface) as Arc<dyn Any + Send + Sync>,
                interface,
                identity,
            })),
        })
    }

    /// This handle's interface kept for the life of the process, so that cloning the returned
    /// handle costs no reference count: for the interface of a frozen execution set, which
    /// lives as long as its class.
    pub(crate) fn into_static(self) -> InterfaceHandle {
        match self.shared {
            SharedRef::Static(_) => self,
            SharedRef::Counted(shared) => {
                let kept: &'static Arc<Shared> = Box::leak(Box::new(shared));
                InterfaceHandle {
                    shared: SharedRef::Static(kept),
                }
            }
        }
    }

    /// The compatibility identity `(exact type, version)` (seed: additions to a concrete
    /// interface do not change it).
    pub fn identity(&self) -> &InterfaceIdentity {
        &self.shared.identity
    }

    /// The interface version (seed: `interface.version`).
    pub fn version(&self) -> &str {
        self.shared.identity.version()
    }

    /// The interface as its exact concrete type `T`, or `None` for any other type (seed:
    /// facilities belong to "that exact carrier"'s concrete interface type).
    pub fn downcast_ref<T: ExecutionInterface>(&self) -> Option<&T> {
        self.shared.any.downcast_ref::<T>()
    }

    /// The interface through its trait.
    pub fn as_interface(&self) -> &dyn ExecutionInterface {
        &*self.shared.interface
    }

    /// Whether both handles share the very same interface instance (seed: a pattern receives
    /// "the exact interface instance owned by the carrier's KernelProvider").
    pub fn same_instance(&self, other: &InterfaceHandle) -> bool {
        Arc::ptr_eq(&self.shared.any, &other.shared.any)
    }
}

impl fmt::Debug for InterfaceHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("InterfaceHandle")
            .field(&self.shared.identity)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Probe(u32);

    impl ExecutionInterface for Probe {
        fn version(&self) -> &str {
            "probe-1"
        }
    }

    #[test]
    fn a_kept_handle_is_the_same_instance_with_the_same_identity() {
        let counted = InterfaceHandle::new(Probe(7)).unwrap();
        let kept = counted.clone().into_static();
        assert!(matches!(kept.shared, SharedRef::Static(_)));
        assert!(kept.same_instance(&counted));
        assert!(kept.clone().same_instance(&counted));
        assert_eq!(kept.identity(), counted.identity());
        assert_eq!(kept.version(), "probe-1");
        assert_eq!(kept.downcast_ref::<Probe>().map(|p| p.0), Some(7));
        let again = kept.clone().into_static();
        assert!(matches!(again.shared, SharedRef::Static(_)));
        assert!(again.same_instance(&counted));
        let other = InterfaceHandle::new(Probe(7)).unwrap();
        assert!(!kept.same_instance(&other));
        assert_eq!(kept.identity(), other.identity());
    }
}
