//! Transfer routes written in Python: `TransferRequest`, `TransferProvider`,
//! `PreparedTransfer` and `TransferRoute`, over the core's records of the same name.
//!
//! A route's `prepare(request)` runs with the GIL taken back; it returns a
//! `PreparedTransfer` whose `submit()` fills the destination through `request.write` and
//! returns `None` or a `ProviderCompletion` of `None`, or `Unsupported` to decline.

use std::sync::atomic::AtomicBool;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyType;
use strideweave::carriers::extension::{
    PreparedTransfer, TransferPreparation, TransferProvider, TransferRequest, TransferRoute,
};
use strideweave::{CarrierClass, Error};

use crate::callback_error::park;
use crate::carrier::wrap as wrap_carrier;
use crate::convert::{to_index, to_value, type_name};
use crate::dtype::PyDType;
use crate::errors::IntoPyResult;
use crate::kernels::take_submission;
use crate::layout::PyLayout;
use crate::prepared::{accept, expect_callable, non_empty_str, PyUnsupported};
use crate::tensor::{wrap as wrap_tensor, PyTensor};

/// The seed's `TransferRequest`: one transfer of a tensor to a destination carrier, made by
/// the framework for the route of the exact pair. Read-only; `write` fills the destination
/// while the prepared transfer is submitted (never during `prepare`).
#[pyclass(name = "TransferRequest", module = "strideweave", frozen)]
pub struct PyTransferRequest {
    inner: TransferRequest,
}

#[pymethods]
impl PyTransferRequest {
    /// Fields are immutable: assignment is a `dataclasses.FrozenInstanceError`.
    fn __setattr__(&self, py: Python<'_>, name: &str, _value: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    /// Fields cannot be deleted either: a `dataclasses.FrozenInstanceError`.
    fn __delattr__(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    /// The tensor being moved.
    #[getter]
    fn tensor(&self) -> PyTensor {
        wrap_tensor(self.inner.tensor().clone())
    }

    /// The destination carrier.
    #[getter]
    fn destination(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        wrap_carrier(py, self.inner.destination())
    }

    /// The exact class of the source carrier.
    #[getter]
    fn source_class(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let source = wrap_carrier(py, self.inner.tensor().carrier())?;
        Ok(source.bind(py).get_type().into_any().unbind())
    }

    /// The exact class of the destination carrier.
    #[getter]
    fn destination_class(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let destination = wrap_carrier(py, self.inner.destination())?;
        Ok(destination.bind(py).get_type().into_any().unbind())
    }

    /// The tensor's dtype.
    #[getter]
    fn dtype(&self, py: Python<'_>) -> PyResult<Py<PyDType>> {
        crate::dtype::wrap(py, self.inner.dtype())
    }

    /// The tensor's layout; the destination receives it at offset 0.
    #[getter]
    fn layout(&self) -> PyLayout {
        PyLayout::new_from(self.inner.layout().clone())
    }

    /// The slots to transfer: `layout.cosize`, from the tensor's offset in the source to
    /// slots `0 .. physical_span` of the destination.
    #[getter]
    fn physical_span(&self) -> usize {
        self.inner.physical_span()
    }

    /// Writes `value` at destination `slot` without publishing it (the framework moves the
    /// destination's version once, at commit). RuntimeError outside the submitted transfer.
    fn write(
        &self,
        py: Python<'_>,
        slot: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let slot = to_index(slot, "TransferRequest.write slot")?;
        let value = to_value(value, "TransferRequest.write value")?;
        let request = &self.inner;
        crate::finalization::detach(py, || request.write(slot, value)).py()
    }

    /// Writes `values` at destination slots `start, start + 1, ...` without publishing them:
    /// the bulk form of `write`. `values` is a numpy array of the destination's dtype or any
    /// iterable of `bool`, `int` and `float` (consumed once); every value is normalized to the
    /// destination dtype and the run checked against the destination's size before any slot
    /// is written, so a refused call writes nothing. RuntimeError outside the submitted
    /// transfer.
    fn write_slots(
        &self,
        py: Python<'_>,
        start: &Bound<'_, PyAny>,
        values: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let start = to_index(start, "TransferRequest.write_slots start")?;
        crate::bulk_write::write_slots(py, &self.inner, start, values)
    }

    fn __repr__(&self) -> String {
        format!(
            "TransferRequest({} -> {}, span {})",
            self.inner.source_class(),
            self.inner.destination_class(),
            self.inner.physical_span()
        )
    }
}

/// The seed's `PreparedTransfer(submit)`: transfer work prepared for one request, submitted
/// at most once; `submit()` returns `None` or a `ProviderCompletion` of `None`.
#[pyclass(name = "PreparedTransfer", module = "strideweave", frozen)]
pub struct PyPreparedTransfer {
    #[pyo3(get)]
    submit: Py<PyAny>,
    submitted: AtomicBool,
}

#[pymethods]
impl PyPreparedTransfer {
    /// Fields are immutable: assignment is a `dataclasses.FrozenInstanceError`.
    fn __setattr__(&self, py: Python<'_>, name: &str, _value: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    /// Fields cannot be deleted either: a `dataclasses.FrozenInstanceError`.
    fn __delattr__(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    #[new]
    fn py_new(submit: &Bound<'_, PyAny>) -> PyResult<Self> {
        Ok(PyPreparedTransfer {
            submit: expect_callable(submit, "PreparedTransfer submit")?,
            submitted: AtomicBool::new(false),
        })
    }
}

/// The seed's `TransferProvider(prepare)`: `prepare(request)` returns a `PreparedTransfer`
/// or `Unsupported`, without changing either carrier.
#[pyclass(name = "TransferProvider", module = "strideweave", frozen)]
pub struct PyTransferProvider {
    #[pyo3(get)]
    prepare: Py<PyAny>,
}

#[pymethods]
impl PyTransferProvider {
    /// Fields are immutable: assignment is a `dataclasses.FrozenInstanceError`.
    fn __setattr__(&self, py: Python<'_>, name: &str, _value: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    /// Fields cannot be deleted either: a `dataclasses.FrozenInstanceError`.
    fn __delattr__(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    #[new]
    fn py_new(prepare: &Bound<'_, PyAny>) -> PyResult<Self> {
        Ok(PyTransferProvider {
            prepare: expect_callable(prepare, "TransferProvider prepare")?,
        })
    }
}

impl PyTransferProvider {
    /// The core provider calling this `prepare` for the route `route_id`.
    fn to_core(&self, py: Python<'_>, route_id: &str) -> TransferProvider {
        let prepare = self.prepare.clone_ref(py);
        let route_id = route_id.to_owned();
        TransferProvider::new(move |request: &TransferRequest| {
            crate::finalization::attach(|py| {
                let label = format!("TransferProvider prepare of route '{route_id}'");
                let wrapped = Py::new(
                    py,
                    PyTransferRequest {
                        inner: request.clone(),
                    },
                )
                .map_err(|e| park(py, &label, e))?;
                let answer = prepare
                    .bind(py)
                    .call1((wrapped,))
                    .map_err(|e| park(py, &label, e))?;
                if let Ok(rejection) = answer.cast::<PyUnsupported>() {
                    return Ok(TransferPreparation::Unsupported(rejection.get().to_core()));
                }
                let Ok(record) = answer.cast::<PyPreparedTransfer>() else {
                    return Err(Error::Type(format!(
                        "{label} must return a PreparedTransfer or Unsupported, got {}",
                        type_name(&answer)
                    )));
                };
                let record = record.clone().unbind();
                let route_id = route_id.clone();
                Ok(TransferPreparation::Transfer(PreparedTransfer::new(
                    move || {
                        crate::finalization::attach(|py| {
                            let held = record.bind(py);
                            let record = held.get();
                            take_submission(&record.submitted, "PreparedTransfer")?;
                            let label = format!("PreparedTransfer submit of route '{route_id}'");
                            let returned = record
                                .submit
                                .bind(py)
                                .call0()
                                .map_err(|e| park(py, &label, e))?;
                            accept::<()>(
                                py,
                                returned,
                                &label,
                                Some(held.clone().into_any().unbind()),
                            )
                        })
                    },
                )))
            })
        })
    }
}

/// The seed's `TransferRoute(source_class, destination_class, route_id, provider)`: an
/// immutable directional route between two exact carrier classes. A definition's routes
/// must start at exactly the class it is registered for.
#[pyclass(name = "TransferRoute", module = "strideweave", frozen)]
pub struct PyTransferRoute {
    #[pyo3(get)]
    source_class: Py<PyType>,
    #[pyo3(get)]
    destination_class: Py<PyType>,
    #[pyo3(get)]
    route_id: String,
    #[pyo3(get)]
    provider: Py<PyTransferProvider>,
}

#[pymethods]
impl PyTransferRoute {
    /// Fields are immutable: assignment is a `dataclasses.FrozenInstanceError`.
    fn __setattr__(&self, py: Python<'_>, name: &str, _value: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    /// Fields cannot be deleted either: a `dataclasses.FrozenInstanceError`.
    fn __delattr__(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        Err(crate::errors::frozen_field(py, name))
    }

    #[new]
    fn py_new(
        source_class: &Bound<'_, PyAny>,
        destination_class: &Bound<'_, PyAny>,
        route_id: &Bound<'_, PyAny>,
        provider: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        let source = endpoint(source_class, "TransferRoute source_class")?;
        let destination = endpoint(destination_class, "TransferRoute destination_class")?;
        let provider = provider.cast::<PyTransferProvider>().map_err(|_| {
            PyTypeError::new_err(format!(
                "TransferRoute provider must be a TransferProvider, got {}",
                type_name(provider)
            ))
        })?;
        let route_id = route_id_of(route_id)?;
        Ok(PyTransferRoute {
            source_class: source,
            destination_class: destination,
            route_id,
            provider: provider.clone().unbind(),
        })
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "TransferRoute({} -> {}, {:?})",
            self.source_class.bind(py).name()?,
            self.destination_class.bind(py).name()?,
            self.route_id
        ))
    }
}

fn route_id_of(route_id: &Bound<'_, PyAny>) -> PyResult<String> {
    non_empty_str(route_id, "TransferRoute route_id")
}

/// A route endpoint: a concrete Carrier subclass (checked, so a wrong one fails here rather
/// than at registration).
fn endpoint(class: &Bound<'_, PyAny>, what: &str) -> PyResult<Py<PyType>> {
    crate::authoring::check_concrete(class, what)?;
    Ok(class.cast::<PyType>()?.clone().unbind())
}

impl PyTransferRoute {
    /// The source and destination classes.
    pub fn endpoints<'py>(&self, py: Python<'py>) -> (Bound<'py, PyType>, Bound<'py, PyType>) {
        (
            self.source_class.bind(py).clone(),
            self.destination_class.bind(py).clone(),
        )
    }

    /// The route's identifier.
    pub fn route_id(&self) -> &str {
        &self.route_id
    }

    /// The core route from `source` (the registered class) to the destination class.
    pub fn to_core(&self, py: Python<'_>, source: CarrierClass) -> PyResult<TransferRoute> {
        let destination = crate::authoring::core_class_of(
            self.destination_class.bind(py).as_any(),
            "TransferRoute destination_class",
        )?;
        let provider = self.provider.get().to_core(py, &self.route_id);
        TransferRoute::new(source, destination, &self.route_id, provider).py()
    }
}
