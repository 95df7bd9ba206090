//! TiledEvictable from Python: the carrier, its tiles by location and their residency, the
//! residency facet, `project` and `scatter`, and their completion handles.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use pyo3::{PyClassInitializer, PyTraverseError, PyVisit};
use strideweave::carriers::{
    AwaitProjection, AwaitResidency, AwaitScatter, ScatterReduction, TileLocation, TileResidency,
    TileSelection, TileSet, TiledEvictable,
};
use strideweave::{Carrier, Tensor};

use crate::carrier::{expect_carrier, PyCarrier, PyCarrierFacet};
use crate::convert::{to_indices, type_name};
use crate::errors::IntoPyResult;

/// A carrier whose tiles are spread over a primary and a secondary tier.
#[pyclass(name = "TiledEvictable", module = "strideweave", extends = PyCarrier, subclass, frozen)]
#[derive(Default)]
pub struct PyTiledEvictable;

#[pymethods]
impl PyTiledEvictable {
    /// A shipped carrier class is closed: defining a subclass is a `TypeError` with the one
    /// refusal every closed class states (`CLOSED_CARRIER_MESSAGE`).
    #[classmethod]
    #[pyo3(signature = (**_kwargs))]
    fn __init_subclass__(
        cls: &Bound<'_, pyo3::types::PyType>,
        _kwargs: Option<&Bound<'_, pyo3::types::PyDict>>,
    ) -> PyResult<()> {
        Err(crate::carrier::closed_class(cls))
    }

    #[new]
    #[pyo3(signature = (primary, secondary, grid_shape, tile_shape, *, residency_policy=None))]
    fn py_new(
        primary: &Bound<'_, PyAny>,
        secondary: &Bound<'_, PyAny>,
        grid_shape: &Bound<'_, PyAny>,
        tile_shape: &Bound<'_, PyAny>,
        residency_policy: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let (policy, link) = match residency_policy.filter(|p| !p.is_none()) {
            None => (None, None),
            Some(policy) => {
                let (policy, link) = crate::residency::policy_arg(policy)?;
                (Some(policy), Some(link))
            }
        };
        let primary = expect_carrier(primary, "TiledEvictable primary")?;
        let secondary = expect_carrier(secondary, "TiledEvictable secondary")?;
        let grid = to_indices(grid_shape, "TiledEvictable grid_shape")?;
        let tile = to_indices(tile_shape, "TiledEvictable tile_shape")?;
        let carrier = TiledEvictable::carrier(&primary, &secondary, &grid, &tile, policy).py()?;
        let held = PyCarrier::holding(carrier.clone());
        if let Some(link) = link {
            crate::residency::remember_policy_link(&carrier, &link);
            held.set_link(&link);
        }
        Ok(PyClassInitializer::from(held).add_subclass(PyTiledEvictable))
    }

    /// The primary tier (the fast one, holding staged tiles).
    #[getter]
    fn primary(slf: PyRef<'_, Self>, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let tier = TiledEvictable::primary(slf.as_super().carrier()?).py()?;
        crate::carrier::wrap(py, &tier)
    }

    /// The secondary tier (the large one).
    #[getter]
    fn secondary(slf: PyRef<'_, Self>, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let tier = TiledEvictable::secondary(slf.as_super().carrier()?).py()?;
        crate::carrier::wrap(py, &tier)
    }

    /// The number of tiles along each axis.
    #[getter]
    fn grid_shape<'py>(slf: PyRef<'_, Self>, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(
            py,
            TiledEvictable::grid_shape(slf.as_super().carrier()?).py()?,
        )
    }

    /// The extent of one tile along each axis.
    #[getter]
    fn tile_shape<'py>(slf: PyRef<'_, Self>, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(
            py,
            TiledEvictable::tile_shape(slf.as_super().carrier()?).py()?,
        )
    }

    /// The extent of the whole tensor along each axis (grid × tile).
    #[getter]
    fn logical_shape<'py>(slf: PyRef<'_, Self>, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(
            py,
            TiledEvictable::logical_shape(slf.as_super().carrier()?).py()?,
        )
    }

    /// The Python residency policy this carrier was given, or `None`.
    #[getter]
    fn residency_policy(slf: PyRef<'_, Self>, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        let carrier = slf.as_super().carrier()?;
        Ok(crate::residency::policy_link(carrier).and_then(|link| link.instance(py).ok()))
    }

    /// The tiles whose valid copy is on the primary tier, as a `TileSet`.
    #[getter]
    fn primary_tiles(slf: PyRef<'_, Self>, py: Python<'_>) -> PyResult<Py<PyAny>> {
        tile_set_object(
            py,
            &TiledEvictable::primary_tiles(slf.as_super().carrier()?).py()?,
        )
    }

    /// The tiles whose valid copy is on the secondary tier, as a `TileSet`.
    #[getter]
    fn secondary_tiles(slf: PyRef<'_, Self>, py: Python<'_>) -> PyResult<Py<PyAny>> {
        tile_set_object(
            py,
            &TiledEvictable::secondary_tiles(slf.as_super().carrier()?).py()?,
        )
    }

    /// The tiles holding defined values (on either tier, or implicitly zero), as a `TileSet`.
    #[getter]
    fn valid_tiles(slf: PyRef<'_, Self>, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let carrier = slf.as_super().carrier()?;
        let mut tiles: Vec<Vec<usize>> = Vec::new();
        for set in [
            TiledEvictable::primary_tiles(carrier),
            TiledEvictable::secondary_tiles(carrier),
            TiledEvictable::implicit_tiles(carrier),
        ] {
            tiles.extend(set.py()?.coordinates().iter().cloned());
        }
        tile_set_object(py, &TileSet::new(tiles).py()?)
    }

    /// The tiles whose primary copy was written since it was staged, as a `TileSet`.
    #[getter]
    fn dirty_tiles(slf: PyRef<'_, Self>, py: Python<'_>) -> PyResult<Py<PyAny>> {
        tile_set_object(
            py,
            &TiledEvictable::dirty_tiles(slf.as_super().carrier()?).py()?,
        )
    }

    /// Starts moving `tiles` (a `TileSet` or `TileSelection`) to the primary tier.
    fn promote_async(
        slf: PyRef<'_, Self>,
        py: Python<'_>,
        tiles: &Bound<'_, PyAny>,
    ) -> PyResult<PyAwaitResidency> {
        let tiles = selected_tiles(tiles)?;
        let carrier = slf.as_super().carrier()?;
        let handle =
            crate::finalization::detach(py, || TiledEvictable::promote_async(carrier, &tiles))
                .py()?;
        Ok(PyAwaitResidency::new(handle))
    }

    /// Starts moving `tiles` (a `TileSet` or `TileSelection`) to the secondary tier.
    fn evict_async(
        slf: PyRef<'_, Self>,
        py: Python<'_>,
        tiles: &Bound<'_, PyAny>,
    ) -> PyResult<PyAwaitResidency> {
        let tiles = selected_tiles(tiles)?;
        let carrier = slf.as_super().carrier()?;
        let handle =
            crate::finalization::detach(py, || TiledEvictable::evict_async(carrier, &tiles))
                .py()?;
        Ok(PyAwaitResidency::new(handle))
    }

    /// Moves `tiles` to the primary tier and waits.
    fn promote(slf: PyRef<'_, Self>, py: Python<'_>, tiles: &Bound<'_, PyAny>) -> PyResult<()> {
        let tiles = selected_tiles(tiles)?;
        let carrier = slf.as_super().carrier()?;
        crate::finalization::detach(py, || TiledEvictable::promote(carrier, &tiles)).py()
    }

    /// Moves `tiles` to the secondary tier and waits.
    fn evict(slf: PyRef<'_, Self>, py: Python<'_>, tiles: &Bound<'_, PyAny>) -> PyResult<()> {
        let tiles = selected_tiles(tiles)?;
        let carrier = slf.as_super().carrier()?;
        crate::finalization::detach(py, || TiledEvictable::evict(carrier, &tiles)).py()
    }

    /// Gathers the tiles `selection` names (a `TileSelection`) of `tensor`, a tensor over
    /// this carrier whose layout follows its tile footprints, into a compact tensor on a
    /// carrier of the primary tier's class (or on `destination`); returns the handle whose
    /// `wait()` gives it. Recorded for gradients like an operation.
    #[pyo3(signature = (tensor, selection, destination=None))]
    fn project(
        slf: PyRef<'_, Self>,
        py: Python<'_>,
        tensor: &Bound<'_, PyAny>,
        selection: &Bound<'_, PyAny>,
        destination: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyAwaitTensor> {
        let tensor = crate::tensor::expect_tensor(tensor, "project tensor")?;
        own_tensor(&slf, &tensor, "project")?;
        let selection = selection_arg(selection)?;
        let destination = destination
            .filter(|d| !d.is_none())
            .map(|d| expect_carrier(d, "project destination"))
            .transpose()?;
        let handle = crate::finalization::detach(py, || {
            TiledEvictable::project(&tensor, &selection, destination.as_ref())
        })
        .py()?;
        Ok(PyAwaitTensor::new(Pending::Projection(handle)))
    }

    /// Writes `compact` (a compact tensor of the selection's shape on the primary tier's
    /// class) into the tiles `selection` names of a fresh tiled tensor like `template` (a
    /// tensor over this carrier), replacing (`reduction="replace"`) or adding to
    /// (`"add"`) the template's tiles; returns the handle whose `wait()` gives it.
    #[pyo3(signature = (compact, template, selection, *, reduction="replace"))]
    fn scatter(
        slf: PyRef<'_, Self>,
        py: Python<'_>,
        compact: &Bound<'_, PyAny>,
        template: &Bound<'_, PyAny>,
        selection: &Bound<'_, PyAny>,
        reduction: &str,
    ) -> PyResult<PyAwaitTensor> {
        let compact = crate::tensor::expect_tensor(compact, "scatter compact")?;
        let template = crate::tensor::expect_tensor(template, "scatter template")?;
        own_tensor(&slf, &template, "scatter")?;
        let selection = selection_arg(selection)?;
        let reduction = match reduction {
            "replace" => ScatterReduction::Replace,
            "add" => ScatterReduction::Add,
            other => {
                return Err(PyValueError::new_err(format!(
                    "reduction must be 'replace' or 'add', got {other:?}"
                )))
            }
        };
        let handle = crate::finalization::detach(py, || {
            TiledEvictable::scatter(&compact, &template, &selection, reduction)
        })
        .py()?;
        Ok(PyAwaitTensor::new(Pending::Scatter(handle)))
    }

    /// The state of the tile at grid coordinate `coord`.
    fn tile_state(slf: PyRef<'_, Self>, coord: &Bound<'_, PyAny>) -> PyResult<PyTileState> {
        let coord = to_indices(coord, "tile coordinate")?;
        let state = TiledEvictable::tile_state(slf.as_super().carrier()?, &coord).py()?;
        Ok(PyTileState {
            location: state.location().name(),
            valid: state.is_valid(),
            dirty: state.is_dirty(),
        })
    }
}

/// Where one tile of a TiledEvictable lives and whether it holds data written since.
#[pyclass(name = "TileState", module = "strideweave", frozen, eq)]
#[derive(PartialEq)]
pub struct PyTileState {
    location: &'static str,
    valid: bool,
    dirty: bool,
}

#[pymethods]
impl PyTileState {
    /// `"primary"`, `"secondary"`, `"implicit"` or `"invalid"`.
    #[getter]
    fn location(&self) -> &'static str {
        self.location
    }

    /// Whether the tile holds defined values.
    #[getter]
    fn valid(&self) -> bool {
        self.valid
    }

    /// Whether the primary copy was written since it was staged.
    #[getter]
    fn dirty(&self) -> bool {
        self.dirty
    }

    fn __repr__(&self) -> String {
        let flag = |b: bool| if b { "True" } else { "False" };
        format!(
            "TileState(location='{}', valid={}, dirty={})",
            self.location,
            flag(self.valid),
            flag(self.dirty)
        )
    }
}

/// TiledEvictable's residency facet: tile states, tile sets and asynchronous promotion and
/// eviction of chosen tiles.
#[pyclass(name = "TiledResidencyFacet", module = "strideweave", extends = PyCarrierFacet, frozen)]
pub struct PyTiledResidencyFacet {
    pub(crate) carrier: Carrier,
}

fn tiles_arg(tiles: &Bound<'_, PyAny>) -> PyResult<TileSet> {
    let iterator = tiles.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "tiles must be an iterable of tile coordinates, got {}",
            type_name(tiles)
        ))
    })?;
    let coordinates = iterator
        .map(|item| to_indices(&item?, "tile coordinate"))
        .collect::<PyResult<Vec<_>>>()?;
    TileSet::new(coordinates).py()
}

fn tiles_out(py: Python<'_>, tiles: &TileSet) -> PyResult<Py<PyTuple>> {
    let items = tiles
        .coordinates()
        .iter()
        .map(|coordinate| PyTuple::new(py, coordinate))
        .collect::<PyResult<Vec<_>>>()?;
    Ok(PyTuple::new(py, items)?.unbind())
}

fn location_arg(location: &str) -> PyResult<TileLocation> {
    match location {
        "primary" => Ok(TileLocation::Primary),
        "secondary" => Ok(TileLocation::Secondary),
        "implicit" => Ok(TileLocation::Implicit),
        "invalid" => Ok(TileLocation::Invalid),
        other => Err(PyValueError::new_err(format!(
            "tile location must be 'primary', 'secondary', 'implicit' or 'invalid', got {other:?}"
        ))),
    }
}

impl PyTiledResidencyFacet {
    fn residency(&self) -> PyResult<&TileResidency> {
        TiledEvictable::residency(&self.carrier).py()
    }
}

#[pymethods]
impl PyTiledResidencyFacet {
    /// The state of the tile at `coord`.
    fn tile_state(&self, coord: &Bound<'_, PyAny>) -> PyResult<PyTileState> {
        let coord = to_indices(coord, "tile coordinate")?;
        let state = self.residency()?.tile_state(&self.carrier, &coord).py()?;
        Ok(PyTileState {
            location: state.location().name(),
            valid: state.is_valid(),
            dirty: state.is_dirty(),
        })
    }

    /// The tiles at `location`, as a sorted tuple of coordinates.
    fn tiles_at(&self, py: Python<'_>, location: &str) -> PyResult<Py<PyTuple>> {
        let location = location_arg(location)?;
        let tiles = self.residency()?.tiles_at(&self.carrier, location).py()?;
        tiles_out(py, &tiles)
    }

    /// The tiles written on the primary tier since they were staged.
    fn dirty_tiles(&self, py: Python<'_>) -> PyResult<Py<PyTuple>> {
        let tiles = self.residency()?.dirty_tiles(&self.carrier).py()?;
        tiles_out(py, &tiles)
    }

    /// Stages `tiles` into the primary tier; returns a completion handle.
    fn promote_async(
        &self,
        py: Python<'_>,
        tiles: &Bound<'_, PyAny>,
    ) -> PyResult<PyAwaitResidency> {
        let tiles = tiles_arg(tiles)?;
        let residency = self.residency()?;
        let carrier = self.carrier.clone();
        let handle =
            crate::finalization::detach(py, || residency.promote_async(&carrier, &tiles)).py()?;
        Ok(PyAwaitResidency::new(handle))
    }

    /// Writes `tiles` back to the secondary tier; returns a completion handle.
    fn evict_async(&self, py: Python<'_>, tiles: &Bound<'_, PyAny>) -> PyResult<PyAwaitResidency> {
        let tiles = tiles_arg(tiles)?;
        let residency = self.residency()?;
        let carrier = self.carrier.clone();
        let handle =
            crate::finalization::detach(py, || residency.evict_async(&carrier, &tiles)).py()?;
        Ok(PyAwaitResidency::new(handle))
    }

    /// The corrected residency plan for making `tiles` resident for `purpose` (`"read"`,
    /// `"write"`, `"operation"` or `"backward"`): the carrier's residency policy suggests (its
    /// `plan` is called with this purpose), the framework corrects. Nothing moves.
    fn plan_residency(
        &self,
        py: Python<'_>,
        tiles: &Bound<'_, PyAny>,
        purpose: &Bound<'_, PyAny>,
    ) -> PyResult<crate::residency::PyResidencyPlan> {
        let tiles = tiles_arg(tiles)?;
        let purpose = crate::residency::purpose_arg(purpose, "plan_residency purpose")?;
        let residency = self.residency()?;
        let carrier = self.carrier.clone();
        let plan =
            crate::finalization::detach(py, || residency.plan_residency(&carrier, &tiles, purpose))
                .py()?;
        Ok(crate::residency::PyResidencyPlan::new(plan))
    }
}

/// The completion of a residency change: `done` and a blocking `wait()`.
#[pyclass(name = "AwaitResidency", module = "strideweave", frozen)]
pub struct PyAwaitResidency {
    inner: AwaitResidency,
    error: crate::callback_error::Delivered,
}

impl PyAwaitResidency {
    fn new(inner: AwaitResidency) -> PyAwaitResidency {
        PyAwaitResidency {
            inner,
            error: crate::callback_error::Delivered::default(),
        }
    }
}

#[pymethods]
impl PyAwaitResidency {
    /// The exception this handle keeps, for Python's garbage collector.
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        self.error.visit(&visit)
    }

    fn __clear__(&self) {
        self.error.clear();
    }

    /// Whether the change reached its terminal outcome.
    #[getter]
    fn done(&self) -> bool {
        self.inner.done()
    }

    /// Blocks (without the GIL) until the change ends; raises its error if it failed (the
    /// same exception object on every call).
    fn wait(&self, py: Python<'_>) -> PyResult<()> {
        crate::finalization::detach(py, || self.inner.wait())
            .map_err(|error| self.error.raise(py, error))
    }
}

/// Refuses a tensor that does not live on the carrier `slf` (a `ValueError` naming `what`).
fn own_tensor(slf: &PyRef<'_, PyTiledEvictable>, tensor: &Tensor, what: &str) -> PyResult<()> {
    if tensor.carrier().same_as(slf.as_super().carrier()?) {
        return Ok(());
    }
    Err(PyValueError::new_err(format!(
        "{what} needs a tensor backed by this TiledEvictable, got one on a {} carrier",
        tensor.carrier().class()
    )))
}

/// The tiles of a `TileSet` or `TileSelection` (objects with `coordinates`), or of an
/// iterable of tile coordinates.
fn selected_tiles(tiles: &Bound<'_, PyAny>) -> PyResult<TileSet> {
    match tiles.getattr("coordinates") {
        Ok(coordinates) if !tiles.is_instance_of::<PyTuple>() => tiles_arg(&coordinates),
        _ => tiles_arg(tiles).map_err(|_| {
            PyTypeError::new_err(format!(
                "tiles must be a TileSet or TileSelection, got {}",
                type_name(tiles)
            ))
        }),
    }
}

/// A `TileSelection` argument (an object with `per_axis`, or the per-axis lists themselves).
fn selection_arg(selection: &Bound<'_, PyAny>) -> PyResult<TileSelection> {
    let per_axis = selection
        .getattr("per_axis")
        .unwrap_or_else(|_| selection.clone());
    let axes = per_axis.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "selection must be a TileSelection, got {}",
            type_name(selection)
        ))
    })?;
    let axes = axes
        .map(|axis| to_indices(&axis?, "selection axis"))
        .collect::<PyResult<Vec<_>>>()?;
    TileSelection::new(axes).py()
}

/// `tiles` as the package's `TileSet` value.
fn tile_set_object(py: Python<'_>, tiles: &TileSet) -> PyResult<Py<PyAny>> {
    let class = py.import("strideweave.carriers")?.getattr("TileSet")?;
    Ok(class.call1((tiles_out(py, tiles)?,))?.unbind())
}

/// What a tiled tensor handle waits for.
enum Pending {
    Projection(AwaitProjection),
    Scatter(AwaitScatter),
}

/// The completion of `TiledEvictable.project` or `scatter`: `done`, and a blocking `wait()`
/// that returns the same Tensor object every time (or raises the same exception object).
#[pyclass(name = "AwaitProjection", module = "strideweave", frozen)]
pub struct PyAwaitTensor {
    pending: Pending,
    result: std::sync::OnceLock<Py<crate::tensor::PyTensor>>,
    error: crate::callback_error::Delivered,
}

impl PyAwaitTensor {
    fn new(pending: Pending) -> PyAwaitTensor {
        PyAwaitTensor {
            pending,
            result: std::sync::OnceLock::new(),
            error: crate::callback_error::Delivered::default(),
        }
    }
}

#[pymethods]
impl PyAwaitTensor {
    /// The exception this handle keeps, for Python's garbage collector.
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        self.error.visit(&visit)
    }

    fn __clear__(&self) {
        self.error.clear();
    }

    /// Whether the work reached its terminal outcome.
    #[getter]
    fn done(&self) -> bool {
        match &self.pending {
            Pending::Projection(handle) => handle.done(),
            Pending::Scatter(handle) => handle.done(),
        }
    }

    /// Blocks (without the GIL) until the work ends; its Tensor, or its error.
    fn wait(&self, py: Python<'_>) -> PyResult<Py<crate::tensor::PyTensor>> {
        if let Some(result) = self.result.get() {
            return Ok(result.clone_ref(py));
        }
        let waited = crate::finalization::detach(py, || match &self.pending {
            Pending::Projection(handle) => handle.wait(),
            Pending::Scatter(handle) => handle.wait(),
        })
        .map_err(|error| self.error.raise(py, error))?;
        let made = Py::new(py, crate::tensor::wrap(waited))?;
        Ok(self.result.get_or_init(|| made).clone_ref(py))
    }
}
