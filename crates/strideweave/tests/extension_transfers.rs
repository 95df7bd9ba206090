//! Transfer routes of definition-backed carriers (carrier-extension spec, "Transfer routes
//! expose exact preparation and submission") and `move_async` (docs/movement.md,
//! Completion; docs/operations.md, Worked examples item 17).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use strideweave::carrier::{Carrier, CarrierClass, ClassKind};
use strideweave::carriers::extension::{
    self, CompletionCell, PreparedTransfer, Submitted, TransferPreparation, TransferProvider,
    TransferRequest,
};
use strideweave::carriers::Cpu;
use strideweave::movement::{self, move_async, move_to, MoveHandle};
use strideweave::{
    register_carrier_definition, CarrierDefinition, DType, Error, ErrorKind, Layout, Result,
    StorageProvider, Tensor, TransferRoute, Unsupported, Value,
};

/// The provider-owned state of the test carriers.
#[derive(Clone, Default)]
struct Slots {
    values: Vec<Value>,
}

fn storage(fallback: bool) -> StorageProvider {
    StorageProvider::new(
        |_: &Slots, dtype| dtype == DType::FLOAT32,
        |state: &Slots| state.values.len() as i64,
        |state: &mut Slots, slots, _dtype| {
            state.values = vec![Value::Float(0.0); slots];
            Ok(())
        },
        |state: &mut Slots| {
            state.values.clear();
            Ok(())
        },
        |state: &Slots, index| Ok(state.values[index]),
        |state: &mut Slots, index, value| {
            state.values[index] = value;
            Ok(())
        },
    )
    .with_elementwise_fallback(fallback)
}

fn mint(name: &str) -> CarrierClass {
    CarrierClass::mint(name, ClassKind::Independent)
}

/// Registers `class` with the given fallback permission and routes.
fn define(class: CarrierClass, fallback: bool, routes: Vec<TransferRoute>) -> Result<()> {
    register_carrier_definition(
        class,
        CarrierDefinition::new(storage(fallback)).with_transfers(routes)?,
    )
}

fn layout(text: &str) -> Layout {
    text.parse().expect("test layout")
}

fn floats(xs: &[f64]) -> Vec<Value> {
    xs.iter().copied().map(Value::Float).collect()
}

fn filled(class: CarrierClass, xs: &[f64]) -> Result<Carrier> {
    let carrier = Carrier::create(class, Slots::default(), xs.len(), DType::FLOAT32, true)?;
    for (i, x) in xs.iter().enumerate() {
        carrier.set(i, Value::Float(*x))?;
    }
    Ok(carrier)
}

fn values(carrier: &Carrier) -> Result<Vec<Value>> {
    (0..carrier.size()).map(|i| carrier.get(i)).collect()
}

/// Copies the request's `physical_span` source slots through the request's writer.
fn copy_request(request: &TransferRequest) -> Result<()> {
    let source = request.tensor();
    for slot in 0..request.physical_span() {
        request.write(slot, source.carrier().get(source.offset() + slot)?)?;
    }
    Ok(())
}

/// A route whose submission copies inline and returns `Ready`.
fn ready_route(source: CarrierClass, destination: CarrierClass, id: &str) -> TransferRoute {
    let provider = TransferProvider::new(|request| {
        let request = request.clone();
        Ok(TransferPreparation::Transfer(PreparedTransfer::new(
            move || {
                copy_request(&request)?;
                Ok(Submitted::Ready(()))
            },
        )))
    });
    TransferRoute::new(source, destination, id, provider).expect("route")
}

#[test]
fn the_transfer_types_are_exported_where_documented() {
    fn same<T>(_: Option<T>, _: Option<T>) {}
    same::<TransferRoute>(None, None::<extension::TransferRoute>);
    same::<MoveHandle>(None, None::<movement::MoveHandle>);
    let _: fn(&Tensor, &Carrier) -> Result<MoveHandle> = movement::move_async;
}

#[test]
fn reject_an_invocation_specific_transfer_condition() -> Result<()> {
    let prepared = Arc::new(AtomicUsize::new(0));
    // Contiguous layouts copy in bulk; a strided one is refused before submission, and
    // preparation cannot write the destination.
    let refusing = |source, destination, id| {
        let prepared = Arc::clone(&prepared);
        let provider = TransferProvider::new(move |request| {
            prepared.fetch_add(1, Ordering::SeqCst);
            let write = request.write(0, Value::Float(99.0)).unwrap_err();
            assert_eq!(write.kind(), ErrorKind::Runtime, "{write}");
            if request.layout().size() != request.physical_span() {
                return Ok(TransferPreparation::Unsupported(Unsupported::new(
                    "strided layouts need a gather",
                )?));
            }
            let request = request.clone();
            Ok(TransferPreparation::Transfer(PreparedTransfer::new(
                move || {
                    copy_request(&request)?;
                    Ok(Submitted::Ready(()))
                },
            )))
        });
        TransferRoute::new(source, destination, id, provider).expect("route")
    };

    // Both storage providers opted in: elementwise fallback.
    let (source, destination) = (mint("OptedSource"), mint("OptedDestination"));
    define(
        source,
        true,
        vec![refusing(source, destination, "opted-dma")],
    )?;
    define(destination, true, vec![])?;
    let carrier = filled(source, &[1.0, 2.0, 3.0, 4.0])?;
    let target = filled(destination, &[0.0, 0.0, 0.0])?;
    let tensor = Tensor::new(carrier.clone(), 0, layout("2:2"))?;
    let moved = move_to(&tensor, &target)?;
    assert_eq!(prepared.load(Ordering::SeqCst), 1);
    assert!(moved.carrier().same_as(&target));
    assert_eq!(moved.to_values()?, floats(&[1.0, 3.0]));
    assert!(carrier.is_released());
    assert_eq!(target.version(), 4);

    // The contiguous layout of the same pair takes the route itself.
    let carrier = filled(source, &[5.0, 6.0])?;
    let target = filled(destination, &[0.0, 0.0])?;
    let moved = move_to(&Tensor::new(carrier.clone(), 0, layout("2:1"))?, &target)?;
    assert_eq!(prepared.load(Ordering::SeqCst), 2);
    assert_eq!(moved.to_values()?, floats(&[5.0, 6.0]));
    assert_eq!(target.version(), 3);

    // One provider did not opt in: NotImplemented naming the pair and the reason, with
    // neither carrier changed by preparation.
    let (source, destination) = (mint("StrictSource"), mint("StrictDestination"));
    define(
        source,
        true,
        vec![refusing(source, destination, "strict-dma")],
    )?;
    define(destination, false, vec![])?;
    let carrier = filled(source, &[1.0, 2.0, 3.0, 4.0])?;
    let target = filled(destination, &[7.0, 8.0, 9.0])?;
    let before = (carrier.version(), target.version());
    let tensor = Tensor::new(carrier.clone(), 0, layout("2:2"))?;
    let error = move_async(&tensor, &target).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotImplemented, "{error}");
    let message = error.to_string();
    assert!(
        message.contains("from StrictSource to StrictDestination"),
        "{message}"
    );
    assert!(
        message.contains("strided layouts need a gather"),
        "{message}"
    );
    assert_eq!(prepared.load(Ordering::SeqCst), 3);
    assert_eq!((carrier.version(), target.version()), before);
    assert!(!carrier.is_released());
    assert_eq!(values(&carrier)?, floats(&[1.0, 2.0, 3.0, 4.0]));
    assert_eq!(values(&target)?, floats(&[7.0, 8.0, 9.0]));
    // Nothing stayed claimed.
    carrier.set(0, Value::Float(1.5))?;
    target.set(0, Value::Float(7.5))?;
    Ok(())
}

#[test]
fn a_pending_transfer_completes_on_another_thread() -> Result<()> {
    let (source, destination) = (mint("PendingSource"), mint("PendingDestination"));
    let provider = TransferProvider::new(|request| {
        let request = request.clone();
        Ok(TransferPreparation::Transfer(PreparedTransfer::new(
            move || {
                let completion = CompletionCell::new();
                let worker = completion.clone();
                thread::spawn(move || {
                    thread::sleep(Duration::from_millis(20));
                    worker.complete(copy_request(&request));
                });
                Ok(Submitted::pending(completion))
            },
        )))
    });
    define(
        source,
        false,
        vec![TransferRoute::new(
            source,
            destination,
            "jit-copy",
            provider,
        )?],
    )?;
    define(destination, false, vec![])?;
    let carrier = filled(source, &[1.0, 2.0, 3.0])?;
    let target = filled(destination, &[0.0, 0.0, 0.0])?;
    let tensor = Tensor::new(carrier.clone(), 0, layout("3:1"))?;
    let before = target.version();
    let moved = move_to(&tensor, &target)?;
    assert_eq!(moved.to_values()?, floats(&[1.0, 2.0, 3.0]));
    assert_eq!(moved.offset(), 0);
    assert_eq!(moved.layout(), tensor.layout());
    assert_eq!(target.version(), before + 1, "one publication at commit");
    assert!(carrier.is_released());
    Ok(())
}

#[test]
fn a_failing_transfer_leaves_the_source_live_and_the_destination_unchanged() -> Result<()> {
    let (source, destination) = (mint("FailingSource"), mint("FailingDestination"));
    let (pending_source, pending_destination) = (
        mint("FailingPendingSource"),
        mint("FailingPendingDestination"),
    );
    let failing = TransferProvider::new(|_| {
        Ok(TransferPreparation::Transfer(PreparedTransfer::new(|| {
            Err(Error::Memory("DMA engine fault".into()))
        })))
    });
    let failing_later = TransferProvider::new(|_| {
        Ok(TransferPreparation::Transfer(PreparedTransfer::new(|| {
            let completion = CompletionCell::new();
            let worker = completion.clone();
            thread::spawn(move || worker.complete(Err(Error::Memory("DMA timeout".into()))));
            Ok(Submitted::pending(completion))
        })))
    });
    let preparation_error =
        TransferProvider::new(|_| Err(Error::Value("no channel for this device".into())));
    define(
        source,
        true,
        vec![TransferRoute::new(source, destination, "failing", failing)?],
    )?;
    define(destination, true, vec![])?;
    define(
        pending_source,
        true,
        vec![
            TransferRoute::new(pending_source, pending_destination, "late", failing_later)?,
            TransferRoute::new(pending_source, destination, "unprepared", preparation_error)?,
        ],
    )?;
    define(pending_destination, true, vec![])?;

    let cases = [
        (source, destination, ErrorKind::Memory, "DMA engine fault"),
        (
            pending_source,
            pending_destination,
            ErrorKind::Memory,
            "DMA timeout",
        ),
        // A preparation error is terminal: no elementwise fallback although both opted in.
        (pending_source, destination, ErrorKind::Value, "no channel"),
    ];
    for (from, to, kind, text) in cases {
        let carrier = filled(from, &[1.0, 2.0])?;
        let target = filled(to, &[7.0, 8.0])?;
        let before = (carrier.version(), target.version());
        let tensor = Tensor::new(carrier.clone(), 0, layout("2:1"))?;
        let outcome: Result<()> = move_async(&tensor, &target).and_then(|handle| {
            let first = handle.wait().unwrap_err();
            let second = handle.wait().unwrap_err();
            assert_eq!(first.to_string(), second.to_string());
            assert!(handle.done());
            Err(first)
        });
        let error = outcome.unwrap_err();
        assert_eq!(error.kind(), kind, "{error}");
        assert!(error.to_string().contains(text), "{error}");
        assert!(!carrier.is_released());
        assert_eq!((carrier.version(), target.version()), before);
        assert_eq!(values(&carrier)?, floats(&[1.0, 2.0]));
        assert_eq!(values(&target)?, floats(&[7.0, 8.0]));
        // The claims ended with the failure.
        carrier.set(0, Value::Float(3.0))?;
        target.set(0, Value::Float(9.0))?;
    }
    Ok(())
}

#[test]
fn registration_checks_route_sources_and_pairs() -> Result<()> {
    let (registered, other, destination) = (
        mint("RouteOwner"),
        mint("RouteStranger"),
        mint("RouteTarget"),
    );
    // A route starting at another class: Type, and nothing is published.
    let error = define(
        registered,
        false,
        vec![ready_route(other, destination, "foreign")],
    )
    .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Type, "{error}");
    assert!(error.to_string().contains("foreign"), "{error}");
    assert!(!registered.is_definition_backed());
    assert!(extension::carrier_definition(registered).is_none());

    // Two routes for the same exact pair: Value, added together or one after another.
    let error = CarrierDefinition::new(storage(false))
        .with_transfers([
            ready_route(registered, destination, "first"),
            ready_route(registered, destination, "second"),
        ])
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value, "{error}");
    assert!(
        error.to_string().contains("from RouteOwner to RouteTarget"),
        "{error}"
    );
    let error = CarrierDefinition::new(storage(false))
        .with_transfers([ready_route(registered, destination, "first")])?
        .with_transfers([ready_route(registered, destination, "again")])
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value, "{error}");

    // An empty route id: Value.
    let provider = TransferProvider::new(|_| Err(Error::Runtime("unused".into())));
    let error = TransferRoute::new(registered, destination, "", provider).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value, "{error}");

    // The same class registers once its routes all start there.
    define(
        registered,
        false,
        vec![
            ready_route(registered, destination, "to-target"),
            ready_route(registered, other, "to-stranger"),
        ],
    )?;
    let definition = extension::carrier_definition(registered).expect("registered");
    let ids: Vec<&str> = definition
        .transfers()
        .iter()
        .map(TransferRoute::route_id)
        .collect();
    assert_eq!(ids, ["to-target", "to-stranger"]);
    let route = definition.transfer_route(other).expect("exact route");
    assert_eq!(
        (route.source_class(), route.destination_class()),
        (registered, other)
    );
    assert!(definition.transfer_route(registered).is_none());
    Ok(())
}

#[test]
fn the_transfer_request_describes_the_exact_transfer() -> Result<()> {
    let (source, destination) = (mint("RequestSource"), mint("RequestDestination"));
    let seen: Arc<Mutex<Option<TransferRequest>>> = Arc::default();
    let record = Arc::clone(&seen);
    let provider = TransferProvider::new(move |request| {
        *record.lock().unwrap() = Some(request.clone());
        let request = request.clone();
        Ok(TransferPreparation::Transfer(PreparedTransfer::new(
            move || {
                copy_request(&request)?;
                Ok(Submitted::Ready(()))
            },
        )))
    });
    define(
        source,
        false,
        vec![TransferRoute::new(
            source,
            destination,
            "describe",
            provider,
        )?],
    )?;
    define(destination, false, vec![])?;
    let carrier = filled(source, &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0])?;
    let target = filled(destination, &[0.0; 6])?;
    let tensor = Tensor::new(carrier.clone(), 1, layout("(2,2):(1,4)"))?;
    let moved = move_to(&tensor, &target)?;
    let request = seen.lock().unwrap().take().expect("prepared once");
    assert!(request.tensor().same_as(&tensor));
    assert!(request.destination().same_as(&target));
    assert_eq!(request.source_class(), source);
    assert_eq!(request.destination_class(), destination);
    assert_eq!(request.dtype(), DType::FLOAT32);
    assert_eq!(request.layout(), &layout("(2,2):(1,4)"));
    assert_eq!(request.physical_span(), 6);
    assert_eq!(request.physical_span(), request.layout().cosize());
    assert_eq!(moved.to_values()?, floats(&[1.0, 2.0, 5.0, 6.0]));
    // The request's writer closed with the move.
    let error = request.write(0, Value::Float(1.0)).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime, "{error}");
    Ok(())
}

/// A route whose completion the test finishes: it records the request and the cell.
type Controlled = Arc<Mutex<Vec<(TransferRequest, CompletionCell<()>)>>>;

fn controlled_route(
    source: CarrierClass,
    destination: CarrierClass,
) -> (TransferRoute, Controlled) {
    let submitted: Controlled = Arc::default();
    let record = Arc::clone(&submitted);
    let provider = TransferProvider::new(move |request| {
        let request = request.clone();
        let record = Arc::clone(&record);
        Ok(TransferPreparation::Transfer(PreparedTransfer::new(
            move || {
                let completion = CompletionCell::new();
                record.lock().unwrap().push((request, completion.clone()));
                Ok(Submitted::pending(completion))
            },
        )))
    });
    let route = TransferRoute::new(source, destination, "controlled", provider).expect("route");
    (route, submitted)
}

#[test]
fn a_pending_move_claims_both_carriers_until_it_is_terminal() -> Result<()> {
    let (source, destination) = (mint("ClaimedSource"), mint("ClaimedDestination"));
    let (route, submitted) = controlled_route(source, destination);
    define(source, false, vec![route])?;
    define(destination, false, vec![])?;
    let carrier = filled(source, &[1.0, 2.0])?;
    let target = filled(destination, &[0.0, 0.0])?;
    let tensor = Tensor::new(carrier.clone(), 0, layout("2:1"))?;

    // Pre-submission errors return directly from move_async.
    let error = move_async(&tensor, &carrier).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value, "{error}");

    let before = target.version();
    let handle = move_async(&tensor, &target)?;
    let other = handle.clone();
    assert!(!handle.done());
    let (request, completion) = submitted.lock().unwrap().pop().expect("submitted once");

    // Mutating, releasing or moving either carrier: Runtime while the move is pending.
    let runtime = |result: Result<()>| {
        let error = result.unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Runtime, "{error}");
    };
    runtime(tensor.set(&0.into(), Value::Float(5.0)));
    runtime(carrier.set(1, Value::Float(5.0)));
    runtime(carrier.release());
    runtime(target.set(0, Value::Float(5.0)));
    runtime(target.release());
    runtime(move_async(&tensor, &filled(destination, &[0.0, 0.0])?).map(|_| ()));
    let elsewhere = filled(destination, &[0.0, 0.0])?;
    runtime(move_to(&Tensor::new(elsewhere, 0, layout("2:1"))?, &target).map(|_| ()));
    assert!(!handle.done());

    // The provider fills the destination, then completes.
    copy_request(&request)?;
    assert_eq!(
        target.version(),
        before,
        "nothing is published before the commit"
    );
    assert!(completion.complete(Ok(())));
    let first = handle.wait()?;
    let second = handle.wait()?;
    let third = other.wait()?;
    assert!(first.same_as(&second) && first.same_as(&third));
    assert!(handle.done() && other.done());
    assert_eq!(first.to_values()?, floats(&[1.0, 2.0]));
    assert!(carrier.is_released());
    assert_eq!(target.version(), before + 1);
    target.set(0, Value::Float(3.0))?;
    Ok(())
}

#[test]
fn dropping_the_handle_neither_cancels_nor_blocks() -> Result<()> {
    let (source, destination) = (mint("DroppedSource"), mint("DroppedDestination"));
    let (route, submitted) = controlled_route(source, destination);
    define(source, false, vec![route])?;
    define(destination, false, vec![])?;
    let carrier = filled(source, &[4.0, 5.0])?;
    let target = filled(destination, &[0.0, 0.0])?;
    let tensor = Tensor::new(carrier.clone(), 0, layout("2:1"))?;
    let before = target.version();
    drop(move_async(&tensor, &target)?);
    let (request, completion) = submitted.lock().unwrap().pop().expect("submitted once");
    assert!(!carrier.is_released());
    copy_request(&request)?;
    completion.complete(Ok(()));
    // The move still commits on its own thread.
    let deadline = Instant::now() + Duration::from_secs(10);
    while target.version() == before || !carrier.is_released() {
        assert!(
            Instant::now() < deadline,
            "the dropped move never committed"
        );
        thread::sleep(Duration::from_millis(1));
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while target.set(0, Value::Float(6.0)).is_err() {
        assert!(Instant::now() < deadline, "the destination stayed claimed");
        thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(values(&target)?, floats(&[6.0, 5.0]));
    Ok(())
}

/// docs/extension-design.md, "CPU -> custom moves": a definition routes only from its own
/// class and the definition-free CPU can neither take a definition nor register a move into a
/// definition-backed class, so CPU -> D has no route even when D routes D -> CPU and permits
/// elementwise fallback (fallback needs both exact classes definition-backed and opted in).
#[test]
fn a_move_from_the_cpu_into_a_definition_backed_class_has_no_route() -> Result<()> {
    let (device, registered) = (mint("UploadTarget"), mint("UploadOwner"));
    let cpu = CarrierClass::of::<Cpu>();
    define(
        device,
        true,
        vec![ready_route(device, cpu, "device-to-cpu")],
    )?;

    // The refused move changes neither carrier.
    let values_on_cpu = [0.5f32, -1.5];
    let source = Cpu::from_f32(&values_on_cpu, true)?;
    let tensor = Tensor::new(source.clone(), 0, layout("2:1"))?;
    let target = Carrier::create(device, Slots::default(), 2, DType::FLOAT32, true)?;
    let error = move_to(&tensor, &target).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotImplemented, "{error}");
    let message = error.to_string();
    assert!(
        message.contains("no move route from CPU to UploadTarget"),
        "{message}"
    );
    assert!(
        message.contains("CPU is definition-free, UploadTarget permits elementwise fallback"),
        "{message}"
    );
    assert!(!source.is_released());
    assert_eq!((source.version(), target.version()), (0, 0));
    assert_eq!(values(&target)?, floats(&[0.0, 0.0]));

    // Neither side can declare the missing route: a definition's routes start at its own
    // class, and the CPU cannot register a move operation into a definition-backed class.
    let error = define(
        registered,
        false,
        vec![ready_route(cpu, registered, "cpu-to-owner")],
    )
    .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Type, "{error}");
    assert!(!registered.is_definition_backed());
    let error = movement::register_move_operation(
        cpu,
        device,
        Arc::new(movement::ElementwiseMoveOperation),
    )
    .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime, "{error}");
    assert!(error.to_string().contains("TransferRoute"), "{error}");
    assert!(movement::registered_move_operation(cpu, device).is_none());
    assert!(move_to(&tensor, &target).is_err());

    // Writing the slots through the destination's storage is the upload path, and the
    // route takes the values back.
    for (i, x) in values_on_cpu.iter().enumerate() {
        target.set(i, Value::Float(f64::from(*x)))?;
    }
    let uploaded = Tensor::new(target.clone(), 0, layout("2:1"))?;
    let back = move_to(&uploaded, &Cpu::carrier(2, DType::FLOAT32, true, false)?)?;
    assert_eq!(back.to_values()?, floats(&[0.5, -1.5]));
    assert!(target.is_released());
    Ok(())
}

#[test]
fn a_transfer_that_fails_after_writing_part_of_the_destination_restores_it() -> Result<()> {
    // Each route writes the first destination slot (twice) and then fails: in `submit`, in
    // a pending completion finished on another thread, and by panicking in `submit`.
    fn partial(request: &TransferRequest) -> Result<()> {
        request.write(0, Value::Float(-1.0))?;
        request.write(0, request.tensor().carrier().get(0)?)?;
        request.write_f32s(1, &[-2.0])
    }
    let in_submit = TransferProvider::new(|request| {
        let request = request.clone();
        Ok(TransferPreparation::Transfer(PreparedTransfer::new(
            move || {
                partial(&request)?;
                Err(Error::Memory("DMA engine fault after two slots".into()))
            },
        )))
    });
    let in_completion =
        TransferProvider::new(|request| {
            let request = request.clone();
            Ok(TransferPreparation::Transfer(PreparedTransfer::new(
                move || {
                    let completion = CompletionCell::new();
                    let worker = completion.clone();
                    let request = request.clone();
                    thread::spawn(move || {
                        worker.complete(partial(&request).and_then(|()| {
                            Err(Error::Memory("DMA timeout after two slots".into()))
                        }))
                    });
                    Ok(Submitted::pending(completion))
                },
            )))
        });
    let panicking = TransferProvider::new(|request| {
        let request = request.clone();
        Ok(TransferPreparation::Transfer(PreparedTransfer::new(
            move || {
                partial(&request)?;
                panic!("the DMA driver crashed after two slots")
            },
        )))
    });
    let cases = [
        (
            "Submit",
            in_submit,
            ErrorKind::Memory,
            "DMA engine fault after two slots",
        ),
        (
            "Completion",
            in_completion,
            ErrorKind::Memory,
            "DMA timeout after two slots",
        ),
        (
            "Panic",
            panicking,
            ErrorKind::Runtime,
            "the DMA driver crashed after two slots",
        ),
    ];
    for (tag, provider, kind, text) in cases {
        let source = mint(&format!("Partial{tag}Source"));
        define(
            source,
            false,
            vec![TransferRoute::new(
                source,
                CarrierClass::of::<Cpu>(),
                "partial",
                provider,
            )?],
        )?;
        let carrier = filled(source, &[1.0, 2.0, 3.0])?;
        let target = Cpu::from_f32(&[7.0, 8.0, 9.0], true)?;
        let before = (carrier.version(), target.version());
        let tensor = Tensor::new(carrier.clone(), 0, layout("3:1"))?;
        let error = move_to(&tensor, &target).unwrap_err();
        assert_eq!(error.kind(), kind, "{tag}: {error}");
        assert!(error.to_string().contains(text), "{tag}: {error}");
        assert!(!carrier.is_released(), "{tag}");
        assert_eq!((carrier.version(), target.version()), before, "{tag}");
        assert_eq!(
            values(&target)?,
            floats(&[7.0, 8.0, 9.0]),
            "{tag}: the destination is restored"
        );
        assert_eq!(values(&carrier)?, floats(&[1.0, 2.0, 3.0]), "{tag}");
    }
    Ok(())
}

#[test]
fn both_carriers_are_claimed_while_a_route_prepares() -> Result<()> {
    let source = mint("ClaimedInPrepareSource");
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let log = Arc::clone(&seen);
    let provider = TransferProvider::new(move |request| {
        // Writing the source or releasing the destination during preparation is refused.
        let write = request
            .tensor()
            .carrier()
            .set(0, Value::Float(5.0))
            .unwrap_err();
        let release = request.destination().release().unwrap_err();
        log.lock()
            .unwrap()
            .extend([write.to_string(), release.to_string()]);
        Err(Error::Value("no channel".into()))
    });
    define(
        source,
        false,
        vec![TransferRoute::new(
            source,
            CarrierClass::of::<Cpu>(),
            "claimed",
            provider,
        )?],
    )?;
    let carrier = filled(source, &[1.0, 2.0])?;
    let target = Cpu::from_f32(&[7.0, 8.0], true)?;
    let tensor = Tensor::new(carrier.clone(), 0, layout("2:1"))?;
    let error = move_to(&tensor, &target).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value);
    assert_eq!(
        *seen.lock().unwrap(),
        [
            format!("runtime error: cannot write a slot: the {source} carrier is claimed by a pending move, so it is not mutable until the move ends"),
            "runtime error: cannot release the CPU carrier: it is claimed by a pending move and owned \
             by it until the move completes"
                .to_string(),
        ]
    );
    // The refused preparation ended both claims and changed nothing.
    assert_eq!(values(&carrier)?, floats(&[1.0, 2.0]));
    assert_eq!(values(&target)?, floats(&[7.0, 8.0]));
    carrier.set(0, Value::Float(3.0))?;
    target.set(0, Value::Float(9.0))?;
    Ok(())
}

/// A `ready_route` that counts its submissions in `submitted`.
fn counted_route(
    source: CarrierClass,
    destination: CarrierClass,
    id: &str,
    submitted: Arc<AtomicUsize>,
) -> TransferRoute {
    let provider = TransferProvider::new(move |request| {
        let request = request.clone();
        let submitted = Arc::clone(&submitted);
        Ok(TransferPreparation::Transfer(PreparedTransfer::new(
            move || {
                submitted.fetch_add(1, Ordering::SeqCst);
                copy_request(&request)?;
                Ok(Submitted::Ready(()))
            },
        )))
    });
    TransferRoute::new(source, destination, id, provider).expect("route")
}

#[test]
fn a_move_recorded_for_gradients_needs_a_route_back_before_it_starts() -> Result<()> {
    let (there, back) = (mint("OneWaySource"), mint("OneWayDestination"));
    let submitted = Arc::new(AtomicUsize::new(0));
    define(
        there,
        false,
        vec![counted_route(
            there,
            back,
            "one-way",
            Arc::clone(&submitted),
        )],
    )?;
    define(back, false, vec![])?;
    let carrier = filled(there, &[1.0, 2.0])?;
    let target = filled(back, &[7.0, 8.0])?;
    let tensor = Tensor::new(carrier.clone(), 0, layout("2:1"))?;
    tensor.set_requires_grad(true)?;
    let before = (carrier.version(), target.version());

    let error = move_to(&tensor, &target).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotImplemented);
    assert_eq!(
        error.to_string(),
        "not implemented: cannot record the move from OneWaySource to OneWayDestination for \
         gradients: its backward needs a route back from OneWayDestination to OneWaySource \
         (not implemented: no move route from OneWayDestination to OneWaySource: elementwise \
         fallback needs both classes (OneWayDestination, OneWaySource) definition-backed with \
         storage providers that permit it (OneWayDestination does not permit elementwise fallback, OneWaySource does not \
         permit elementwise fallback)); move it under no_grad or detach it first"
    );
    // Nothing started and nothing changed; neither carrier is claimed.
    assert_eq!(submitted.load(Ordering::SeqCst), 0);
    assert!(!carrier.is_released());
    assert_eq!((carrier.version(), target.version()), before);
    assert_eq!(values(&target)?, floats(&[7.0, 8.0]));
    carrier.set(1, Value::Float(2.5))?;

    // Without recording the same move runs.
    let moved = {
        let _off = strideweave::autograd::no_grad();
        move_to(&tensor, &target)?
    };
    assert_eq!(submitted.load(Ordering::SeqCst), 1);
    assert_eq!(moved.to_values()?, floats(&[1.0, 2.5]));
    assert!(moved.grad_fn().is_none());
    assert!(carrier.is_released());
    Ok(())
}

#[test]
fn the_backward_of_a_move_returns_the_cotangent_along_the_route_back() -> Result<()> {
    let (there, back) = (mint("RoundTripSource"), mint("RoundTripDestination"));
    let (out, home) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    define(
        there,
        false,
        vec![counted_route(there, back, "out", Arc::clone(&out))],
    )?;
    define(
        back,
        false,
        vec![counted_route(back, there, "home", Arc::clone(&home))],
    )?;
    let carrier = filled(there, &[1.0, 2.0, 3.0])?;
    let tensor = Tensor::new(carrier.clone(), 0, layout("3:1"))?;
    tensor.set_requires_grad(true)?;
    let moved = move_to(&tensor, &filled(back, &[0.0; 3])?)?;
    assert_eq!(
        (out.load(Ordering::SeqCst), home.load(Ordering::SeqCst)),
        (1, 0)
    );
    assert_eq!(moved.grad_fn().expect("recorded").name(), "move");

    let cotangent = Tensor::new(filled(back, &[0.5, -1.0, 4.0])?, 0, layout("3:1"))?;
    moved.backward(Some(&cotangent), false)?;
    assert_eq!(home.load(Ordering::SeqCst), 1, "the route back carried it");
    let grad = tensor.grad().expect("a gradient");
    assert_eq!(grad.carrier().class(), there);
    assert_eq!(grad.to_values()?, floats(&[0.5, -1.0, 4.0]));
    Ok(())
}

#[test]
fn an_empty_definition_backed_destination_grows_to_the_cosize() -> Result<()> {
    let (there, back) = (mint("GrowSource"), mint("GrowDestination"));
    let failing = TransferProvider::new(|request| {
        let request = request.clone();
        Ok(TransferPreparation::Transfer(PreparedTransfer::new(
            move || {
                request.write(0, Value::Float(-1.0))?;
                Err(Error::Memory("the link dropped".into()))
            },
        )))
    });
    let failing_back = mint("GrowFailing");
    define(there, false, vec![ready_route(there, back, "grow")])?;
    define(
        failing_back,
        false,
        vec![TransferRoute::new(failing_back, back, "drop", failing)?],
    )?;
    define(back, false, vec![])?;

    // A strided tensor: cosize 5 for 3 elements.
    let carrier = filled(there, &[1.0, 0.0, 2.0, 0.0, 3.0])?;
    let tensor = Tensor::new(carrier, 0, layout("3:2"))?;
    let empty = Carrier::create(back, Slots::default(), 0, DType::FLOAT32, true)?;
    assert_eq!(empty.size(), 0);
    let moved = move_to(&tensor, &empty)?;
    assert_eq!(empty.size(), 5);
    assert!(moved.carrier().same_as(&empty));
    assert_eq!(moved.to_values()?, floats(&[1.0, 2.0, 3.0]));
    assert_eq!(empty.version(), 1);

    // A failed move shrinks the grown destination back to nothing.
    let source = Tensor::new(filled(failing_back, &[4.0, 5.0])?, 0, layout("2:1"))?;
    let other = Carrier::create(back, Slots::default(), 0, DType::FLOAT32, true)?;
    let error = move_to(&source, &other).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Memory);
    assert!(error.to_string().contains("the link dropped"), "{error}");
    assert_eq!((other.size(), other.version()), (0, 0));
    assert!(!source.carrier().is_released());

    // A destination with slots of its own too few for the tensor is a Value error.
    let small = filled(back, &[9.0])?;
    let error = move_to(&source, &small).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value);
    assert_eq!(
        error.to_string(),
        "value error: the GrowDestination destination has 1 slots but the tensor needs 2: it is \
         too small"
    );
    Ok(())
}
