//! Residency policies written in Python: `ResidencyPolicy` (subclassed, its `plan` called by
//! TiledEvictable) and the `ResidencyPlan` record it returns.
//!
//! A `TiledEvictable(..., residency_policy=policy)` keeps the Python object; every plan the
//! core asks of the policy calls `policy.plan(required, purpose)`, and every progress report
//! of a tiled operation `policy.on_progress(progress)`, with the GIL taken back. An exception
//! raised in either is parked (callback_error) and raised again, as the same object, when the
//! failing call leaves the core, which has published nothing.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, LazyLock, Mutex, PoisonError, Weak};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt, PyTuple};
use strideweave::carriers::{
    ResidencyPlan, ResidencyPolicy, ResidencyPurpose, TileProgress, TileSet,
};
use strideweave::{Carrier, Error};

use crate::callback_error::park;
use crate::convert::{to_indices, type_name};
use crate::errors::IntoPyResult;
use crate::instance_link::InstanceLink;

/// Tile coordinates from a `TileSet` (or `TileSelection`) value or a Python iterable of int
/// sequences; `what` names the field.
fn tiles_arg(tiles: &Bound<'_, PyAny>, what: &str) -> PyResult<TileSet> {
    let coordinates = match tiles.getattr("coordinates") {
        Ok(coordinates) if !tiles.is_instance_of::<pyo3::types::PyTuple>() => coordinates,
        _ => tiles.clone(),
    };
    let tiles = &coordinates;
    let iterator = tiles.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "{what} must be an iterable of tile coordinates, got {}",
            type_name(tiles)
        ))
    })?;
    let coordinates = iterator
        .map(|item| to_indices(&item?, what))
        .collect::<PyResult<Vec<_>>>()?;
    TileSet::new(coordinates).py()
}

/// A tile set as a sorted tuple of coordinate tuples.
pub fn tiles_out<'py>(py: Python<'py>, tiles: &TileSet) -> PyResult<Bound<'py, PyTuple>> {
    let items = tiles
        .coordinates()
        .iter()
        .map(|coordinate| PyTuple::new(py, coordinate))
        .collect::<PyResult<Vec<_>>>()?;
    PyTuple::new(py, items)
}

/// The purpose a Python name stands for (`what` names the argument in the error).
pub fn purpose_arg(purpose: &Bound<'_, PyAny>, what: &str) -> PyResult<ResidencyPurpose> {
    let name: String = purpose.extract().map_err(|_| {
        PyTypeError::new_err(format!("{what} must be a str, got {}", type_name(purpose)))
    })?;
    match name.as_str() {
        "read" => Ok(ResidencyPurpose::Read),
        "write" => Ok(ResidencyPurpose::Write),
        "operation" => Ok(ResidencyPurpose::Operation),
        "backward" => Ok(ResidencyPurpose::Backward),
        other => Err(PyValueError::new_err(format!(
            "{what} must be 'read', 'write', 'operation' or 'backward', got '{other}'"
        ))),
    }
}

/// The Python name of `purpose`.
pub fn purpose_name(purpose: ResidencyPurpose) -> &'static str {
    match purpose {
        ResidencyPurpose::Read => "read",
        ResidencyPurpose::Write => "write",
        ResidencyPurpose::Operation => "operation",
        ResidencyPurpose::Backward => "backward",
        _ => "other",
    }
}

/// The seed's `ResidencyPlan(promote, retain, evict)`: three disjoint tile sets, immutable.
#[pyclass(name = "ResidencyPlan", module = "strideweave", frozen, eq)]
#[derive(PartialEq)]
pub struct PyResidencyPlan {
    inner: ResidencyPlan,
}

impl PyResidencyPlan {
    /// The Python record of `plan`.
    pub fn new(plan: ResidencyPlan) -> PyResidencyPlan {
        PyResidencyPlan { inner: plan }
    }
}

#[pymethods]
impl PyResidencyPlan {
    /// Fields are immutable: assignment is a `dataclasses.FrozenInstanceError`.
    fn __setattr__(&self, py: Python<'_>, name: &str, _value: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    /// Fields cannot be deleted either: a `dataclasses.FrozenInstanceError`.
    fn __delattr__(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    #[new]
    #[pyo3(signature = (promote=None, retain=None, evict=None))]
    fn py_new(
        promote: Option<&Bound<'_, PyAny>>,
        retain: Option<&Bound<'_, PyAny>>,
        evict: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let set = |tiles: Option<&Bound<'_, PyAny>>, what: &str| match tiles {
            None => Ok(TileSet::empty()),
            Some(tiles) => tiles_arg(tiles, what),
        };
        let plan = ResidencyPlan::new(
            set(promote, "ResidencyPlan promote")?,
            set(retain, "ResidencyPlan retain")?,
            set(evict, "ResidencyPlan evict")?,
        )
        .py()?;
        Ok(PyResidencyPlan { inner: plan })
    }

    /// The tiles to promote to the primary tier, sorted.
    #[getter]
    fn promote<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        tiles_out(py, self.inner.promote())
    }

    /// The tiles to keep on the primary tier, sorted.
    #[getter]
    fn retain<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        tiles_out(py, self.inner.retain())
    }

    /// The tiles to evict to the secondary tier, sorted.
    #[getter]
    fn evict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        tiles_out(py, self.inner.evict())
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "ResidencyPlan(promote={}, retain={}, evict={})",
            self.promote(py)?.repr()?,
            self.retain(py)?.repr()?,
            self.evict(py)?.repr()?
        ))
    }
}

/// The base of residency policies written in Python. A subclass overrides
/// `plan(required, purpose)` — `required` a sorted tuple of tile coordinates, `purpose` one
/// of `"read"`, `"write"`, `"operation"`, `"backward"` — returning a `ResidencyPlan`, and may
/// override `primary_capacity()` (an int, or `None` for unbounded; read once, when the
/// carrier is built) and `on_progress(progress)` (a `TileProgress` after every work item of
/// a tiled operation; an exception there stops the operation, which publishes nothing). The
/// base suggests nothing, bounds nothing and ignores progress. A plan only optimizes: the
/// framework corrects it so the required tiles are where the work needs them.
#[pyclass(name = "ResidencyPolicy", module = "strideweave", subclass, frozen)]
pub struct PyResidencyPolicy;

#[pymethods]
impl PyResidencyPolicy {
    #[new]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn py_new(
        _args: &Bound<'_, PyTuple>,
        _kwargs: Option<&Bound<'_, pyo3::types::PyDict>>,
    ) -> Self {
        PyResidencyPolicy
    }

    /// The plan for making `required` resident for `purpose`: the base plans nothing.
    fn plan(
        &self,
        _required: &Bound<'_, PyAny>,
        _purpose: &Bound<'_, PyAny>,
    ) -> PyResult<PyResidencyPlan> {
        Ok(PyResidencyPlan {
            inner: ResidencyPlan::new(TileSet::empty(), TileSet::empty(), TileSet::empty()).py()?,
        })
    }

    /// The most tiles the primary tier should hold: `None` (unbounded) in the base.
    fn primary_capacity(&self) -> Option<usize> {
        None
    }

    /// Observes one progress report of a tiled operation: the base ignores it.
    fn on_progress(&self, _progress: &Bound<'_, PyAny>) {}
}

/// The core policy that calls a Python `ResidencyPolicy` object, held through a link that
/// the TiledEvictable's Python object shares, so the garbage collector sees the reference
/// (a policy that refers back to its carrier is a cycle through the core; see
/// crate::instance_link).
struct PythonPolicy {
    link: Arc<InstanceLink>,
    capacity: Option<usize>,
    /// Whether the object has an `on_progress` method (a structural policy may have only
    /// `plan`).
    reports_progress: bool,
}

impl fmt::Debug for PythonPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PythonPolicy")
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

impl ResidencyPolicy for PythonPolicy {
    fn plan(
        &self,
        required: &TileSet,
        purpose: ResidencyPurpose,
    ) -> strideweave::Result<ResidencyPlan> {
        const CALLBACK: &str = "ResidencyPolicy plan";
        crate::finalization::attach(|py| {
            let tiles = tiles_out(py, required).map_err(|e| park(py, CALLBACK, e))?;
            let answer = self
                .link
                .instance(py)?
                .bind(py)
                .call_method1("plan", (tiles, purpose_name(purpose)))
                .map_err(|e| park(py, CALLBACK, e))?;
            answer
                .cast::<PyResidencyPlan>()
                .map(|plan| plan.get().inner.clone())
                .map_err(|_| {
                    Error::Type(format!(
                        "ResidencyPolicy plan must return a ResidencyPlan, got {}",
                        type_name(&answer)
                    ))
                })
        })
    }

    fn primary_capacity(&self) -> Option<usize> {
        self.capacity
    }

    fn try_on_progress(&self, progress: &TileProgress) -> strideweave::Result<()> {
        const CALLBACK: &str = "ResidencyPolicy on_progress";
        if !self.reports_progress {
            return Ok(());
        }
        crate::finalization::attach(|py| {
            let record = Py::new(py, crate::residency_progress::PyTileProgress::new(progress))
                .map_err(|e| park(py, CALLBACK, e))?;
            let answer = self
                .link
                .instance(py)?
                .bind(py)
                .call_method1("on_progress", (record,))
                .map_err(|e| park(py, CALLBACK, e))?;
            if answer.is_none() {
                return Ok(());
            }
            Err(Error::Type(format!(
                "ResidencyPolicy on_progress must return None, got {}",
                type_name(&answer)
            )))
        })
    }
}

/// The core policy of a `residency_policy` argument, and the link through which it holds the
/// object. As in the original, the policy is structural: a `ResidencyPolicy` instance, or any
/// object with a callable `plan(required, purpose)`; `primary_capacity()` and
/// `on_progress(progress)` are used when the object has them.
pub fn policy_arg(
    policy: &Bound<'_, PyAny>,
) -> PyResult<(Arc<dyn ResidencyPolicy>, Arc<InstanceLink>)> {
    let subclass = policy.cast::<PyResidencyPolicy>().is_ok();
    let callable = |name: &str| {
        policy
            .getattr(name)
            .map(|method| method.is_callable())
            .unwrap_or(false)
    };
    if !subclass && !callable("plan") {
        return Err(PyTypeError::new_err(format!(
            "TiledEvictable residency_policy must be a ResidencyPolicy or have a callable \
             plan(required, purpose), got {}",
            type_name(policy)
        )));
    }
    let reports_progress = subclass || callable("on_progress");
    let capacity = if subclass || callable("primary_capacity") {
        policy.call_method0("primary_capacity")?
    } else {
        policy.py().None().into_bound(policy.py())
    };
    let capacity = if capacity.is_none() {
        None
    } else if capacity.is_instance_of::<PyBool>() || !capacity.is_instance_of::<PyInt>() {
        return Err(PyTypeError::new_err(format!(
            "ResidencyPolicy primary_capacity must return an int or None, got {}",
            type_name(&capacity)
        )));
    } else {
        Some(capacity.extract::<usize>().map_err(|_| {
            PyValueError::new_err(format!(
                "ResidencyPolicy primary_capacity must be non-negative, got {}",
                capacity
            ))
        })?)
    };
    let link = InstanceLink::new(policy.clone().unbind());
    let core: Arc<dyn ResidencyPolicy> = Arc::new(PythonPolicy {
        link: Arc::clone(&link),
        capacity,
        reports_progress,
    });
    Ok((core, link))
}

/// The policy link of each TiledEvictable built with a Python policy, by the core carrier's
/// identity, so a Python object made later for the same carrier shares it. The entries are
/// weak: a link outlives its entry only while its carrier lives.
static POLICY_LINKS: LazyLock<Mutex<HashMap<usize, Weak<InstanceLink>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// Records `link` as the policy link of the TiledEvictable `carrier` (dropping the entries of
/// carriers that are gone).
pub fn remember_policy_link(carrier: &Carrier, link: &Arc<InstanceLink>) {
    let mut links = POLICY_LINKS.lock().unwrap_or_else(PoisonError::into_inner);
    links.retain(|_, link| link.strong_count() > 0);
    links.insert(carrier.id(), Arc::downgrade(link));
}

/// The policy link of the TiledEvictable `carrier`, if it was built with a Python policy.
pub fn policy_link(carrier: &Carrier) -> Option<Arc<InstanceLink>> {
    POLICY_LINKS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&carrier.id())
        .and_then(Weak::upgrade)
}
