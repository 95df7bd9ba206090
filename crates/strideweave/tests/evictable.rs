//! Evictable (docs/tiers.md, Evictable; docs/carriers.md,
//! Worked examples items 10–12): construction order, ownership of
//! the tiers, residency, transitions, capability snapshot, lowered dispatch and autograd.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::floats;
use strideweave::carrier::CarrierClass;
use strideweave::carriers::{Cpu, Evictable, FileBacked, Generic};
use strideweave::movement::{
    register_move_operation, ElementwiseMoveOperation, MoveOperation, MoveTarget,
};
use strideweave::{ops, Carrier, DType, Error, ErrorKind, Result, Shape, Tensor, Value};

fn generic(values: &[f64]) -> Carrier {
    Generic::carrier(&floats(values), DType::FLOAT32, true).unwrap()
}

fn values(carrier: &Carrier) -> Vec<Value> {
    (0..carrier.size())
        .map(|i| carrier.get(i).unwrap())
        .collect()
}

fn tensor(carrier: &Carrier) -> Tensor {
    Tensor::compact(carrier.clone(), Shape::new(carrier.size()).unwrap()).unwrap()
}

fn expect_err<T: std::fmt::Debug>(result: Result<T>, kind: ErrorKind, needle: &str) -> Error {
    let error = result.expect_err("expected an error");
    assert_eq!(error.kind(), kind, "{error}");
    assert!(
        error.to_string().contains(needle),
        "'{error}' should mention '{needle}'"
    );
    error
}

#[test]
fn item_10_generic_tiers_ownership_versions_and_residency() {
    let primary = generic(&[1.0, 2.0, 3.0]);
    let secondary = generic(&[]);
    let e = Evictable::carrier(&primary, &secondary).unwrap();
    assert_eq!((e.size(), e.dtype(), e.version()), (3, DType::FLOAT32, 0));
    assert_eq!(e.class().name(), "Evictable");
    assert!(e.is_mutable());

    // An alias of a tier reads but does not write.
    assert!(primary.is_owned() && secondary.is_owned());
    assert!(!primary.is_mutable());
    expect_err(
        primary.set(0, Value::Float(9.0)),
        ErrorKind::Runtime,
        "owned",
    );
    expect_err(secondary.release(), ErrorKind::Runtime, "owned");
    assert_eq!(primary.get(1).unwrap(), Value::Float(2.0));

    // A write through the Evictable lands in the primary and bumps the wrapper by one.
    e.set(1, Value::Float(5.0)).unwrap();
    assert_eq!(e.version(), 1);
    assert_eq!(primary.get(1).unwrap(), Value::Float(5.0));

    // Evicted: reads and writes ask for promote(), the version stays.
    Evictable::evict(&e).unwrap();
    assert!(Evictable::is_evicted(&e).unwrap());
    assert!(primary.is_released());
    expect_err(e.get(0), ErrorKind::Runtime, "call promote() first");
    expect_err(e.set(0, Value::Float(1.0)), ErrorKind::Runtime, "promote");
    assert_eq!(e.version(), 1);
    Evictable::evict(&e).unwrap(); // a no-op

    // Promoted: the same values, the same version.
    Evictable::promote(&e).unwrap();
    Evictable::promote(&e).unwrap(); // a no-op
    assert!(!Evictable::is_evicted(&e).unwrap());
    assert_eq!(values(&e), floats(&[1.0, 5.0, 3.0]));
    assert_eq!(e.version(), 1);
    assert!(!Evictable::primary(&e).unwrap().same_as(&primary));
}

#[test]
fn item_11_construction_checks_in_order_and_rolls_back() {
    let tier = generic(&[1.0]);
    expect_err(Evictable::carrier(&tier, &tier), ErrorKind::Value, "same");
    expect_err(
        Evictable::carrier(&generic(&[]), &generic(&[])),
        ErrorKind::Value,
        "empty",
    );

    let primary = generic(&[1.0, 2.0]);
    let ints = Generic::carrier(&[Value::Int(1)], DType::INT32, true).unwrap();
    expect_err(
        Evictable::carrier(&primary, &ints),
        ErrorKind::Type,
        "dtype",
    );
    assert!(!primary.is_owned() && !ints.is_owned());
    primary.set(0, Value::Float(7.0)).unwrap();

    let immutable = Generic::carrier(&floats(&[0.0]), DType::FLOAT32, false).unwrap();
    expect_err(
        Evictable::carrier(&primary, &immutable),
        ErrorKind::Runtime,
        "mutable",
    );
    assert!(!primary.is_owned());

    let owned = generic(&[1.0]);
    let token = owned.claim_ownership().unwrap();
    expect_err(
        Evictable::carrier(&primary, &owned),
        ErrorKind::Runtime,
        "owned",
    );
    expect_err(
        Evictable::carrier(&owned, &primary),
        ErrorKind::Runtime,
        "owned",
    );
    assert!(!primary.is_owned());
    drop(token);

    let released = generic(&[1.0]);
    released.release().unwrap();
    expect_err(
        Evictable::carrier(&primary, &released),
        ErrorKind::Runtime,
        "released",
    );
    // Released is checked before owned.
    let token = primary.claim_ownership().unwrap();
    expect_err(
        Evictable::carrier(&primary, &released),
        ErrorKind::Runtime,
        "released",
    );
    drop(token);
    assert!(Evictable::carrier(&primary, &owned).is_ok());
}

#[test]
fn item_12_cpu_over_file_backed_snapshot_and_fresh_secondary() {
    let primary = Cpu::from_f32(&[1.0, 2.0, 3.0], true).unwrap();
    let secondary = FileBacked::carrier(None, DType::FLOAT32, true).unwrap();
    let e = Evictable::carrier(&primary, &secondary).unwrap();

    // FileBacked cannot store Bool, so the snapshot keeps no `eq` plan.
    assert!(e.supports_storage_dtype(DType::FLOAT32).unwrap());
    assert!(!e.supports_storage_dtype(DType::BOOL).unwrap());
    let caps = e.capabilities();
    assert!(!caps.is_empty());
    assert!(caps.iter().all(|c| c.plan().output() != DType::BOOL));
    assert!(caps.iter().all(|c| c.operation() != "eq"));
    let t = tensor(&e);
    let error = expect_err(
        ops::eq(&t, &t),
        ErrorKind::NotImplemented,
        "Evictable declares no operation-plan capability for 'eq'",
    );
    assert!(matches!(error, Error::UnsupportedOperationPlan(_)));

    // A size-0 secondary gets a fresh tier, and the old one is released.
    Evictable::evict(&e).unwrap();
    let fresh = Evictable::secondary(&e).unwrap();
    assert!(!fresh.same_as(&secondary));
    assert!(secondary.is_released() && !secondary.is_owned());
    assert!(fresh.is_owned() && fresh.size() >= 3);
    assert_eq!(fresh.class(), secondary.class());
    Evictable::promote(&e).unwrap();
    assert_eq!(values(&e), floats(&[1.0, 2.0, 3.0]));
    assert_eq!(e.version(), 0);
}

struct EvictRoute;

/// Fails the next copy when armed, otherwise copies elementwise.
struct FailingMove(Arc<AtomicBool>);

impl MoveOperation for FailingMove {
    fn name(&self) -> &str {
        "failing"
    }
    fn copy(&self, source: &Tensor, target: &MoveTarget<'_>, count: usize) -> Result<()> {
        if self.0.swap(false, Ordering::SeqCst) {
            return Err(Error::Runtime("injected move failure".into()));
        }
        ElementwiseMoveOperation.copy(source, target, count)
    }
}

#[test]
fn item_12_failing_move_changes_nothing_and_is_retryable() {
    type Secondary = common::Flaky<EvictRoute>;
    let armed = Arc::new(AtomicBool::new(false));
    register_move_operation(
        CarrierClass::of::<Cpu>(),
        CarrierClass::of::<Secondary>(),
        Arc::new(FailingMove(Arc::clone(&armed))),
    )
    .unwrap();

    // Reusing a big enough secondary.
    let primary = Cpu::from_f32(&[1.0, 2.0], true).unwrap();
    let secondary = Secondary::carrier(&[0.0, 0.0, 0.0], true);
    let e = Evictable::carrier(&primary, &secondary).unwrap();
    armed.store(true, Ordering::SeqCst);
    expect_err(
        Evictable::evict(&e),
        ErrorKind::Runtime,
        "injected move failure",
    );
    assert!(!Evictable::is_evicted(&e).unwrap());
    assert!(!primary.is_released() && primary.is_owned());
    assert_eq!(values(&e), floats(&[1.0, 2.0]));
    assert_eq!(secondary.version(), 0);
    Evictable::evict(&e).unwrap();
    assert!(Evictable::secondary(&e).unwrap().same_as(&secondary));
    assert_eq!(secondary.get(1).unwrap(), Value::Float(2.0));

    // A size-0 secondary: the fresh tier of a failed attempt is dropped, not installed.
    let primary = Cpu::from_f32(&[4.0], true).unwrap();
    let empty = Secondary::carrier(&[], true);
    let e = Evictable::carrier(&primary, &empty).unwrap();
    armed.store(true, Ordering::SeqCst);
    expect_err(
        Evictable::evict(&e),
        ErrorKind::Runtime,
        "injected move failure",
    );
    assert!(Evictable::secondary(&e).unwrap().same_as(&empty));
    assert!(!empty.is_released() && !primary.is_released());
    Evictable::evict(&e).unwrap();
    assert!(empty.is_released());
    Evictable::promote(&e).unwrap();
    assert_eq!(values(&e), floats(&[4.0]));
}

#[test]
fn item_12_immutable_primary_release_and_drop() {
    let primary = Cpu::from_f32(&[1.0, 2.0], false).unwrap();
    let secondary = FileBacked::carrier(None, DType::FLOAT32, true).unwrap();
    let e = Evictable::carrier(&primary, &secondary).unwrap();
    assert!(!e.is_mutable());
    expect_err(e.set(0, Value::Float(3.0)), ErrorKind::Runtime, "immutable");
    Evictable::evict(&e).unwrap();
    Evictable::promote(&e).unwrap();
    assert!(!e.is_mutable());
    expect_err(e.set(0, Value::Float(3.0)), ErrorKind::Runtime, "immutable");
    assert_eq!(values(&e), floats(&[1.0, 2.0]));

    // Release: both tiers go, size 0, transitions refuse.
    let tiers = (
        Evictable::primary(&e).unwrap(),
        Evictable::secondary(&e).unwrap(),
    );
    e.release().unwrap();
    assert_eq!(e.size(), 0);
    assert!(tiers.0.is_released() && tiers.1.is_released());
    expect_err(Evictable::evict(&e), ErrorKind::Runtime, "released");
    expect_err(Evictable::promote(&e), ErrorKind::Runtime, "released");
    expect_err(e.get(0), ErrorKind::Runtime, "released");
    let error = Evictable::is_evicted(&e).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime);
    assert_eq!(
        error.to_string(),
        "runtime error: cannot ask whether an Evictable is evicted: Evictable is released"
    );

    // Drop: the tiers are given back, live and writable.
    let primary = generic(&[1.0]);
    let secondary = generic(&[]);
    let e = Evictable::carrier(&primary, &secondary).unwrap();
    drop(e);
    assert!(!primary.is_owned() && !secondary.is_owned());
    assert!(!primary.is_released() && !secondary.is_released());
    primary.set(0, Value::Float(2.0)).unwrap();

    // Transitions on another class are refused.
    expect_err(Evictable::evict(&primary), ErrorKind::Type, "Evictable");
}

#[test]
fn item_12_operands_must_share_tier_classes_and_be_promoted() {
    let a = Evictable::carrier(&generic(&[1.0]), &generic(&[])).unwrap();
    let b = Evictable::carrier(&generic(&[2.0]), &Cpu::from_f32(&[], true).unwrap()).unwrap();
    expect_err(
        ops::add(&tensor(&a), &tensor(&b)),
        ErrorKind::Type,
        "same tier classes",
    );
    expect_err(
        ops::add(&tensor(&a), &tensor(&generic(&[1.0]))),
        ErrorKind::Type,
        "carriers must match",
    );
    let c = Evictable::carrier(&generic(&[3.0]), &generic(&[])).unwrap();
    Evictable::evict(&c).unwrap();
    expect_err(
        ops::add(&tensor(&a), &tensor(&c)),
        ErrorKind::Runtime,
        "call promote() first",
    );
    expect_err(e_dispatch(&a, "nope"), ErrorKind::NotImplemented, "nope");
}

fn e_dispatch(carrier: &Carrier, name: &str) -> Result<()> {
    carrier.dispatch_op(name).map(|_| ())
}

#[test]
fn add_of_evictables_is_an_evictable_with_one_gradient_node() {
    let a = Evictable::carrier(&generic(&[1.0, 2.0]), &generic(&[])).unwrap();
    let b = Evictable::carrier(&generic(&[10.0, 20.0]), &generic(&[])).unwrap();
    let x = tensor(&a);
    let y = tensor(&b);
    x.set_requires_grad(true).unwrap();

    let op = a.dispatch_op("add").unwrap();
    assert_eq!(op.name(), Some("add"));
    assert_eq!(op.carrier_class(), Some(a.class()));

    let z = ops::add(&x, &y).unwrap();
    assert_eq!(z.carrier().class(), a.class());
    assert_eq!(z.to_values().unwrap(), floats(&[11.0, 22.0]));
    let inner = Evictable::primary(z.carrier()).unwrap();
    assert_eq!(inner.class(), CarrierClass::of::<Generic>());
    assert!(inner.is_owned());
    assert_eq!(Evictable::secondary(z.carrier()).unwrap().size(), 0);

    let node = z.grad_fn().expect("a recorded node");
    assert_eq!(node.name(), "add");
    assert_eq!(node.inputs().len(), 2);
    assert!(node.inputs()[0].carrier().same_as(&a));
    assert!(node.inputs()[1].carrier().same_as(&b));

    let ones = Evictable::carrier(&generic(&[1.0, 1.0]), &generic(&[])).unwrap();
    z.backward(Some(&tensor(&ones)), false).unwrap();
    let grad = x.grad().expect("a gradient");
    assert_eq!(grad.carrier().class(), a.class());
    assert_eq!(grad.to_values().unwrap(), floats(&[1.0, 1.0]));
    assert!(y.grad().is_none());
}

#[test]
fn factories_build_evictables_over_the_tier_factories() {
    let e = Evictable::carrier(
        &Cpu::from_f32(&[1.0], true).unwrap(),
        &FileBacked::carrier(None, DType::FLOAT32, true).unwrap(),
    )
    .unwrap();
    let made = e.new_like(&floats(&[5.0, 6.0]), true, None).unwrap();
    assert_eq!(made.class(), e.class());
    assert_eq!(values(&made), floats(&[5.0, 6.0]));
    assert_eq!(
        Evictable::primary(&made).unwrap().class(),
        CarrierClass::of::<Cpu>()
    );
    let secondary = Evictable::secondary(&made).unwrap();
    assert_eq!(
        (secondary.class(), secondary.size()),
        (CarrierClass::of::<FileBacked>(), 0)
    );
    let zeros = e.allocate_like(3, true, None, false).unwrap();
    assert_eq!(values(&zeros), floats(&[0.0, 0.0, 0.0]));
    expect_err(
        e.new_like(&[Value::Bool(true)], true, Some(DType::BOOL)),
        ErrorKind::Value,
        "Bool",
    );
    assert_eq!(made.capabilities().len(), e.capabilities().len());
}
