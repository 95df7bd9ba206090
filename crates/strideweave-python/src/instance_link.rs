//! `InstanceLink`: the reference from a core carrier of a Python class to its Python
//! instance, visible to Python's garbage collector. A TiledEvictable's reference to its
//! Python residency policy is held the same way, shared with the carrier's Python object
//! (a policy that refers back to that object is the same kind of cycle).
//!
//! The instance holds its core carrier (`PyCarrier`), and the core carrier's provider state
//! holds the instance: a cycle through Rust, which the collector cannot see on its own. The
//! link is shared by the provider state and the instance's `PyCarrier`, so the instance's
//! `__traverse__` can report the reference — but only while the instance holds the only
//! handle to its core carrier. Then the reference is owned, through the carrier, by the
//! instance alone, and an instance the collector finds unreachable may be cleared: its
//! `__clear__` drops the reference, the instance is freed, and with it the core carrier and
//! its state. While anything else holds the carrier (a tensor, a running operation, a tier
//! of another carrier) the reference is not reported and the instance stays alive.

use std::sync::{Arc, Mutex, PoisonError};

use pyo3::prelude::*;
use pyo3::{PyTraverseError, PyVisit};
use strideweave::{Carrier, Error};

/// The instance a core carrier's provider state refers to (`None` once the collector
/// cleared it, which happens only after the last other handle is gone).
pub struct InstanceLink {
    instance: Mutex<Option<Py<PyAny>>>,
}

impl InstanceLink {
    /// The link to `instance`.
    pub fn new(instance: Py<PyAny>) -> Arc<InstanceLink> {
        Arc::new(InstanceLink {
            instance: Mutex::new(Some(instance)),
        })
    }

    /// The instance, for a callback; a Runtime error once it was collected.
    pub fn instance(&self, py: Python<'_>) -> strideweave::Result<Py<PyAny>> {
        self.instance
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|instance| instance.clone_ref(py))
            .ok_or_else(|| {
                Error::Runtime(
                    "the Python object this carrier refers to was garbage-collected".to_owned(),
                )
            })
    }

    /// Whether the reference is owned by the instance alone, which holds `link` and (once
    /// constructed) the handle `carrier`: either no provider state holds the link any more
    /// (a construction that failed dropped it), or the instance's handle is the core
    /// carrier's only one, so the state holding the link lives exactly as long as it does.
    fn owned_by_instance(link: &Arc<InstanceLink>, carrier: Option<&Carrier>) -> bool {
        Arc::strong_count(link) == 1 || carrier.is_some_and(|c| c.handle_count() == 1)
    }

    /// Reports the reference to the collector when the instance alone owns it. Never
    /// blocks: every holder of the lock holds the GIL, so the collector (which holds it too)
    /// finds it free.
    pub fn visit(
        link: &Arc<InstanceLink>,
        carrier: Option<&Carrier>,
        visit: &PyVisit<'_>,
    ) -> Result<(), PyTraverseError> {
        if !InstanceLink::owned_by_instance(link, carrier) {
            return Ok(());
        }
        if let Ok(held) = link.instance.try_lock() {
            if let Some(instance) = held.as_ref() {
                visit.call(instance)?;
            }
        }
        Ok(())
    }

    /// Drops the reference (the collector's `__clear__`) when the instance alone still owns
    /// it; the object is released after the lock is.
    pub fn clear(link: &Arc<InstanceLink>, carrier: Option<&Carrier>) {
        if !InstanceLink::owned_by_instance(link, carrier) {
            return;
        }
        let taken = match link.instance.try_lock() {
            Ok(mut held) => held.take(),
            Err(_) => None,
        };
        drop(taken);
    }
}
