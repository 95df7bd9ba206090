//! The deferred construction of a definition-free independent Python carrier.
//!
//! The original's legacy carriers call `super().__init__()` first and set the state their
//! storage hooks read afterwards (`self._inner = ...`), and a class may define no hooks at all
//! when it is only asked about its capabilities. So `Carrier.__init__()` observes the class
//! and seals its capability declaration, as a construction does, but reads no hook: the core
//! carrier is built over the hooks when the instance is first used for anything else. A build
//! that fails publishes nothing and is tried again at the next use.

use std::sync::{Mutex, PoisonError};
use std::thread::ThreadId;

use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::PyWeakrefReference;
use strideweave::carrier::CarrierClass;
use strideweave::Carrier;

/// An instance whose core carrier is built at its first use.
pub struct Pending {
    /// The instance (weakly: it owns this state).
    instance: Py<PyWeakrefReference>,
    class: CarrierClass,
    /// The thread building the carrier now, so a hook that uses the carrier while it is being
    /// built is refused instead of recursing.
    building: Mutex<Option<ThreadId>>,
}

impl Pending {
    /// The deferred construction of `instance`, of the definition-free class `class`.
    pub fn new(instance: &Bound<'_, PyAny>, class: CarrierClass) -> PyResult<Pending> {
        Ok(Pending {
            instance: PyWeakrefReference::new(instance)?.unbind(),
            class,
            building: Mutex::new(None),
        })
    }

    /// The instance's exact class.
    pub fn class(&self) -> CarrierClass {
        self.class
    }

    /// Builds the core carrier over the instance's hooks (`crate::legacy::construct`); the
    /// instance comes with it, for the caller to remember.
    pub fn build<'py>(&self, py: Python<'py>) -> PyResult<(Carrier, Bound<'py, PyAny>)> {
        let instance = self.instance.bind(py).upgrade().ok_or_else(|| {
            PyRuntimeError::new_err(format!(
                "the {} carrier's Python object was garbage-collected",
                self.class
            ))
        })?;
        let class = instance.get_type();
        let base = py.get_type::<crate::carrier::PyCarrier>();
        for hook in ["size", "dtype"] {
            if class.getattr(hook)?.is(&base.getattr(hook)?) {
                return Err(PyTypeError::new_err(format!(
                    "{} defines no storage hooks: a definition-free carrier defines size(), \
                     dtype(), get_value() and set_value() to hold values",
                    self.class
                )));
            }
        }
        let me = std::thread::current().id();
        {
            let mut building = self.building.lock().unwrap_or_else(PoisonError::into_inner);
            if *building == Some(me) {
                return Err(PyTypeError::new_err(format!(
                    "{}'s storage hooks (dtype(), size(), _is_mutable(), \
                     _supports_storage_dtype()) used the carrier while it was being built \
                     from them",
                    self.class
                )));
            }
            *building = Some(me);
        }
        let built = crate::legacy::construct(&instance, self.class, None);
        *self.building.lock().unwrap_or_else(PoisonError::into_inner) = None;
        Ok((built?, instance))
    }
}
