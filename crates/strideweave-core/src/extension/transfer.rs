//! Transfer routes of definition-backed carriers: [`TransferRequest`], [`TransferProvider`],
//! [`TransferPreparation`] and [`TransferRoute`].

use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use crate::carrier::{Carrier, CarrierClass};
use crate::dtype::{DType, Value};
use crate::error::{guard, Error, Result};
use crate::extension::{PreparedTransfer, Unsupported};
use crate::movement::{MoveTarget, SlotJournal};
use crate::tensor::Tensor;
use strideweave_layout::Layout;

/// The request is being prepared: destination writes are refused.
const PREPARING: u8 = 0;
/// The prepared transfer was submitted and is not terminal: destination writes are allowed.
const SUBMITTED: u8 = 1;
/// The move reached its terminal outcome: destination writes are refused.
const CLOSED: u8 = 2;

/// One transfer of a tensor to a destination carrier, created by the framework for the exact
/// route of the pair.
///
/// Seed rule: "TransferRequest SHALL be a framework-created immutable record exposing the
/// fields tensor, destination, source_class, destination_class, dtype, layout, and
/// physical_span"; the class fields are the exact runtime classes and `physical_span` is
/// `layout.cosize()`. Fields are private with getters only; cloning shares the record.
///
/// The provider fills the destination through [`TransferRequest::write`], which the framework
/// opens only between submission and the terminal outcome: preparation "SHALL validate ...
/// without changing either Carrier", so a write during `prepare` (or after the move finished)
/// is a Runtime error.
#[derive(Clone)]
pub struct TransferRequest {
    inner: Arc<RequestInner>,
}

struct RequestInner {
    tensor: Tensor,
    destination: Carrier,
    source_class: CarrierClass,
    destination_class: CarrierClass,
    dtype: DType,
    layout: Layout,
    physical_span: usize,
    phase: AtomicU8,
    /// What the transfer's writes replaced in the destination, for a failed transfer.
    journal: Arc<SlotJournal>,
}

impl TransferRequest {
    pub(crate) fn new(
        tensor: &Tensor,
        destination: &Carrier,
        journal: Arc<SlotJournal>,
    ) -> TransferRequest {
        let layout = tensor.layout().clone();
        TransferRequest {
            inner: Arc::new(RequestInner {
                tensor: tensor.clone(),
                destination: destination.clone(),
                journal,
                source_class: tensor.carrier().class(),
                destination_class: destination.class(),
                dtype: tensor.dtype(),
                physical_span: layout.cosize(),
                layout,
                phase: AtomicU8::new(PREPARING),
            }),
        }
    }

    /// Opens destination writes (the transfer was submitted).
    pub(crate) fn open(&self) {
        self.inner.phase.store(SUBMITTED, Ordering::Release);
    }

    /// Closes destination writes (the move is terminal).
    pub(crate) fn close(&self) {
        self.inner.phase.store(CLOSED, Ordering::Release);
    }

    /// The tensor being moved (its carrier may be read; it is claimed by the move).
    pub fn tensor(&self) -> &Tensor {
        &self.inner.tensor
    }

    /// The destination carrier.
    pub fn destination(&self) -> &Carrier {
        &self.inner.destination
    }

    /// The exact class of the source carrier.
    pub fn source_class(&self) -> CarrierClass {
        self.inner.source_class
    }

    /// The exact class of the destination carrier.
    pub fn destination_class(&self) -> CarrierClass {
        self.inner.destination_class
    }

    /// The dtype of the tensor (and of the destination).
    pub fn dtype(&self) -> DType {
        self.inner.dtype
    }

    /// The layout of the tensor; the destination receives it at offset 0.
    pub fn layout(&self) -> &Layout {
        &self.inner.layout
    }

    /// The slots to transfer: `layout().cosize()`, from the tensor's offset in the source to
    /// slots `0..physical_span` of the destination.
    pub fn physical_span(&self) -> usize {
        self.inner.physical_span
    }

    /// Writes `value` (normalized to the destination dtype) at destination `slot` without
    /// publishing it: the framework bumps the destination version once, at commit.
    ///
    /// # Errors
    /// Runtime outside the submitted transfer (during preparation or after the terminal
    /// outcome); Index out of the destination's range; Type or Overflow from normalization.
    pub fn write(&self, slot: usize, value: Value) -> Result<()> {
        self.target()?.write(slot, value)
    }

    /// Writes `values` at destination slots `start..start + values.len()` without
    /// publishing them, in one bulk copy when the destination is a CPU carrier: how a route
    /// downloads a device buffer without a [`Value`] per slot.
    ///
    /// # Errors
    /// As [`write`](TransferRequest::write); Index when a slot is out of the destination's
    /// range; Type when the destination does not hold Float32.
    pub fn write_f32s(&self, start: usize, values: &[f32]) -> Result<()> {
        self.target()?.write_f32s(start, values)
    }

    /// [`write_f32s`](TransferRequest::write_f32s) for an Int32 destination.
    ///
    /// # Errors
    /// As [`write_f32s`](TransferRequest::write_f32s), with Int32 for Float32.
    pub fn write_i32s(&self, start: usize, values: &[i32]) -> Result<()> {
        self.target()?.write_i32s(start, values)
    }

    /// The destination as a move target while the transfer is submitted; a Runtime error
    /// during preparation or after the terminal outcome.
    fn target(&self) -> Result<MoveTarget<'_>> {
        match self.inner.phase.load(Ordering::Acquire) {
            SUBMITTED => Ok(MoveTarget::new(
                &self.inner.destination,
                &self.inner.journal,
            )),
            PREPARING => Err(Error::Runtime(format!(
                "a transfer from {} to {} cannot write the destination during preparation",
                self.inner.source_class, self.inner.destination_class
            ))),
            _ => Err(Error::Runtime(format!(
                "the transfer from {} to {} is terminal; its destination is no longer writable",
                self.inner.source_class, self.inner.destination_class
            ))),
        }
    }
}

impl fmt::Debug for TransferRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TransferRequest")
            .field("source_class", &self.inner.source_class)
            .field("destination_class", &self.inner.destination_class)
            .field("dtype", &self.inner.dtype)
            .field("layout", &self.inner.layout)
            .field("physical_span", &self.inner.physical_span)
            .finish_non_exhaustive()
    }
}

/// What a transfer preparation returns: prepared work, or a rejection of this request.
///
/// Seed rule: `prepare(request) -> PreparedTransfer | Unsupported`; "another return type
/// SHALL fail with TypeError" is enforced by the type system.
#[derive(Debug)]
pub enum TransferPreparation {
    /// The prepared transfer, submitted once by the framework.
    Transfer(PreparedTransfer),
    /// The route cannot transfer this request: elementwise fallback when both exact storage
    /// providers permit it, otherwise NotImplemented naming the pair and the reason.
    Unsupported(Unsupported),
}

type TransferPrepareFn = dyn Fn(&TransferRequest) -> Result<TransferPreparation> + Send + Sync;

/// The preparation of a transfer route.
///
/// Seed rule: "TransferProvider(prepare) SHALL require one callable immutable field";
/// `prepare` validates request-specific constraints "without changing either Carrier,
/// submitting transfer work, or publishing state". An error it returns is the terminal
/// preparation failure (no other route is tried); a panic becomes [`Error::ProviderPanicked`](crate::Error::ProviderPanicked).
#[derive(Clone)]
pub struct TransferProvider {
    prepare: Arc<TransferPrepareFn>,
}

impl TransferProvider {
    /// The provider with `prepare`.
    pub fn new(
        prepare: impl Fn(&TransferRequest) -> Result<TransferPreparation> + Send + Sync + 'static,
    ) -> TransferProvider {
        TransferProvider {
            prepare: Arc::new(prepare),
        }
    }

    /// Prepares `request` under the provider guard.
    pub(crate) fn prepare(&self, request: &TransferRequest) -> Result<TransferPreparation> {
        guard(
            || provider_name(request),
            "prepare",
            || (self.prepare)(request),
        )
    }
}

impl fmt::Debug for TransferProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TransferProvider").finish_non_exhaustive()
    }
}

/// An immutable directional route between two exact carrier classes.
///
/// Seed rule: "TransferRoute(source_class, destination_class, route_id, provider) SHALL be an
/// immutable directional route ... route_id SHALL be a non-empty string" (empty → Value; the
/// field types are enforced by the type system). Matching uses both exact class identities.
/// A definition's routes must all start at the class it is registered for (a Type error at
/// registration otherwise).
#[derive(Clone)]
pub struct TransferRoute {
    source_class: CarrierClass,
    destination_class: CarrierClass,
    route_id: Arc<str>,
    provider: TransferProvider,
}

impl TransferRoute {
    /// The route from `source_class` to `destination_class` named `route_id`.
    ///
    /// # Errors
    /// A Value error for an empty `route_id`.
    pub fn new(
        source_class: CarrierClass,
        destination_class: CarrierClass,
        route_id: &str,
        provider: TransferProvider,
    ) -> Result<TransferRoute> {
        if route_id.is_empty() {
            return Err(Error::Value(
                "TransferRoute route_id must not be empty (a non-empty string)".to_string(),
            ));
        }
        Ok(TransferRoute {
            source_class,
            destination_class,
            route_id: Arc::from(route_id),
            provider,
        })
    }

    /// The exact source class.
    pub fn source_class(&self) -> CarrierClass {
        self.source_class
    }

    /// The exact destination class.
    pub fn destination_class(&self) -> CarrierClass {
        self.destination_class
    }

    /// The route's identifier.
    pub fn route_id(&self) -> &str {
        &self.route_id
    }

    /// The route's provider.
    pub fn provider(&self) -> &TransferProvider {
        &self.provider
    }
}

impl fmt::Debug for TransferRoute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TransferRoute")
            .field("source_class", &self.source_class)
            .field("destination_class", &self.destination_class)
            .field("route_id", &self.route_id)
            .finish_non_exhaustive()
    }
}

/// The provider name a panic in the transfer callbacks of `request`'s route is reported
/// under.
pub(crate) fn provider_name(request: &TransferRequest) -> String {
    format!(
        "the transfer provider from {} to {}",
        request.source_class(),
        request.destination_class()
    )
}
