//! `TileProgress`: the progress record a tiled operation hands its carrier's Python
//! residency policy (`policy.on_progress(progress)`) after every work item.

use pyo3::prelude::*;
use strideweave::carriers::TileProgress;

/// One progress report of a tiled operation, backward pass or accumulation on a
/// TiledEvictable: the core's `TileProgress`, immutable. `completed` counts the work items
/// finished so far (1 at the first report, `total` at the last).
#[pyclass(name = "TileProgress", module = "strideweave", frozen, eq)]
#[derive(PartialEq)]
pub struct PyTileProgress {
    inner: TileProgress,
}

impl PyTileProgress {
    /// The Python record of `progress`.
    pub fn new(progress: &TileProgress) -> PyTileProgress {
        PyTileProgress {
            inner: progress.clone(),
        }
    }
}

#[pymethods]
impl PyTileProgress {
    /// Fields are immutable: assignment is a `dataclasses.FrozenInstanceError`.
    fn __setattr__(&self, py: Python<'_>, name: &str, _value: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    /// Fields cannot be deleted either: a `dataclasses.FrozenInstanceError`.
    fn __delattr__(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    /// The operation's name (`"add"`, `"matmul"`, `"reduce_sum.backward"`, ...).
    #[getter]
    fn operation(&self) -> &str {
        self.inner.operation()
    }

    /// The work items finished so far.
    #[getter]
    fn completed(&self) -> usize {
        self.inner.completed()
    }

    /// The work items of the whole operation.
    #[getter]
    fn total(&self) -> usize {
        self.inner.total()
    }

    /// The tiles staged onto the primary tier's class so far.
    #[getter]
    fn staged_tiles(&self) -> usize {
        self.inner.staged_tiles()
    }

    /// The slots those staged copies read.
    #[getter]
    fn staged_slots(&self) -> usize {
        self.inner.staged_slots()
    }

    /// How many work items may be in flight at once.
    #[getter]
    fn prefetch_depth(&self) -> usize {
        self.inner.prefetch_depth()
    }

    /// The most staged tile carriers alive at once so far.
    #[getter]
    fn staged_peak(&self) -> usize {
        self.inner.staged_peak()
    }

    /// The staging buffers allocated so far (the others were reused).
    #[getter]
    fn allocated_buffers(&self) -> usize {
        self.inner.allocated_buffers()
    }

    /// The completed fraction, in `[0, 1]`.
    #[getter]
    fn fraction(&self) -> f64 {
        self.inner.fraction()
    }

    fn __repr__(&self) -> String {
        format!(
            "TileProgress('{}', {}/{}, staged_tiles={}, staged_peak={})",
            self.inner.operation(),
            self.inner.completed(),
            self.inner.total(),
            self.inner.staged_tiles(),
            self.inner.staged_peak()
        )
    }
}
