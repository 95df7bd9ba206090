//! Fault injection and races on definition-backed carriers (carrier-extension spec,
//! "Definition and extension registration seal on first observation" and "Storage providers
//! define the complete generic storage surface"): a registration race between a definition
//! and a legacy capability registration, every provider callback failing by error and by
//! panic with nothing published and nothing left claimed, and concurrent completion waits.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use strideweave::carrier::{register_operation_capabilities, Carrier, CarrierClass, ClassKind};
use strideweave::carriers::extension::{
    carrier_definition, CompletionCell, InterfaceHandle, Preparation, PreparedKernel,
    PreparedTransfer, ProviderCompletion, ProviderResult, Submitted, TransferPreparation,
    TransferProvider, TransferRequest,
};
use strideweave::movement::{move_async, move_to};
use strideweave::operation::{
    call, operation_definition, resolve_operation_plan, OperationCapability, PlanOperand,
    ResolvedInvocation, ResultSpec,
};
use strideweave::{
    register_carrier_definition, CarrierDefinition, DType, Error, ErrorKind,
    KernelExecutionInterface, KernelPattern, KernelProvider, Layout, Result, StorageProvider,
    Tensor, TransferRoute, Value,
};

/// A switchable fault: `armed` makes the site fail, `panics` chooses a panic over an error.
#[derive(Default)]
struct Fault {
    armed: AtomicBool,
    panics: AtomicBool,
}

impl Fault {
    fn arm(&self, panics: bool) {
        self.panics.store(panics, Ordering::SeqCst);
        self.armed.store(true, Ordering::SeqCst);
    }

    fn disarm(&self) {
        self.armed.store(false, Ordering::SeqCst);
    }

    /// Fails (or panics) naming `site` when armed.
    fn check(&self, site: &str) -> Result<()> {
        if !self.armed.load(Ordering::SeqCst) {
            return Ok(());
        }
        if self.panics.load(Ordering::SeqCst) {
            panic!("injected {site} panic");
        }
        Err(Error::Memory(format!("injected {site} fault")))
    }
}

/// The faults of one storage provider's callbacks.
#[derive(Default)]
struct StorageFaults {
    allocate: Fault,
    physical_size: Fault,
    read: Fault,
    write: Fault,
    release: Fault,
}

/// The provider-owned state of the test carriers.
#[derive(Clone, Default)]
struct Slots {
    values: Vec<Value>,
    faults: Arc<StorageFaults>,
}

impl Slots {
    fn with(faults: &Arc<StorageFaults>) -> Slots {
        Slots {
            values: Vec::new(),
            faults: Arc::clone(faults),
        }
    }
}

fn storage(fallback: bool) -> StorageProvider {
    StorageProvider::new(
        |_: &Slots, dtype| dtype == DType::FLOAT32,
        |state: &Slots| {
            if state.faults.physical_size.armed.load(Ordering::SeqCst) {
                if state.faults.physical_size.panics.load(Ordering::SeqCst) {
                    panic!("injected physical_size panic");
                }
                return -1;
            }
            state.values.len() as i64
        },
        |state: &mut Slots, slots, _dtype| {
            state.faults.allocate.check("allocate")?;
            state.values = vec![Value::Float(0.0); slots];
            Ok(())
        },
        |state: &mut Slots| {
            state.faults.release.check("release")?;
            state.values.clear();
            Ok(())
        },
        |state: &Slots, index| {
            state.faults.read.check("read")?;
            Ok(state.values[index])
        },
        |state: &mut Slots, index, value| {
            state.faults.write.check("write")?;
            state.values[index] = value;
            Ok(())
        },
    )
    .with_elementwise_fallback(fallback)
}

fn mint(name: &str) -> CarrierClass {
    CarrierClass::mint(name, ClassKind::Independent)
}

fn layout(text: &str) -> Layout {
    text.parse().expect("test layout")
}

fn floats(xs: &[f64]) -> Vec<Value> {
    xs.iter().copied().map(Value::Float).collect()
}

fn values(carrier: &Carrier) -> Result<Vec<Value>> {
    (0..carrier.size()).map(|i| carrier.get(i)).collect()
}

fn filled_with(class: CarrierClass, faults: &Arc<StorageFaults>, xs: &[f64]) -> Result<Carrier> {
    let carrier = Carrier::create(class, Slots::with(faults), xs.len(), DType::FLOAT32, true)?;
    for (i, x) in xs.iter().enumerate() {
        carrier.set(i, Value::Float(*x))?;
    }
    Ok(carrier)
}

fn filled(class: CarrierClass, xs: &[f64]) -> Result<Carrier> {
    filled_with(class, &Arc::default(), xs)
}

/// Asserts `error` is the injected error or the framework's report of the injected panic.
fn assert_injected(error: &Error, site: &str, panicked: bool) {
    if panicked {
        assert_eq!(error.kind(), ErrorKind::Runtime, "{error}");
        assert!(
            error
                .to_string()
                .contains(&format!("injected {site} panic")),
            "{error}"
        );
        assert!(error.to_string().contains("panicked"), "{error}");
    } else {
        assert_eq!(error.kind(), ErrorKind::Memory, "{error}");
        assert_eq!(
            error.to_string(),
            format!("memory error: injected {site} fault")
        );
    }
}

// ---------------------------------------------------------------------------------------
// 1. Registration race.

#[test]
fn a_definition_and_a_legacy_capability_registration_race_to_one_winner() {
    for trial in 0..200 {
        let class = mint(&format!("RaceClass{trial}"));
        let barrier = Arc::new(Barrier::new(2));
        let defining = {
            let barrier = Arc::clone(&barrier);
            thread::spawn(move || {
                barrier.wait();
                register_carrier_definition(class, CarrierDefinition::new(storage(false)))
            })
        };
        let declaring = {
            let barrier = Arc::clone(&barrier);
            thread::spawn(move || {
                barrier.wait();
                register_operation_capabilities(class, [])
            })
        };
        let defined = defining.join().unwrap();
        let declared = declaring.join().unwrap();
        assert_ne!(
            defined.is_ok(),
            declared.is_ok(),
            "trial {trial}: exactly one registration succeeds ({defined:?}, {declared:?})"
        );
        match (&defined, &declared) {
            (Ok(()), Err(error)) => {
                assert_eq!(error.kind(), ErrorKind::Type, "{error}");
                // The wording depends on where the legacy registration lost (see the
                // report: a late loser says the class "has already declared" capabilities).
                assert!(
                    error.to_string().contains(&format!("RaceClass{trial} ")),
                    "{error}"
                );
                assert!(class.is_definition_backed());
                assert!(carrier_definition(class).is_some());
            }
            (Err(error), Ok(())) => {
                assert_eq!(error.kind(), ErrorKind::Type, "{error}");
                assert!(
                    error
                        .to_string()
                        .contains(&format!("RaceClass{trial} was already observed")),
                    "{error}"
                );
                assert!(!class.is_definition_backed());
                assert!(carrier_definition(class).is_none());
            }
            _ => unreachable!(),
        }
    }
}

// ---------------------------------------------------------------------------------------
// 2. Storage provider callbacks.

#[test]
fn a_failing_allocate_or_physical_size_exposes_no_carrier() -> Result<()> {
    let class = mint("FaultyAllocation");
    register_carrier_definition(class, CarrierDefinition::new(storage(false)))?;
    let faults: Arc<StorageFaults> = Arc::default();
    for panicked in [false, true] {
        faults.allocate.arm(panicked);
        let error = Carrier::create(class, Slots::with(&faults), 3, DType::FLOAT32, true)
            .map(|_| ())
            .unwrap_err();
        assert_injected(&error, "allocate", panicked);
        assert!(
            panicked == matches!(error, Error::ProviderPanicked(_)),
            "{error:?}"
        );
        if let Error::ProviderPanicked(panic) = &error {
            assert_eq!(panic.callback(), "allocate");
            assert!(panic.provider().contains("FaultyAllocation"), "{error}");
            assert_eq!(panic.detail(), "injected allocate panic");
        }
        faults.allocate.disarm();

        faults.physical_size.arm(panicked);
        let error = Carrier::create(class, Slots::with(&faults), 3, DType::FLOAT32, true)
            .map(|_| ())
            .unwrap_err();
        if panicked {
            assert_injected(&error, "physical_size", true);
            assert!(error.to_string().contains("FaultyAllocation"), "{error}");
        } else {
            assert_eq!(error.kind(), ErrorKind::Value, "{error}");
            assert!(
                error.to_string().contains("negative physical_size -1"),
                "{error}"
            );
        }
        faults.physical_size.disarm();

        // With the faults off the same state builds a working carrier.
        let carrier = filled_with(class, &faults, &[1.0, 2.0, 3.0])?;
        assert_eq!(values(&carrier)?, floats(&[1.0, 2.0, 3.0]));
        assert_eq!(carrier.version(), 3);
    }
    Ok(())
}

#[test]
fn failing_read_and_write_change_nothing() -> Result<()> {
    let class = mint("FaultySlots");
    register_carrier_definition(class, CarrierDefinition::new(storage(false)))?;
    let faults: Arc<StorageFaults> = Arc::default();
    let carrier = filled_with(class, &faults, &[1.0, 2.0])?;
    let tensor = Tensor::new(carrier.clone(), 0, layout("2:1"))?;
    let mut version = carrier.version();
    assert_eq!(version, 2);
    for panicked in [false, true] {
        faults.read.arm(panicked);
        assert_injected(&carrier.get(0).unwrap_err(), "read", panicked);
        assert_injected(&tensor.to_values().unwrap_err(), "read", panicked);
        faults.read.disarm();
        assert_eq!(carrier.version(), version);
        assert_eq!(values(&carrier)?, floats(&[1.0, 2.0]));

        faults.write.arm(panicked);
        assert_injected(
            &carrier.set(1, Value::Float(9.0)).unwrap_err(),
            "write",
            panicked,
        );
        assert_injected(
            &tensor.set(&0.into(), Value::Float(9.0)).unwrap_err(),
            "write",
            panicked,
        );
        faults.write.disarm();
        assert_eq!(carrier.version(), version);
        assert_eq!(values(&carrier)?, floats(&[1.0, 2.0]));

        // Nothing stayed claimed: the carrier still accepts a write.
        carrier.set(0, Value::Float(1.0))?;
        version += 1;
        assert_eq!(carrier.version(), version);
    }
    Ok(())
}

#[test]
fn a_storage_fault_during_an_elementwise_move_publishes_nothing() -> Result<()> {
    let (source_class, destination_class) = (mint("FallbackSource"), mint("FallbackDestination"));
    register_carrier_definition(source_class, CarrierDefinition::new(storage(true)))?;
    register_carrier_definition(destination_class, CarrierDefinition::new(storage(true)))?;
    let source_faults: Arc<StorageFaults> = Arc::default();
    let destination_faults: Arc<StorageFaults> = Arc::default();
    let source = filled_with(source_class, &source_faults, &[1.0, 2.0])?;
    let target = filled_with(destination_class, &destination_faults, &[7.0, 8.0])?;
    let tensor = Tensor::new(source.clone(), 0, layout("2:1"))?;
    let before = (source.version(), target.version());
    for panicked in [false, true] {
        for (fault, site) in [
            (&source_faults.read, "read"),
            (&destination_faults.write, "write"),
        ] {
            fault.arm(panicked);
            let error = move_to(&tensor, &target).map(|_| ()).unwrap_err();
            fault.disarm();
            assert_injected(&error, site, panicked);
            assert_eq!((source.version(), target.version()), before);
            assert!(!source.is_released());
            assert_eq!(values(&source)?, floats(&[1.0, 2.0]));
            assert_eq!(values(&target)?, floats(&[7.0, 8.0]));
        }
    }
    // Nothing stayed claimed: the same move succeeds once the faults are off.
    let moved = move_to(&tensor, &target)?;
    assert!(moved.carrier().same_as(&target));
    assert_eq!(moved.to_values()?, floats(&[1.0, 2.0]));
    assert_eq!(target.version(), before.1 + 1);
    assert!(source.is_released());
    target.set(0, Value::Float(3.0))?;
    Ok(())
}

// ---------------------------------------------------------------------------------------
// 2. Transfer routes.

/// The faults of one transfer route.
#[derive(Default)]
struct TransferFaults {
    prepare: Fault,
    submit: Fault,
    /// Arms a pending submission whose completion fails.
    completion: Fault,
}

fn copy_request(request: &TransferRequest) -> Result<()> {
    let source = request.tensor();
    for slot in 0..request.physical_span() {
        request.write(slot, source.carrier().get(source.offset() + slot)?)?;
    }
    Ok(())
}

fn faulty_route(
    source: CarrierClass,
    destination: CarrierClass,
    faults: &Arc<TransferFaults>,
) -> TransferRoute {
    let faults = Arc::clone(faults);
    let provider = TransferProvider::new(move |request| {
        faults.prepare.check("prepare")?;
        let request = request.clone();
        let faults = Arc::clone(&faults);
        Ok(TransferPreparation::Transfer(PreparedTransfer::new(
            move || {
                faults.submit.check("submit")?;
                if faults.completion.armed.load(Ordering::SeqCst) {
                    // Fail later, on another thread.
                    let cell = CompletionCell::new();
                    let worker = cell.clone();
                    thread::spawn(move || {
                        thread::sleep(Duration::from_millis(5));
                        worker.complete(Err(Error::Memory("injected completion fault".into())));
                    });
                    return Ok(Submitted::pending(cell));
                }
                copy_request(&request)?;
                Ok(Submitted::Ready(()))
            },
        )))
    });
    TransferRoute::new(source, destination, "faulty", provider).expect("route")
}

#[test]
fn transfer_faults_publish_nothing_and_release_their_claims() -> Result<()> {
    let (source_class, destination_class) = (mint("RouteSource"), mint("RouteDestination"));
    let faults: Arc<TransferFaults> = Arc::default();
    register_carrier_definition(
        source_class,
        CarrierDefinition::new(storage(false)).with_transfers([faulty_route(
            source_class,
            destination_class,
            &faults,
        )])?,
    )?;
    register_carrier_definition(destination_class, CarrierDefinition::new(storage(false)))?;
    let source = filled(source_class, &[1.0, 2.0, 3.0])?;
    let target = filled(destination_class, &[7.0, 8.0, 9.0])?;
    let tensor = Tensor::new(source.clone(), 0, layout("3:1"))?;
    let before = (source.version(), target.version());

    let cases: [(&Fault, &str, &[bool]); 3] = [
        (&faults.prepare, "prepare", &[false, true]),
        (&faults.submit, "submit", &[false, true]),
        (&faults.completion, "completion", &[false]),
    ];
    for (fault, site, modes) in cases {
        for &panicked in modes {
            for asynchronous in [false, true] {
                fault.arm(panicked);
                let outcome = if asynchronous {
                    move_async(&tensor, &target).and_then(|handle| {
                        let first = handle.wait().map(|_| ()).unwrap_err();
                        let second = handle.wait().map(|_| ()).unwrap_err();
                        assert_eq!(first.to_string(), second.to_string());
                        assert!(handle.done());
                        Err(first)
                    })
                } else {
                    move_to(&tensor, &target)
                };
                fault.disarm();
                let error = outcome.map(|_| ()).unwrap_err();
                assert_injected(&error, site, panicked);
                if let Error::ProviderPanicked(panic) = &error {
                    assert_eq!(
                        (panic.provider(), panic.callback()),
                        (
                            "the transfer provider from RouteSource to RouteDestination",
                            site
                        ),
                        "{error}"
                    );
                }
                assert_eq!(
                    panicked,
                    matches!(error, Error::ProviderPanicked(_)),
                    "{error}"
                );
                assert_eq!((source.version(), target.version()), before, "{site}");
                assert!(!source.is_released(), "{site}");
                assert_eq!(values(&source)?, floats(&[1.0, 2.0, 3.0]));
                assert_eq!(values(&target)?, floats(&[7.0, 8.0, 9.0]), "{site}");
            }
        }
    }
    // Nothing stayed claimed: both carriers accept writes, and the move then succeeds.
    source.set(0, Value::Float(1.0))?;
    target.set(0, Value::Float(7.0))?;
    let target_version = target.version();
    let moved = move_to(&tensor, &target)?;
    assert!(moved.carrier().same_as(&target));
    assert_eq!(moved.to_values()?, floats(&[1.0, 2.0, 3.0]));
    assert_eq!(target.version(), target_version + 1);
    assert!(source.is_released());
    Ok(())
}

// ---------------------------------------------------------------------------------------
// 2. Kernel patterns.

fn neg_plan() -> OperationCapability {
    OperationCapability::from_plan(
        resolve_operation_plan("neg", &[PlanOperand::Tensor(DType::FLOAT32)], None).unwrap(),
    )
}

fn output(class: CarrierClass, spec: &ResultSpec, values: &[f64]) -> Result<Tensor> {
    let layout = spec.layout().clone();
    let carrier = Carrier::create(class, Slots::default(), layout.cosize(), spec.dtype(), true)?;
    for (ordinal, value) in values.iter().enumerate() {
        carrier.set(layout.index_of(ordinal)?, Value::Float(*value))?;
    }
    Tensor::new(carrier, 0, layout)
}

fn as_f64(values: Vec<Value>) -> Vec<f64> {
    values
        .into_iter()
        .map(|v| match v {
            Value::Float(x) => x,
            other => panic!("not a float: {other:?}"),
        })
        .collect()
}

/// The faults of one kernel pattern: its preparation, its submission, and the `wait` of the
/// pending completion its submission returns.
#[derive(Default)]
struct KernelFaults {
    prepare: Fault,
    submit: Fault,
    wait: Fault,
}

/// The pending completion of the faulty `neg`: it computes when waited on, failing (or
/// panicking) there while the `wait` fault is armed.
struct PendingNeg {
    faults: Arc<KernelFaults>,
    operand: Tensor,
    spec: ResultSpec,
    class: CarrierClass,
}

impl ProviderCompletion<ProviderResult> for PendingNeg {
    fn done(&self) -> bool {
        false
    }

    fn wait(&self) -> Result<ProviderResult> {
        self.faults.wait.check("wait")?;
        let negated: Vec<f64> = as_f64(self.operand.to_values()?)
            .iter()
            .map(|x| -x)
            .collect();
        ProviderResult::new([output(self.class, &self.spec, &negated)?])
    }
}

fn faulty_neg(class: CarrierClass, faults: &Arc<KernelFaults>) -> KernelPattern {
    let faults = Arc::clone(faults);
    KernelPattern::new(
        &operation_definition("neg").unwrap(),
        [neg_plan()],
        "neg.faulty",
        move |invocation: &ResolvedInvocation, interface: &InterfaceHandle| {
            faults.prepare.check("prepare")?;
            let operand = invocation.call().tensor(0)?.clone();
            let spec = invocation.results()[0].clone();
            let faults = Arc::clone(&faults);
            Ok(Preparation::Kernel(PreparedKernel::new(
                interface.clone(),
                move || {
                    faults.submit.check("submit")?;
                    Ok(Submitted::pending(PendingNeg {
                        faults,
                        operand,
                        spec,
                        class,
                    }))
                },
            )))
        },
        0,
    )
    .unwrap()
}

#[test]
fn kernel_faults_publish_no_result_and_leave_operands_unchanged() -> Result<()> {
    let class = mint("FaultyAccel");
    let faults: Arc<KernelFaults> = Arc::default();
    let interface = InterfaceHandle::new(KernelExecutionInterface::new("1.0")?)?;
    let provider = KernelProvider::new(interface, [faulty_neg(class, &faults)])?;
    register_carrier_definition(
        class,
        CarrierDefinition::new(storage(false)).with_kernels(provider)?,
    )?;
    let carrier = filled(class, &[1.0, -2.0])?;
    let x = Tensor::new(carrier.clone(), 0, layout("2:1"))?;
    let version = carrier.version();
    let sites = [
        (&faults.prepare, "prepare"),
        (&faults.submit, "submit"),
        (&faults.wait, "wait"),
    ];
    for (fault, site) in sites {
        for panicked in [false, true] {
            fault.arm(panicked);
            let outcome = call("neg", [x.clone().into()], &[]);
            fault.disarm();
            let error = outcome.map(|_| ()).unwrap_err();
            assert_injected(&error, site, panicked);
            if panicked {
                assert!(
                    error.to_string().contains(&format!("panicked in {site}")),
                    "{error}"
                );
                let Error::ProviderPanicked(panic) = &error else {
                    panic!("a {site} panic is reported as a provider panic: {error:?}");
                };
                assert_eq!(panic.callback(), site);
                assert_eq!(
                    panic.provider(),
                    "kernel pattern 'neg.faulty' of FaultyAccel"
                );
            }
            assert_eq!(carrier.version(), version, "{site}");
            assert_eq!(x.to_values()?, floats(&[1.0, -2.0]));
        }
    }
    // Nothing stayed claimed, and the same call succeeds with the faults off.
    carrier.set(0, Value::Float(1.0))?;
    let negated = call("neg", [x.clone().into()], &[])?;
    assert_eq!(negated.len(), 1);
    assert_eq!(negated[0].carrier().class(), class);
    assert_eq!(negated[0].to_values()?, floats(&[-1.0, 2.0]));
    assert_eq!(carrier.version(), version + 1);
    Ok(())
}

// ---------------------------------------------------------------------------------------
// 3. Concurrent completion waits.

#[test]
fn concurrent_waits_on_one_completion_cell_see_one_value() {
    for outcome in [Ok(42_i64), Err(Error::Memory("injected wait fault".into()))] {
        let cell: CompletionCell<i64> = CompletionCell::new();
        let barrier = Arc::new(Barrier::new(9));
        let waiters: Vec<_> = (0..8)
            .map(|_| {
                let cell = cell.clone();
                let barrier = Arc::clone(&barrier);
                thread::spawn(move || {
                    barrier.wait();
                    cell.wait()
                        .map_err(|error| (error.kind(), error.to_string()))
                })
            })
            .collect();
        barrier.wait();
        thread::sleep(Duration::from_millis(10));
        assert!(!cell.done());
        let expected = outcome
            .as_ref()
            .map(|v| *v)
            .map_err(|error| (error.kind(), error.to_string()));
        assert!(cell.complete(outcome));
        assert!(!cell.complete(Ok(7)), "the first completion wins");
        for waiter in waiters {
            assert_eq!(waiter.join().unwrap(), expected);
        }
        assert!(cell.done());
        assert_eq!(
            cell.wait()
                .map_err(|error| (error.kind(), error.to_string())),
            expected
        );
    }
}

#[test]
fn a_failing_release_leaves_the_carrier_live_and_retryable() -> Result<()> {
    let class = mint("ReleaseFault");
    register_carrier_definition(class, CarrierDefinition::new(storage(false)))?;
    for panicked in [false, true] {
        let faults: Arc<StorageFaults> = Arc::default();
        let carrier = filled_with(class, &faults, &[1.0, 2.0])?;
        let version = carrier.version();
        faults.release.arm(panicked);
        let error = carrier.release().unwrap_err();
        assert_injected(&error, "release", panicked);
        assert!(
            !carrier.is_released(),
            "a refused release leaves the carrier live"
        );
        assert_eq!(carrier.version(), version);
        assert_eq!(values(&carrier)?, floats(&[1.0, 2.0]));
        faults.release.disarm();
        carrier.release()?;
        assert!(carrier.is_released());
        assert_eq!(carrier.size(), 0);
    }
    Ok(())
}
