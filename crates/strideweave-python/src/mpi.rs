//! MPI from Python (cargo feature `mpi`): `strideweave-mpi`'s runtime, communicators,
//! `all_reduce`, `average_gradients`, and cluster memory as a tier (`Cluster`,
//! `ClusterMemory` carriers, `ClusterLocal` carriers). The package's `strideweave.mpi`
//! module wraps these (python/strideweave/mpi.py); docs/distributed.md, "From Python".
//!
//! MPI belongs to the process: the module keeps one `Mpi` value. `mpi_init(adopt=True)`
//! adopts MPI that `mpi4py` (or other code) initialized, which then finalizes it;
//! `mpi_init(adopt=False)` initializes it here, and `mpi_finalize()` finalizes it (the
//! Python module registers that with `atexit`). Every call that waits for other ranks runs
//! without the GIL.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use strideweave::{Carrier, DType, Error, Tensor};
use strideweave_mpi::{
    all_reduce, average_gradients, Cluster, ClusterLocal, Communicator, Mpi, Reduction,
};

use crate::carrier::{expect_carrier, wrap as wrap_carrier};
use crate::errors::IntoPyResult;
use crate::finalization::detach;
use crate::tensor::{expect_tensor, wrap as wrap_tensor, PyTensor};

/// The process's MPI, once initialized or adopted.
static MPI: Mutex<Option<Mpi>> = Mutex::new(None);

/// A group of ranks that run collectives together (`strideweave_mpi::Communicator`).
#[pyclass(name = "Communicator", module = "strideweave.mpi", frozen)]
pub struct PyCommunicator {
    inner: Communicator,
}

#[pymethods]
impl PyCommunicator {
    /// This process's rank, from 0.
    #[getter]
    fn rank(&self) -> usize {
        self.inner.rank()
    }

    /// The number of ranks.
    #[getter]
    fn size(&self) -> usize {
        self.inner.size()
    }

    /// How long a collective or transfer waits for its peers, in seconds.
    #[getter]
    fn timeout(&self) -> f64 {
        self.inner.timeout().as_secs_f64()
    }

    /// The same communicator whose waits are bounded by `seconds`.
    fn with_timeout(&self, seconds: f64) -> PyResult<PyCommunicator> {
        let timeout = Duration::try_from_secs_f64(seconds).map_err(|_| {
            PyValueError::new_err(format!(
                "a timeout must be a positive number of seconds, got {seconds}"
            ))
        })?;
        Ok(PyCommunicator {
            inner: self.inner.with_timeout(timeout).py()?,
        })
    }

    /// Waits until every rank reached the barrier (bounded by the timeout).
    fn barrier(&self, py: Python<'_>) -> PyResult<()> {
        let comm = self.inner.clone();
        detach(py, move || comm.barrier()).py()
    }

    fn __repr__(&self) -> String {
        format!(
            "Communicator(rank={}, size={}, timeout={})",
            self.inner.rank(),
            self.inner.size(),
            self.inner.timeout().as_secs_f64()
        )
    }
}

/// Initializes MPI here (`adopt=False`) or adopts MPI initialized by other code
/// (`adopt=True`); returns the world communicator. A second call returns the same world.
#[pyfunction]
#[pyo3(signature = (adopt))]
fn mpi_init(py: Python<'_>, adopt: bool) -> PyResult<PyCommunicator> {
    let world = detach(py, move || {
        let mut mpi = MPI.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(mpi) = mpi.as_ref() {
            return Ok(mpi.world().clone());
        }
        let fresh = if adopt { Mpi::adopt()? } else { Mpi::init()? };
        let world = fresh.world().clone();
        *mpi = Some(fresh);
        Ok::<_, Error>(world)
    })
    .py()?;
    Ok(PyCommunicator { inner: world })
}

/// Finalizes MPI when this module initialized it (nothing when it adopted it, or when MPI
/// was never started here). Later MPI calls from this module fail.
#[pyfunction]
fn mpi_finalize(py: Python<'_>) {
    detach(py, || {
        let taken = MPI.lock().unwrap_or_else(PoisonError::into_inner).take();
        drop(taken);
    });
}

/// Whether this module initialized MPI itself (and finalizes it), as opposed to adopting it;
/// `None` before `mpi_init`.
#[pyfunction]
fn mpi_owns_mpi() -> Option<bool> {
    MPI.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
        .map(Mpi::owns_mpi)
}

/// The communicator over the ranks of the MPI communicator whose Fortran handle is `handle`
/// (`mpi4py`'s `comm.py2f()`), duplicated. Collective over that communicator.
#[pyfunction]
fn mpi_communicator_from_fortran(py: Python<'_>, handle: i64) -> PyResult<PyCommunicator> {
    let comm = detach(py, move || {
        let mpi = MPI.lock().unwrap_or_else(PoisonError::into_inner);
        match mpi.as_ref() {
            Some(mpi) => mpi.communicator_from_fortran(handle),
            None => Err(Error::Runtime(
                "MPI is not initialized: call strideweave.mpi.init() first".into(),
            )),
        }
    })
    .py()?;
    Ok(PyCommunicator { inner: comm })
}

/// `reduction` as a `Reduction`: "sum" or "mean".
fn reduction_arg(reduction: &str) -> PyResult<Reduction> {
    match reduction {
        "sum" => Ok(Reduction::Sum),
        "mean" => Ok(Reduction::Mean),
        other => Err(PyValueError::new_err(format!(
            "reduction must be 'sum' or 'mean', got {other:?}"
        ))),
    }
}

/// The element-wise sum or mean of `tensor` over the ranks of `comm` (differentiable).
#[pyfunction]
fn mpi_all_reduce(
    py: Python<'_>,
    tensor: &Bound<'_, PyAny>,
    reduction: &str,
    comm: &PyCommunicator,
) -> PyResult<PyTensor> {
    let tensor = expect_tensor(tensor, "all_reduce tensor")?;
    let reduction = reduction_arg(reduction)?;
    let comm = comm.inner.clone();
    let result = detach(py, move || all_reduce(&tensor, reduction, &comm)).py()?;
    Ok(wrap_tensor(result))
}

/// Replaces each parameter's gradient by its mean over the ranks of `comm`.
#[pyfunction]
fn mpi_average_gradients(
    py: Python<'_>,
    parameters: Vec<Bound<'_, PyAny>>,
    comm: &PyCommunicator,
) -> PyResult<()> {
    let parameters: Vec<Tensor> = parameters
        .iter()
        .enumerate()
        .map(|(i, p)| expect_tensor(p, &format!("parameter {i}")))
        .collect::<PyResult<_>>()?;
    let comm = comm.inner.clone();
    detach(py, move || average_gradients(&parameters, &comm)).py()
}

/// The ranks that lend memory to one client rank (`strideweave_mpi::Cluster`).
#[pyclass(name = "Cluster", module = "strideweave.mpi", frozen)]
pub struct PyCluster {
    inner: Cluster,
}

#[pymethods]
impl PyCluster {
    /// Joins the cluster of every rank of `comm` whose client is rank `client` (collective).
    #[new]
    #[pyo3(signature = (comm, client = 0))]
    fn new(py: Python<'_>, comm: &PyCommunicator, client: usize) -> PyResult<PyCluster> {
        let comm = comm.inner.clone();
        let inner = detach(py, move || Cluster::join(&comm, client)).py()?;
        Ok(PyCluster { inner })
    }

    /// This process's rank.
    #[getter]
    fn rank(&self) -> usize {
        self.inner.rank()
    }

    /// The client's rank.
    #[getter]
    fn client(&self) -> usize {
        self.inner.client()
    }

    /// Whether this process is the client.
    #[getter]
    fn is_client(&self) -> bool {
        self.inner.is_client()
    }

    /// The ranks that hold the client's slots.
    #[getter]
    fn owners(&self) -> Vec<usize> {
        self.inner.owners().to_vec()
    }

    /// Serves the client's requests until it stops the cluster (an owner's call); returns
    /// what this rank did: requests, slots_sent, slots_received, peak_slots. With
    /// `idle_timeout` (seconds), fails when no request arrives for that long.
    #[pyo3(signature = (idle_timeout = None))]
    fn serve(
        &self,
        py: Python<'_>,
        idle_timeout: Option<f64>,
    ) -> PyResult<std::collections::BTreeMap<&'static str, u64>> {
        let idle = idle_timeout
            .map(|s| {
                Duration::try_from_secs_f64(s).map_err(|_| {
                    PyValueError::new_err(format!(
                        "idle_timeout must be a positive number of seconds, got {s}"
                    ))
                })
            })
            .transpose()?;
        let cluster = self.inner.clone();
        let summary = detach(py, move || match idle {
            Some(idle) => cluster.serve_with_idle_timeout(idle),
            None => cluster.serve(),
        })
        .py()?;
        Ok([
            ("requests", summary.requests),
            ("slots_sent", summary.slots_sent),
            ("slots_received", summary.slots_received),
            ("peak_slots", summary.peak_slots),
        ]
        .into_iter()
        .collect())
    }

    /// Stops every owner's serve loop (the client's last call).
    fn stop(&self, py: Python<'_>) -> PyResult<()> {
        let cluster = self.inner.clone();
        detach(py, move || cluster.stop()).py()
    }

    /// A ClusterMemory carrier of `slots` zeroed Float32 slots spread over the owners.
    fn memory(&self, py: Python<'_>, slots: usize) -> PyResult<Py<PyAny>> {
        let cluster = self.inner.clone();
        let carrier = detach(py, move || cluster.memory(slots)).py()?;
        wrap_carrier(py, &carrier)
    }

    /// A ClusterMemory carrier holding `values` (Float32), spread over the owners.
    fn memory_from_values(&self, py: Python<'_>, values: Vec<f32>) -> PyResult<Py<PyAny>> {
        let cluster = self.inner.clone();
        let carrier = detach(py, move || cluster.memory_from_f32(&values)).py()?;
        wrap_carrier(py, &carrier)
    }

    /// Where a ClusterMemory carrier's slots live: (rank, first slot, slot count) per owner.
    #[staticmethod]
    fn placement(carrier: &Bound<'_, PyAny>) -> PyResult<Vec<(usize, usize, usize)>> {
        let carrier = expect_carrier(carrier, "placement carrier")?;
        strideweave_mpi::ClusterMemory::placement(&carrier).py()
    }

    fn __repr__(&self) -> String {
        format!(
            "Cluster(rank={}, client={}, owners={:?})",
            self.inner.rank(),
            self.inner.client(),
            self.inner.owners()
        )
    }
}

/// A ClusterLocal carrier: `values` (Float32), or `slots` zeroed slots when `values` is None.
#[pyfunction]
#[pyo3(signature = (values = None, slots = 0))]
fn mpi_cluster_local(
    py: Python<'_>,
    values: Option<Vec<f32>>,
    slots: usize,
) -> PyResult<Py<PyAny>> {
    let carrier: Carrier = match values {
        Some(values) => ClusterLocal::from_f32(&values),
        None => ClusterLocal::carrier(slots, DType::FLOAT32),
    }
    .py()?;
    wrap_carrier(py, &carrier)
}

/// A compact ClusterLocal copy of `tensor` (its values in its own order, its shape).
#[pyfunction]
fn mpi_cluster_local_upload(tensor: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
    let tensor = expect_tensor(tensor, "upload tensor")?;
    Ok(wrap_tensor(ClusterLocal::upload(&tensor).py()?))
}

/// Registers the MPI classes and functions on the extension module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyCommunicator>()?;
    m.add_class::<PyCluster>()?;
    m.add_function(wrap_pyfunction!(mpi_init, m)?)?;
    m.add_function(wrap_pyfunction!(mpi_finalize, m)?)?;
    m.add_function(wrap_pyfunction!(mpi_owns_mpi, m)?)?;
    m.add_function(wrap_pyfunction!(mpi_communicator_from_fortran, m)?)?;
    m.add_function(wrap_pyfunction!(mpi_all_reduce, m)?)?;
    m.add_function(wrap_pyfunction!(mpi_average_gradients, m)?)?;
    m.add_function(wrap_pyfunction!(mpi_cluster_local, m)?)?;
    m.add_function(wrap_pyfunction!(mpi_cluster_local_upload, m)?)?;
    Ok(())
}
