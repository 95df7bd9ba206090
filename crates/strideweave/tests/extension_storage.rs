//! Definition-backed storage (carrier-extension spec): storage providers, carrier
//! definitions and their registration and sealing, facets, mixed authority, failure
//! injection and the elementwise-fallback rule for movement.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};

use strideweave::carrier::{
    capabilities_for_carrier_class, register_operation_capabilities, Carrier, CarrierClass,
    CarrierType, ClassKind,
};
use strideweave::carriers::extension::{self, carrier_definition};
use strideweave::carriers::{Cpu, Generic};
use strideweave::movement::{
    move_to, register_move_operation, registered_move_operation, ElementwiseMoveOperation,
};
use strideweave::{
    register_carrier_definition, CarrierDefinition, CarrierFacet, DType, Error, ErrorKind, Layout,
    Result, StorageProvider, Tensor, Value,
};

/// Injected behavior of the test provider's `write` and `read`.
const OK: u8 = 0;
const FAIL: u8 = 1;
const PANIC: u8 = 2;
const WRONG_TYPE: u8 = 3;

/// A separate device resource a storage provider allocates from: not a carrier, not a
/// provider.
#[derive(Default)]
struct Device {
    allocations: Mutex<Vec<usize>>,
    releases: AtomicUsize,
}

/// The provider-owned state of the test carriers.
#[derive(Clone, Default)]
struct Slots {
    values: Vec<Value>,
    device: Option<Arc<Device>>,
    mode: Arc<AtomicU8>,
    releases: Arc<AtomicUsize>,
}

impl Slots {
    fn on(device: &Arc<Device>) -> Slots {
        Slots {
            device: Some(Arc::clone(device)),
            ..Slots::default()
        }
    }
}

fn slots_storage() -> StorageProvider {
    StorageProvider::new(
        |_: &Slots, dtype| dtype == DType::FLOAT32 || dtype == DType::INT32,
        |state: &Slots| state.values.len() as i64,
        |state: &mut Slots, slots, _dtype| {
            if let Some(device) = &state.device {
                device.allocations.lock().unwrap().push(slots);
            }
            state.values = vec![Value::Int(0); slots];
            Ok(())
        },
        |state: &mut Slots| {
            state.values.clear();
            state.releases.fetch_add(1, Ordering::SeqCst);
            if let Some(device) = &state.device {
                device.releases.fetch_add(1, Ordering::SeqCst);
            }
            Ok(())
        },
        |state: &Slots, index| match state.mode.load(Ordering::SeqCst) {
            WRONG_TYPE => Ok(Value::Bool(true)),
            _ => Ok(state.values[index]),
        },
        |state: &mut Slots, index, value| match state.mode.load(Ordering::SeqCst) {
            FAIL => Err(Error::Memory("device write failed".into())),
            PANIC => panic!("device write exploded"),
            _ => {
                state.values[index] = value;
                Ok(())
            }
        },
    )
}

fn define(name: &str, fallback: bool) -> CarrierClass {
    let class = CarrierClass::mint(name, ClassKind::Independent);
    register_carrier_definition(
        class,
        CarrierDefinition::new(slots_storage().with_elementwise_fallback(fallback)),
    )
    .unwrap();
    class
}

fn layout(text: &str) -> Layout {
    text.parse().expect("test layout")
}

fn values(carrier: &Carrier) -> Result<Vec<Value>> {
    (0..carrier.size()).map(|i| carrier.get(i)).collect()
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

struct Ring;
impl CarrierType for Ring {
    const NAME: &'static str = "Ring";
}

struct RingSubclass;
impl CarrierType for RingSubclass {
    const NAME: &'static str = "RingSubclass";
}

#[derive(Debug)]
struct Residency;
impl CarrierFacet for Residency {}

#[derive(Debug, PartialEq)]
struct Label(&'static str);
impl CarrierFacet for Label {}

#[test]
fn the_module_and_the_crate_root_export_the_same_items() {
    let _: fn(CarrierClass, extension::CarrierDefinition) -> Result<()> =
        strideweave::register_carrier_definition;
    let _: fn(CarrierClass, CarrierDefinition) -> Result<()> =
        extension::register_carrier_definition;
    fn same<T>(_: Option<T>, _: Option<T>) {}
    same::<StorageProvider>(None, None::<extension::StorageProvider>);
    same::<strideweave::Unsupported>(None, None::<extension::Unsupported>);
    same::<strideweave::KernelExecutionInterface>(
        None,
        None::<extension::KernelExecutionInterface>,
    );
    fn facet_bound<F: extension::CarrierFacet + strideweave::CarrierFacet>() {}
    facet_bound::<Label>();
}

#[test]
fn register_an_exact_sibling_carrier() -> Result<()> {
    let class = CarrierClass::of_type::<Ring>();
    assert_eq!(class.name(), "Ring");
    register_carrier_definition(
        class,
        CarrierDefinition::new(slots_storage())
            .with_facets([Arc::new(Label("ring")) as Arc<dyn CarrierFacet>])?,
    )?;
    assert!(class.is_definition_backed());
    for _ in 0..2 {
        let carrier = Carrier::create(class, Slots::default(), 3, DType::FLOAT32, true)?;
        assert_eq!(carrier.class(), class);
        assert_eq!((carrier.size(), carrier.version()), (3, 0));
        assert_eq!(values(&carrier)?, floats(&[0.0, 0.0, 0.0]));
        carrier.set(1, Value::Float(0.1))?;
        assert_eq!(carrier.get(1)?, Value::Float(0.10000000149011612));
        assert_eq!(carrier.version(), 1);
        assert_eq!(carrier.facet::<Label>(), Some(&Label("ring")));
        let tensor = Tensor::new(carrier.clone(), 0, layout("3:1"))?;
        assert_eq!(
            tensor.to_values()?,
            floats(&[0.0, 0.10000000149011612, 0.0])
        );

        // Factories keep the exact class and its definition.
        let like = carrier.new_like(&[Value::Int(4), Value::Int(5)], true, None)?;
        assert_eq!(like.class(), class);
        assert_eq!(values(&like)?, floats(&[4.0, 5.0]));
        assert_eq!(like.version(), 0);
        let zeroed = carrier.allocate_like(2, false, Some(DType::INT32), false)?;
        assert_eq!((zeroed.class(), zeroed.dtype()), (class, DType::INT32));
        assert_eq!(values(&zeroed)?, vec![Value::Int(0), Value::Int(0)]);
        assert_eq!(
            zeroed.set(0, Value::Int(1)).unwrap_err().kind(),
            ErrorKind::Runtime
        );
    }

    // The state type is the provider's, exactly.
    let error = Carrier::create(class, 7_u32, 1, DType::FLOAT32, true).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Type);
    assert!(error.to_string().contains("u32"), "{error}");
    Ok(())
}

#[test]
fn keep_a_subclass_independent() -> Result<()> {
    let base = CarrierClass::of_type::<RingSubclass>();
    // A distinct Rust type is a distinct class even with the same state type.
    struct Derived;
    impl CarrierType for Derived {
        const NAME: &'static str = "DerivedRing";
    }
    let derived = CarrierClass::of_type::<Derived>();
    assert_ne!(base, derived);
    register_carrier_definition(
        base,
        CarrierDefinition::new(slots_storage().with_elementwise_fallback(true))
            .with_facets([Arc::new(Label("base")) as Arc<dyn CarrierFacet>])?,
    )?;
    assert!(!derived.is_definition_backed());
    assert!(carrier_definition(derived).is_none());
    let error = Carrier::create(derived, Slots::default(), 2, DType::FLOAT32, true).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Type);
    assert_eq!(
        error.to_string(),
        "type error: DerivedRing has no carrier definition; construct a definition-free carrier with Carrier::new"
    );
    assert!(capabilities_for_carrier_class(derived).is_empty());
    // The base keeps its own definition.
    let carrier = Carrier::create(base, Slots::default(), 2, DType::FLOAT32, true)?;
    assert_eq!(carrier.facet::<Label>(), Some(&Label("base")));
    Ok(())
}

#[test]
fn allocate_from_a_separate_resource() -> Result<()> {
    let class = define("DeviceBacked", false);
    let device = Arc::new(Device::default());
    let carrier = Carrier::create(class, Slots::on(&device), 4, DType::FLOAT32, true)?;
    let tensor = Tensor::new(carrier, 0, layout("(2,2):(1,2)"))?;
    assert_eq!(tensor.carrier().class(), class);
    assert_eq!(*device.allocations.lock().unwrap(), vec![4]);
    // The resource is a distinct object the provider state shares.
    assert_eq!(Arc::strong_count(&device), 2);
    tensor.carrier().set(3, Value::Float(2.5))?;
    assert_eq!(tensor.to_values()?, floats(&[0.0, 0.0, 0.0, 2.5]));
    tensor.carrier().release()?;
    tensor.carrier().release()?;
    assert_eq!(device.releases.load(Ordering::SeqCst), 1);
    assert_eq!(tensor.carrier().size(), 0);
    assert_eq!(
        tensor.carrier().get(0).unwrap_err().kind(),
        ErrorKind::Runtime
    );
    Ok(())
}

#[test]
fn reject_an_invalid_provider_return() {
    fn sized(size: fn(usize) -> i64) -> StorageProvider {
        StorageProvider::new(
            |_: &Slots, _| true,
            move |state: &Slots| size(state.values.len()),
            |state: &mut Slots, slots, _dtype| {
                state.values = vec![Value::Int(0); slots];
                Ok(())
            },
            |state: &mut Slots| {
                state.releases.fetch_add(1, Ordering::SeqCst);
                Ok(())
            },
            |state: &Slots, index| Ok(state.values[index]),
            |_: &mut Slots, _, _| Ok(()),
        )
    }
    let negative = CarrierClass::mint("NegativeSize", ClassKind::Independent);
    register_carrier_definition(negative, CarrierDefinition::new(sized(|_| -1))).unwrap();
    let state = Slots::default();
    let releases = Arc::clone(&state.releases);
    let error = Carrier::create(negative, state, 3, DType::FLOAT32, true).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value);
    assert!(
        error.to_string().contains("NegativeSize")
            && error.to_string().contains("negative physical_size -1"),
        "{error}"
    );
    assert_eq!(releases.load(Ordering::SeqCst), 1);

    let wrong = CarrierClass::mint("WrongSize", ClassKind::Independent);
    register_carrier_definition(wrong, CarrierDefinition::new(sized(|n| n as i64 + 1))).unwrap();
    let error = Carrier::create(wrong, Slots::default(), 3, DType::FLOAT32, true).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime);
    assert!(matches!(error, Error::ProviderContract(_)), "{error:?}");
    assert!(
        error.to_string().contains("WrongSize")
            && error.to_string().contains("physical_size reports 4"),
        "{error}"
    );
}

#[test]
fn ignore_the_carrier_for_fixed_dtype_support() -> Result<()> {
    let seen: Arc<Mutex<Vec<DType>>> = Arc::default();
    let recorded = Arc::clone(&seen);
    let storage = StorageProvider::new(
        move |_: &Slots, dtype| {
            recorded.lock().unwrap().push(dtype);
            dtype == DType::FLOAT32
        },
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
    );
    let class = CarrierClass::mint("FixedDtypes", ClassKind::Independent);
    register_carrier_definition(class, CarrierDefinition::new(storage))?;
    let carrier = Carrier::create(class, Slots::default(), 2, DType::FLOAT32, true)?;
    let error = Carrier::create(class, Slots::default(), 2, DType::BOOL, true).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value);
    assert_eq!(
        error.to_string(),
        "value error: FixedDtypes carriers cannot store dtype Bool"
    );
    assert!(carrier.supports_storage_dtype(DType::FLOAT32).unwrap());
    assert!(!carrier.supports_storage_dtype(DType::INT32).unwrap());
    carrier.release()?;
    assert!(carrier.supports_storage_dtype(DType::FLOAT32).unwrap());
    assert_eq!(
        *seen.lock().unwrap(),
        vec![
            DType::FLOAT32,
            DType::BOOL,
            DType::FLOAT32,
            DType::INT32,
            DType::FLOAT32
        ]
    );
    Ok(())
}

#[test]
fn query_an_absent_residency_facet() -> Result<()> {
    let class = CarrierClass::mint("Labelled", ClassKind::Independent);
    register_carrier_definition(
        class,
        CarrierDefinition::new(slots_storage())
            .with_facets([Arc::new(Label("l")) as Arc<dyn CarrierFacet>])?,
    )?;
    let carrier = Carrier::create(class, Slots::default(), 1, DType::FLOAT32, true)?;
    assert!(carrier.facet::<Residency>().is_none());
    let error = carrier.require_facet::<Residency>().unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotImplemented);
    assert!(
        error.to_string().contains("Labelled") && error.to_string().contains("Residency"),
        "{error}"
    );
    assert_eq!(carrier.require_facet::<Label>()?, &Label("l"));

    // Definition-free carriers have no facets.
    let generic = Generic::carrier(&floats(&[1.0]), DType::FLOAT32, true)?;
    assert!(generic.facet::<Label>().is_none());
    assert_eq!(
        generic.require_facet::<Label>().unwrap_err().kind(),
        ErrorKind::NotImplemented
    );

    // Two facets of one exact type are a Value error.
    let error = CarrierDefinition::new(slots_storage())
        .with_facets([
            Arc::new(Label("a")) as Arc<dyn CarrierFacet>,
            Arc::new(Label("b")) as Arc<dyn CarrierFacet>,
        ])
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value);
    assert!(error.to_string().contains("Label"), "{error}");
    Ok(())
}

#[test]
fn define_a_custom_storage_only_carrier() -> Result<()> {
    let source_class = define("StorageOnlySource", true);
    let destination_class = define("StorageOnlyDestination", true);
    assert!(capabilities_for_carrier_class(source_class).is_empty());
    let source = filled(source_class, &[1.0, 2.0, 3.0])?;
    assert!(source.capabilities().is_empty());
    let tensor = Tensor::new(source.clone(), 0, layout("3:1"))?;
    let error = strideweave::ops::neg(&tensor).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotImplemented);
    let Error::UnsupportedOperationPlan(plan) = &error else {
        panic!("expected UnsupportedOperationPlan, got {error:?}");
    };
    assert_eq!(plan.operation(), "neg");
    assert_eq!(
        plan.reasons(),
        ["StorageOnlySource declares no operation-plan capability for 'neg'"]
    );

    let destination =
        Carrier::create(destination_class, Slots::default(), 3, DType::FLOAT32, true)?;
    let moved = move_to(&tensor, &destination)?;
    assert!(moved.carrier().same_as(&destination));
    assert_eq!(moved.to_values()?, floats(&[1.0, 2.0, 3.0]));
    assert_eq!(destination.version(), 1);
    assert!(source.is_released());
    Ok(())
}

#[test]
fn reject_mixed_authority() {
    let class = define("MixedAuthority", true);
    let error = register_operation_capabilities(class, []).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Type);
    assert!(error.to_string().contains("definition-backed"), "{error}");
    assert!(capabilities_for_carrier_class(class).is_empty());

    let cpu = CarrierClass::of::<Cpu>();
    for (source, destination) in [(class, cpu), (cpu, class)] {
        let error =
            register_move_operation(source, destination, Arc::new(ElementwiseMoveOperation))
                .unwrap_err();
        // The original's class: a RuntimeError naming the route type that owns the pair.
        assert_eq!(error.kind(), ErrorKind::Runtime);
        assert!(
            error
                .to_string()
                .contains("MixedAuthority is a definition-backed")
                && error.to_string().contains("TransferRoute"),
            "{error}"
        );
        assert!(registered_move_operation(source, destination).is_none());
    }
}

/// A definition-free custom carrier class distinct from every other test's.
struct LegacyMarker;

#[test]
fn run_a_legacy_custom_carrier() -> Result<()> {
    #[path = "common/mod.rs"]
    #[allow(clippy::duplicate_mod)]
    mod common;
    use common::Flaky;
    let class = CarrierClass::of::<Flaky<LegacyMarker>>();
    // Capabilities are declared before the first construction, which observes the class.
    register_operation_capabilities(class, [])?;
    let carrier = Flaky::<LegacyMarker>::carrier(&[1.0, 2.0], true);
    carrier.set(0, Value::Float(5.0))?;
    assert_eq!(values(&carrier)?, floats(&[5.0, 2.0]));
    assert!(!class.is_definition_backed());
    register_move_operation(
        class,
        CarrierClass::of::<Cpu>(),
        Arc::new(ElementwiseMoveOperation),
    )?;
    assert!(registered_move_operation(class, CarrierClass::of::<Cpu>()).is_some());
    let error =
        register_carrier_definition(class, CarrierDefinition::new(slots_storage())).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Type);
    assert!(error.to_string().contains("already observed"), "{error}");
    assert!(carrier_definition(class).is_none());
    Ok(())
}

#[test]
fn preserve_a_shipped_legacy_carrier() -> Result<()> {
    for class in [CarrierClass::of::<Generic>(), CarrierClass::of::<Cpu>()] {
        let capabilities = capabilities_for_carrier_class(class);
        let error = register_carrier_definition(class, CarrierDefinition::new(slots_storage()))
            .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Type);
        assert!(error.to_string().contains("shipped"), "{error}");
        assert!(!class.is_definition_backed());
        assert!(!capabilities.is_empty());
        assert_eq!(capabilities_for_carrier_class(class), capabilities);
    }
    let generic = Generic::carrier(&floats(&[1.0, 2.0]), DType::FLOAT32, true)?;
    let tensor = Tensor::new(generic, 0, layout("2:1"))?;
    assert_eq!(
        strideweave::ops::neg(&tensor)?.to_values()?,
        floats(&[-1.0, -2.0])
    );
    let cpu = Cpu::carrier(2, DType::FLOAT32, true, false)?;
    let moved = move_to(&tensor, &cpu)?;
    assert_eq!(moved.to_values()?, floats(&[1.0, 2.0]));
    Ok(())
}

#[test]
fn a_late_or_second_definition_is_a_type_error() -> Result<()> {
    let queried = CarrierClass::mint("QueriedFirst", ClassKind::Independent);
    assert!(capabilities_for_carrier_class(queried).is_empty());
    let error =
        register_carrier_definition(queried, CarrierDefinition::new(slots_storage())).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Type);
    assert!(
        error
            .to_string()
            .contains("QueriedFirst was already observed"),
        "{error}"
    );
    assert!(carrier_definition(queried).is_none());

    // A second registration leaves the first unchanged.
    let class = CarrierClass::mint("DefinedOnce", ClassKind::Independent);
    let first = slots_storage().with_elementwise_fallback(true);
    register_carrier_definition(class, CarrierDefinition::new(first))?;
    let error =
        register_carrier_definition(class, CarrierDefinition::new(slots_storage())).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Type);
    assert!(
        error
            .to_string()
            .contains("DefinedOnce already has a CarrierDefinition"),
        "{error}"
    );
    assert!(carrier_definition(class)
        .unwrap()
        .storage()
        .elementwise_fallback());

    // A dependent class needs a composite provider.
    let dependent = CarrierClass::mint("DependentNoComposite", ClassKind::Dependent);
    let error = register_carrier_definition(dependent, CarrierDefinition::new(slots_storage()))
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Type);
    assert!(error.to_string().contains("composite"), "{error}");
    assert!(!dependent.is_definition_backed());

    // One winner under a race.
    let raced = CarrierClass::mint("Raced", ClassKind::Independent);
    let barrier = Arc::new(Barrier::new(8));
    let winners: usize = (0..8)
        .map(|_| {
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                register_carrier_definition(raced, CarrierDefinition::new(slots_storage())).is_ok()
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|handle| usize::from(handle.join().unwrap()))
        .sum();
    assert_eq!(winners, 1);
    Ok(())
}

#[test]
fn failing_and_panicking_providers_publish_nothing() -> Result<()> {
    let class = define("Injected", true);
    let state = Slots::default();
    let mode = Arc::clone(&state.mode);
    let carrier = Carrier::create(class, state, 2, DType::FLOAT32, true)?;
    carrier.set(0, Value::Float(1.5))?;
    assert_eq!(carrier.version(), 1);

    mode.store(FAIL, Ordering::SeqCst);
    let error = carrier.set(0, Value::Float(9.0)).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Memory);
    assert_eq!(error.to_string(), "memory error: device write failed");
    mode.store(OK, Ordering::SeqCst);
    assert_eq!((carrier.get(0)?, carrier.version()), (Value::Float(1.5), 1));

    mode.store(PANIC, Ordering::SeqCst);
    let error = carrier.set(0, Value::Float(9.0)).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime);
    assert!(matches!(error, Error::ProviderPanicked(_)), "{error:?}");
    assert!(
        error.to_string().contains("Injected")
            && error
                .to_string()
                .contains("panicked in write: device write exploded"),
        "{error}"
    );
    mode.store(OK, Ordering::SeqCst);
    assert_eq!((carrier.get(0)?, carrier.version()), (Value::Float(1.5), 1));

    // A moved-into destination whose provider fails keeps its contents and version.
    let source = filled(define("InjectedSource", true), &[7.0, 8.0])?;
    let tensor = Tensor::new(source.clone(), 0, layout("2:1"))?;
    mode.store(PANIC, Ordering::SeqCst);
    assert_eq!(
        move_to(&tensor, &carrier).unwrap_err().kind(),
        ErrorKind::Runtime
    );
    mode.store(OK, Ordering::SeqCst);
    assert_eq!(
        (values(&carrier)?, carrier.version()),
        (floats(&[1.5, 0.0]), 1)
    );
    assert!(!source.is_released());

    // A read the dtype refuses is a Type error.
    mode.store(WRONG_TYPE, Ordering::SeqCst);
    let error = carrier.get(1).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Type);
    assert!(
        error.to_string().contains("Float32 does not accept"),
        "{error}"
    );
    mode.store(OK, Ordering::SeqCst);

    // The framework checks index and mutability before calling the provider.
    assert_eq!(
        carrier.set(2, Value::Float(0.0)).unwrap_err().kind(),
        ErrorKind::Index
    );
    let frozen = Carrier::create(class, Slots::default(), 1, DType::FLOAT32, false)?;
    assert_eq!(
        frozen.set(0, Value::Float(1.0)).unwrap_err().kind(),
        ErrorKind::Runtime
    );
    Ok(())
}

#[test]
fn elementwise_fallback_needs_both_definitions_to_opt_in() -> Result<()> {
    let opted = define("OptedIn", true);
    let also_opted = define("AlsoOptedIn", true);
    let declined = define("Declined", false);

    let source = filled(opted, &[1.0, 2.0])?;
    let tensor = Tensor::new(source.clone(), 0, layout("2:1"))?;
    for (destination, ends) in [
        (
            declined,
            "OptedIn permits elementwise fallback, Declined does not permit elementwise fallback",
        ),
        (
            CarrierClass::of::<Cpu>(),
            "OptedIn permits elementwise fallback, CPU is definition-free",
        ),
    ] {
        let target = if destination == declined {
            Carrier::create(declined, Slots::default(), 2, DType::FLOAT32, true)?
        } else {
            Cpu::carrier(2, DType::FLOAT32, true, false)?
        };
        let error = move_to(&tensor, &target).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::NotImplemented);
        let message = error.to_string();
        assert!(
            message.contains(&format!("no move route from OptedIn to {destination}")),
            "{message}"
        );
        assert!(message.contains(ends), "{message}");
        assert_eq!(target.version(), 0);
        assert!(!source.is_released());
    }

    let target = Carrier::create(also_opted, Slots::default(), 2, DType::FLOAT32, true)?;
    let moved = move_to(&tensor, &target)?;
    assert_eq!(moved.to_values()?, floats(&[1.0, 2.0]));
    assert_eq!(target.version(), 1);
    assert!(source.is_released());
    Ok(())
}

#[test]
fn downcast_answers_for_the_exact_body_type_only() -> Result<()> {
    use strideweave::carriers::FileBacked;
    let cpu = Cpu::from_f32(&[1.0, 2.0], true)?;
    let large = Cpu::carrier(100, DType::FLOAT32, true, false)?;
    let generic = Generic::carrier(&floats(&[1.0]), DType::FLOAT32, true)?;
    let defined = filled(define("DowncastProbe", false), &[1.0, 2.0])?;
    for carrier in [&cpu, &large] {
        assert_eq!(
            carrier.downcast_ref::<Cpu>().map(|c| c.pointer().is_some()),
            Some(true)
        );
        assert!(carrier.downcast_ref::<Generic>().is_none());
    }
    assert!(generic.downcast_ref::<Generic>().is_some());
    assert!(generic.downcast_ref::<Cpu>().is_none());
    // A definition-backed body is the framework's, never one of the shipped bodies.
    assert!(defined.downcast_ref::<Cpu>().is_none());
    assert!(defined.downcast_ref::<Generic>().is_none());
    assert!(defined.downcast_ref::<FileBacked>().is_none());
    assert_eq!(values(&defined)?, floats(&[1.0, 2.0]));
    Ok(())
}

#[test]
fn a_provider_sets_up_the_contents_of_factory_allocations_itself() -> Result<()> {
    use extension::AllocationContents;
    let seen: Arc<Mutex<Vec<AllocationContents>>> = Arc::default();
    let record = Arc::clone(&seen);
    let class = CarrierClass::mint("ContentsAware", ClassKind::Independent);
    let storage = slots_storage().with_allocation_contents(
        move |state: &mut Slots, contents: AllocationContents| {
            record.lock().unwrap().push(contents);
            match contents {
                // A marker value the framework's zero fill would have overwritten.
                AllocationContents::Zeroed => state.values.fill(Value::Float(0.0)),
                AllocationContents::Unspecified => state.values.fill(Value::Float(-1.0)),
            }
            if state.values.len() == 3 {
                return Err(Error::Memory("cannot set up 3 slots".into()));
            }
            Ok(())
        },
    );
    register_carrier_definition(class, CarrierDefinition::new(storage))?;
    let prototype = filled(class, &[5.0, 6.0])?;
    let empty = prototype.allocate_like(2, true, None, true)?;
    assert_eq!(values(&empty)?, floats(&[-1.0, -1.0]));
    let zeroed = prototype.allocate_like(2, true, None, false)?;
    assert_eq!(values(&zeroed)?, floats(&[0.0, 0.0]));
    assert_eq!(zeroed.version(), 0);
    // `new_like` states its values itself: the callback is not asked.
    let made = prototype.new_like(&floats(&[1.0]), true, None)?;
    assert_eq!(values(&made)?, floats(&[1.0]));
    assert_eq!(
        *seen.lock().unwrap(),
        vec![AllocationContents::Unspecified, AllocationContents::Zeroed]
    );
    // A failing callback fails the factory, with nothing returned.
    let error = prototype.allocate_like(3, true, None, false).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Memory);
    assert!(
        error.to_string().contains("cannot set up 3 slots"),
        "{error}"
    );
    assert_eq!(prototype.get(1)?, Value::Float(6.0));
    Ok(())
}

/// The carrier a `CallingBack` tier reaches back into from its callbacks.
static COMPOSER: std::sync::OnceLock<Carrier> = std::sync::OnceLock::new();

/// A tier whose `write` callback, and `read` of slot 1, first read slot 0 of [`COMPOSER`].
#[derive(Default)]
struct CallingBack {
    values: Vec<f32>,
}

/// A carrier composing one tier: its reads and writes go to the tier.
#[derive(Default)]
struct Composing {
    tier: Option<Carrier>,
}

#[test]
fn a_callback_reaching_its_own_carrier_is_refused_rather_than_deadlocking() -> Result<()> {
    let tier_class = CarrierClass::mint("CallingBackTier", ClassKind::Independent);
    let composer_class = CarrierClass::mint("ComposingCarrier", ClassKind::Independent);
    let peek = || COMPOSER.get().map_or(Ok(Value::Float(0.0)), |c| c.get(0));
    register_carrier_definition(
        tier_class,
        CarrierDefinition::new(StorageProvider::new(
            |_: &CallingBack, dtype| dtype == DType::FLOAT32,
            |state: &CallingBack| state.values.len() as i64,
            |state: &mut CallingBack, slots, _| {
                state.values = vec![0.0; slots];
                Ok(())
            },
            |_: &mut CallingBack| Ok(()),
            move |state: &CallingBack, index| {
                // Reading slot 1 reads the composer's slot 0 (which reads no further).
                if index == 1 {
                    peek()?;
                }
                Ok(Value::Float(f64::from(state.values[index])))
            },
            move |state: &mut CallingBack, index, value| {
                peek()?;
                state.values[index] = value.as_f64().unwrap_or(0.0) as f32;
                Ok(())
            },
        )),
    )?;
    register_carrier_definition(
        composer_class,
        CarrierDefinition::new(StorageProvider::new(
            |_: &Composing, dtype| dtype == DType::FLOAT32,
            |state: &Composing| state.tier.as_ref().map_or(0, |t| t.size() as i64),
            |_: &mut Composing, _, _| Ok(()),
            |_: &mut Composing| Ok(()),
            |state: &Composing, index| match &state.tier {
                Some(tier) => tier.get(index),
                None => Err(Error::Runtime("no tier".into())),
            },
            |state: &mut Composing, index, value| match &state.tier {
                Some(tier) => tier.set(index, value),
                None => Err(Error::Runtime("no tier".into())),
            },
        )),
    )?;
    let tier = Carrier::create(tier_class, CallingBack::default(), 2, DType::FLOAT32, true)?;
    tier.set(0, Value::Float(1.5))?;
    let composer = Carrier::create(
        composer_class,
        Composing {
            tier: Some(tier.clone()),
        },
        2,
        DType::FLOAT32,
        true,
    )?;
    assert!(COMPOSER.set(composer.clone()).is_ok());

    // Run where a deadlock would show as a timeout rather than a hung test.
    let (sent, received) = std::sync::mpsc::channel();
    let worker = composer.clone();
    std::thread::spawn(move || {
        let read = worker.get(1);
        let write = worker.set(1, Value::Float(7.0));
        let _ = sent.send((read, write));
    });
    let (read, write) = received
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("the accesses finished instead of deadlocking");
    // A read under a read is fine: the tier's callback reads the composer again.
    assert_eq!(read?, Value::Float(0.0));
    // A write holds the composer exclusively; the tier's callback reaching back is refused.
    let error = write.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime);
    assert_eq!(
        error.to_string(),
        "runtime error: the ComposingCarrier carrier was accessed again on this thread while \
         its storage provider writes it (a provider callback, or a carrier it reached, called \
         back into the same carrier); the access is refused rather than waiting for itself"
    );
    assert_eq!(composer.get(1)?, Value::Float(0.0));
    assert_eq!((composer.version(), tier.version()), (0, 1));
    // The carrier is usable afterwards: no hold was left behind.
    assert_eq!(composer.get(0)?, Value::Float(1.5));
    Ok(())
}

#[test]
fn provider_state_is_read_as_its_own_type_only() -> Result<()> {
    let class = define("test.StateReader", false);
    let carrier = filled(class, &[1.5, 2.5])?;
    let read = carrier.with_provider_state(|state: &Slots| state.values.clone())?;
    assert_eq!(read, floats(&[1.5, 2.5]));

    let wrong = carrier
        .with_provider_state(|_: &String| ())
        .expect_err("a String is not the provider's state type");
    assert_eq!(wrong.kind(), ErrorKind::Type);
    assert!(
        wrong.to_string().contains(&format!(
            "the storage provider of {class} keeps {} state, not {}",
            std::any::type_name::<Slots>(),
            std::any::type_name::<String>()
        )),
        "{wrong}"
    );

    let cpu = Cpu::from_f32(&[1.0], true)?;
    let free = cpu
        .with_provider_state(|_: &Slots| ())
        .expect_err("a definition-free carrier has no provider state");
    assert_eq!(free.kind(), ErrorKind::Type);
    assert!(
        free.to_string()
            .contains("carrier is definition-free: it has no provider state"),
        "{free}"
    );
    Ok(())
}
