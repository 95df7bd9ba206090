//! `move_async` and [`MoveHandle`]: the move whose terminal outcome may arrive later.

use std::sync::Arc;
use std::thread;

use parking_lot::Mutex;

use crate::autograd::is_grad_enabled;
use crate::carrier::{Carrier, Claim};
use crate::error::{guard, Error, Result};
use crate::extension::{
    carrier_definition, transfer_provider_name, CompletionCell, PreparedTransfer,
    ProviderCompletion, Submitted, TransferPreparation, TransferRequest,
};
use crate::movement::unrouted::unrouted_move_operation;
use crate::movement::{
    check_route_back, registered_move_operation, ElementwiseMoveOperation, MoveOperation,
    MoveTarget, SlotJournal,
};
use crate::tensor::Tensor;

/// The handle of a move started by [`move_async`]: cheap to clone, every clone observes the
/// same terminal outcome.
///
/// docs/movement.md, Completion: `done` and a blocking `wait`, thread-safe and idempotent —
/// every wait returns the same tensor object ([`Tensor::same_as`]) or an equal error. There is
/// no cancellation and no coroutine protocol; dropping every handle neither cancels nor
/// blocks the move, which still reaches its terminal outcome and releases its claims.
#[derive(Clone, Debug)]
pub struct MoveHandle {
    outcome: CompletionCell<Tensor>,
}

impl MoveHandle {
    /// Whether the move is terminal (true exactly once the outcome is fixed).
    pub fn done(&self) -> bool {
        self.outcome.done()
    }

    /// Blocks until the move is terminal and returns the moved tensor (the same object on
    /// every call) or the move's error (equal on every call).
    pub fn wait(&self) -> Result<Tensor> {
        self.outcome.wait()
    }
}

/// The work that fills the claimed destination.
enum Route {
    /// A legacy move operation or the elementwise fallback: copied inline.
    Copy(Arc<dyn MoveOperation>),
    /// A definition's exact transfer route, already prepared.
    Transfer(TransferRequest, PreparedTransfer),
}

/// Starts moving `tensor` into `destination`: the result is the tensor at offset 0 of
/// `destination` with the same layout, and the source carrier is released at commit.
///
/// Every check runs before anything is claimed, in this order (docs/movement.md, Moves):
/// source released, owned or claimed (Runtime); destination is the source (Value);
/// destination released, claimed, immutable or owned (Runtime); dtypes differ (Type);
/// destination too small and unable to grow (Value). Then the route is chosen by the exact
/// class pair: a definition-backed source uses its definition's exact `TransferRoute` to the
/// destination class when it has one — `prepare` runs before anything is claimed or grown; an
/// `Unsupported` answer falls back to elementwise copying only when both exact storage
/// providers permit it, otherwise NotImplemented naming the pair and the reason; a
/// preparation error is terminal. Without such a route the legacy registry, then the
/// unrouted rule, applies. Every error up to here — and a failure to claim either carrier or
/// grow the destination — returns directly and changes nothing.
///
/// Then both carriers are claimed (mutating, releasing or moving either is a Runtime error
/// until the move is terminal), an empty growable destination is sized to exactly `cosize`
/// slots, and the work is submitted. A prepared transfer is submitted once, on this thread;
/// when it returns `Ready` — or the route is a copy operation — the move commits inline and
/// the returned handle is already done. When it returns `Pending`, one spawned thread waits
/// on that completion and commits, so this call does not block on the provider's work.
/// The commit re-checks the source version, publishes the destination (one version bump),
/// releases the source and records the move for autograd (with this thread's recording
/// mode). Errors from submission on — the submit call, the completion, the commit — are the
/// handle's outcome; the source is then live and unchanged, no version moves, and a grown
/// destination is shrunk back.
pub fn move_async(tensor: &Tensor, destination: &Carrier) -> Result<MoveHandle> {
    start(tensor, destination, Kind::Move)
}

/// What a started transfer does with its source at commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A move: the source carrier is released at commit.
    Move,
    /// A copy: the source carrier is only claimed while the transfer runs, and stays live.
    Copy,
}

impl Kind {
    fn verb(self) -> &'static str {
        match self {
            Kind::Move => "move",
            Kind::Copy => "copy",
        }
    }
}

/// Starts a move or a copy of `tensor` into `destination` (see [`move_async`] and
/// [`copy_async`](crate::movement::copy_async)).
pub(crate) fn start(tensor: &Tensor, destination: &Carrier, kind: Kind) -> Result<MoveHandle> {
    start_keeping(tensor, destination, kind, true)
}

/// [`start`], with `keep_previous` false for a scratch destination whose previous contents
/// nobody reads again (a staging buffer): a failed transfer then leaves whatever it wrote
/// there instead of paying to save the old contents first. Everything else — checks,
/// claims, versions, publication — is the same.
pub(crate) fn start_keeping(
    tensor: &Tensor,
    destination: &Carrier,
    kind: Kind,
    keep_previous: bool,
) -> Result<MoveHandle> {
    let grow = check_move(tensor, destination, kind)?;
    // A move recorded for gradients needs its way back before anything changes.
    let grad_enabled = is_grad_enabled();
    if grad_enabled && tensor.is_differentiable() && tensor.requires_grad() {
        check_route_back(tensor.carrier().class(), destination.class())?;
    }
    // A destination with slots of its own gets them back if the move fails after writing.
    let journal = Arc::new(SlotJournal::new(keep_previous && !grow));
    // Both carriers are claimed from before a route prepares until the terminal outcome, so
    // nothing can write, release or move either while the provider works on them; a refused
    // preparation drops the claims with nothing else changed.
    let source = tensor.carrier();
    let source_claim = Claim::new(source)?;
    let destination_claim = Claim::new(destination)?;
    let route = choose_route(tensor, destination, &journal)?;
    let cosize = tensor.layout().cosize();
    if grow {
        destination.set_extent(cosize)?;
    }
    let pending = PendingMove {
        tensor: tensor.clone(),
        destination: destination.clone(),
        source_claim,
        destination_claim,
        source_version: source.version(),
        grow,
        grad_enabled,
        kind,
        journal: Arc::clone(&journal),
    };
    let outcome = CompletionCell::new();
    match route {
        Route::Copy(operation) => {
            let copied = operation.copy(tensor, &MoveTarget::new(destination, &journal), cosize);
            outcome.complete(pending.finish(copied));
        }
        Route::Transfer(request, prepared) => {
            request.open();
            match prepared.submit_for(|| transfer_provider_name(&request)) {
                Ok(Submitted::Pending(completion)) => {
                    finish_later(pending, request, completion, outcome.clone());
                }
                submitted => {
                    request.close();
                    outcome.complete(pending.finish(submitted.map(|_| ())));
                }
            }
        }
    }
    Ok(MoveHandle { outcome })
}

type Later = (
    PendingMove,
    TransferRequest,
    Arc<dyn ProviderCompletion<()>>,
    CompletionCell<Tensor>,
);

/// Waits for `completion` on a spawned thread, then commits or rolls back. If no thread can
/// be spawned, waits here instead.
fn finish_later(
    pending: PendingMove,
    request: TransferRequest,
    completion: Arc<dyn ProviderCompletion<()>>,
    outcome: CompletionCell<Tensor>,
) {
    let job: Arc<Mutex<Option<Later>>> =
        Arc::new(Mutex::new(Some((pending, request, completion, outcome))));
    let worker_job = Arc::clone(&job);
    let spawned = thread::Builder::new()
        .name("strideweave-move".to_string())
        .spawn(move || run_later(&worker_job));
    if spawned.is_err() {
        run_later(&job);
    }
}

fn run_later(job: &Mutex<Option<Later>>) {
    let Some((pending, request, completion, outcome)) = job.lock().take() else {
        return;
    };
    let waited = guard(
        || transfer_provider_name(&request),
        "wait",
        || completion.wait(),
    );
    request.close();
    outcome.complete(pending.finish(waited));
}

/// The ordered pre-submission checks; whether the destination must grow.
fn check_move(tensor: &Tensor, destination: &Carrier, kind: Kind) -> Result<bool> {
    let source = tensor.carrier();
    let verb = kind.verb();
    source.check_live(&format!("{verb} a tensor"))?;
    // A copy only reads its source, which any alias of an owned carrier may do; a move
    // releases it, which only its owner may.
    if kind == Kind::Move && source.is_owned() && !source.lifecycle().owner_access_here() {
        return Err(Error::Runtime(format!(
            "cannot move a tensor whose {} carrier is owned by another carrier",
            source.class()
        )));
    }
    if source.lifecycle().is_claimed() {
        return Err(Error::Runtime(format!(
            "cannot {verb} a tensor whose {} carrier is claimed by a pending move and owned by it \
             until the move completes",
            source.class()
        )));
    }
    if destination.same_as(source) {
        return Err(Error::Value(format!(
            "cannot {verb} a tensor onto its own carrier (the {} carrier it lives on)",
            source.class()
        )));
    }
    destination.check_writable("move into the destination")?;
    if destination.dtype() != source.dtype() {
        return Err(Error::Type(format!(
            "cannot move a {} tensor into a {} destination: the dtype must match",
            source.dtype(),
            destination.dtype()
        )));
    }
    let cosize = tensor.layout().cosize();
    let available = destination.size();
    let grow = available < cosize;
    if grow && !(available == 0 && destination.grows_as_destination()) {
        return Err(Error::Value(format!(
            "the {} destination has {available} slots but the tensor needs {cosize}: it is too \
             small",
            destination.class()
        )));
    }
    Ok(grow)
}

/// The route of the exact class pair; a transfer route is prepared here, before anything is
/// claimed or grown.
fn choose_route(
    tensor: &Tensor,
    destination: &Carrier,
    journal: &Arc<SlotJournal>,
) -> Result<Route> {
    let source = tensor.carrier().class();
    let target = destination.class();
    let route = carrier_definition(source).and_then(|d| d.transfer_route(target).cloned());
    if let Some(route) = route {
        let request = TransferRequest::new(tensor, destination, Arc::clone(journal));
        return match route.provider().prepare(&request)? {
            TransferPreparation::Transfer(prepared) => Ok(Route::Transfer(request, prepared)),
            TransferPreparation::Unsupported(unsupported) => {
                let permits = |class| {
                    carrier_definition(class).is_some_and(|d| d.storage().elementwise_fallback())
                };
                if permits(source) && permits(target) {
                    Ok(Route::Copy(Arc::new(ElementwiseMoveOperation)))
                } else {
                    Err(Error::NotImplemented(format!(
                        "no move route from {source} to {target}: the transfer route {} refused \
                         the request ({}) and elementwise fallback needs both storage providers \
                         to permit it",
                        route.route_id(),
                        unsupported.reason()
                    )))
                }
            }
        };
    }
    Ok(Route::Copy(
        match registered_move_operation(source, target) {
            Some(operation) => operation,
            None => unrouted_move_operation(source, target)?,
        },
    ))
}

/// A submitted move holding its claims until the terminal outcome.
struct PendingMove {
    tensor: Tensor,
    destination: Carrier,
    source_claim: Claim,
    destination_claim: Claim,
    source_version: u64,
    grow: bool,
    grad_enabled: bool,
    kind: Kind,
    /// What the move's writes replaced in the destination.
    journal: Arc<SlotJournal>,
}

impl PendingMove {
    /// Commits after a successful fill, or rolls back; the claims end here either way.
    fn finish(self, filled: Result<()>) -> Result<Tensor> {
        let PendingMove {
            tensor,
            destination,
            source_claim,
            destination_claim,
            source_version,
            grow,
            grad_enabled,
            kind,
            journal,
        } = self;
        let committed = filled.and_then(|()| {
            let version = tensor.carrier().version();
            if version != source_version {
                return Err(Error::Runtime(format!(
                    "the {} source changed during the move (version {source_version} -> \
                     {version})",
                    tensor.carrier().class()
                )));
            }
            Tensor::new(destination.clone(), 0, tensor.layout().clone())
        });
        // A move releases its source before the destination is published: a source whose
        // release fails stays live, and the destination gets its slots back, so the failed
        // move publishes nothing.
        let committed = committed.and_then(|moved| match kind {
            Kind::Move => source_claim.release_carrier().map(|()| moved),
            Kind::Copy => {
                drop(source_claim);
                Ok(moved)
            }
        });
        let moved = match committed {
            Ok(moved) => moved,
            Err(error) => {
                journal.restore(&destination);
                if grow {
                    // Best effort: the move's error is the one to report.
                    let _ = destination.set_extent(0);
                }
                return Err(error);
            }
        };
        destination.bump_version();
        drop(destination_claim);
        crate::autograd::record_move(&tensor, &moved, grad_enabled);
        Ok(moved)
    }
}
