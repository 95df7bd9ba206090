//! The blocking move (docs/movement.md, Moves and Routes): check order,
//! routing by exact class pair, and failure atomicity under injected failures.

mod common;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use common::floats;

/// The Flaky class of the tests that register no route.
type Flaky = common::Flaky<()>;
use strideweave::carrier::CarrierClass;
use strideweave::carriers::Generic;
use strideweave::movement::{
    move_to, register_move_operation, registered_move_operation, unregister_move_operation,
    ElementwiseMoveOperation, MoveOperation, MoveTarget,
};
use strideweave::{DType, Error, ErrorKind, Layout, Result, Tensor, Value};

fn layout(text: &str) -> Layout {
    text.parse().expect("test layout")
}

fn generic(values: &[f64]) -> strideweave::Carrier {
    Generic::carrier(&floats(values), DType::FLOAT32, true).expect("generic carrier")
}

#[test]
fn move_copies_releases_the_source_and_keeps_the_layout() {
    let source = generic(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let t = Tensor::new(source.clone(), 1, layout("(2,3):(1,2)")).unwrap();
    let destination = Generic::carrier(&floats(&[9.0; 6]), DType::FLOAT32, true).unwrap();
    let moved = move_to(&t, &destination).unwrap();
    assert!(moved.carrier().same_as(&destination));
    assert_eq!((moved.offset(), moved.layout()), (0, t.layout()));
    assert_eq!(
        moved.to_values().unwrap(),
        floats(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    );
    assert!(source.is_released());
    assert_eq!(
        destination.version(),
        1,
        "the move is one write of the destination"
    );
}

#[test]
fn check_order_source_then_destination_then_dtype_then_capacity() {
    let source = generic(&[1.0, 2.0]);
    let t = Tensor::new(source.clone(), 0, layout("2:1")).unwrap();

    let same = move_to(&t, &source).unwrap_err();
    assert_eq!(same.kind(), ErrorKind::Value);
    assert!(same.to_string().contains("its own"));

    let released = generic(&[0.0, 0.0]);
    released.release().unwrap();
    assert_eq!(
        move_to(&t, &released).unwrap_err().kind(),
        ErrorKind::Runtime
    );

    let immutable = Generic::carrier(&floats(&[0.0, 0.0]), DType::FLOAT32, false).unwrap();
    let error = move_to(&t, &immutable).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime);
    assert!(error.to_string().contains("immutable"));

    let ints = Generic::carrier(&[Value::Int(0), Value::Int(0)], DType::INT32, true).unwrap();
    assert_eq!(move_to(&t, &ints).unwrap_err().kind(), ErrorKind::Type);

    let small = generic(&[0.0]);
    let error = move_to(&t, &small).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value);
    assert!(error
        .to_string()
        .contains("has 1 slots but the tensor needs 2"));

    // A destination failing two checks reports the earlier one: released before dtype.
    let released_ints = Generic::carrier(&[Value::Int(0)], DType::INT32, true).unwrap();
    released_ints.release().unwrap();
    assert_eq!(
        move_to(&t, &released_ints).unwrap_err().kind(),
        ErrorKind::Runtime
    );

    // Nothing above touched the source.
    assert!(!source.is_released());
    assert_eq!(source.version(), 0);
    assert_eq!(t.to_values().unwrap(), floats(&[1.0, 2.0]));

    source.release().unwrap();
    let error = move_to(&t, &generic(&[0.0, 0.0])).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime);
}

#[test]
fn an_owned_source_cannot_move_until_its_owner_acts() {
    let source = generic(&[1.0, 2.0]);
    let t = Tensor::new(source.clone(), 0, layout("2:1")).unwrap();
    let token = source.claim_ownership().unwrap();
    let error = move_to(&t, &generic(&[0.0, 0.0])).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime);
    assert!(error.to_string().contains("owned"));
    let access = token.access().unwrap();
    let moved = move_to(&t, &generic(&[0.0, 0.0])).unwrap();
    assert_eq!(moved.to_values().unwrap(), floats(&[1.0, 2.0]));
    drop(access);
    assert!(source.is_released());
}

#[test]
fn an_empty_growable_destination_grows_to_exactly_cosize() {
    let t = Tensor::new(
        generic(&[0.0, 1.0, 2.0, 3.0, 4.0]),
        0,
        layout("(2,2):(1,3)"),
    )
    .unwrap();
    let destination = Flaky::growable();
    let moved = move_to(&t, &destination).unwrap();
    assert_eq!(destination.size(), 5);
    assert_eq!(moved.to_values().unwrap(), floats(&[0.0, 1.0, 3.0, 4.0]));
}

#[test]
fn a_failing_copy_changes_nothing_and_shrinks_a_grown_destination() {
    let source = generic(&[1.0, 2.0, 3.0]);
    let t = Tensor::new(source.clone(), 0, layout("3:1")).unwrap();
    let destination = Flaky::growable();
    Flaky::of(&destination)
        .fail_writes
        .store(true, Ordering::SeqCst);
    let error = move_to(&t, &destination).unwrap_err();
    assert_eq!(error.to_string(), "runtime error: injected write failure");
    assert_eq!(
        destination.size(),
        0,
        "the grown destination is shrunk back"
    );
    assert_eq!(destination.version(), 0);
    assert!(!source.is_released());
    assert_eq!(
        (source.version(), t.to_values().unwrap()),
        (0, floats(&[1.0, 2.0, 3.0]))
    );

    // The failure is retryable once the fault is gone.
    Flaky::of(&destination)
        .fail_writes
        .store(false, Ordering::SeqCst);
    let moved = move_to(&t, &destination).unwrap();
    assert_eq!(moved.to_values().unwrap(), floats(&[1.0, 2.0, 3.0]));
}

#[test]
fn a_failing_source_read_leaves_the_destination_unchanged() {
    let source = Flaky::carrier(&[1.0, 2.0], true);
    let t = Tensor::new(source.clone(), 0, layout("2:1")).unwrap();
    let destination = generic(&[7.0, 7.0]);
    Flaky::of(&source).fail_reads.store(true, Ordering::SeqCst);
    assert_eq!(
        move_to(&t, &destination).unwrap_err().kind(),
        ErrorKind::Runtime
    );
    assert_eq!(destination.version(), 0);
    assert_eq!(destination.get(0).unwrap(), Value::Float(7.0));
    assert!(!source.is_released());
}

/// A route that copies in reverse order and counts its calls, to show routing by exact pair.
struct Counting(std::sync::atomic::AtomicUsize);

impl MoveOperation for Counting {
    fn name(&self) -> &str {
        "counting"
    }
    fn copy(&self, source: &Tensor, target: &MoveTarget<'_>, element_count: usize) -> Result<()> {
        self.0.fetch_add(1, Ordering::SeqCst);
        for slot in (0..element_count).rev() {
            target.write(slot, source.carrier().get(source.offset() + slot)?)?;
        }
        Ok(())
    }
}

/// A route that always fails, for failure atomicity.
struct Failing;

impl MoveOperation for Failing {
    fn name(&self) -> &str {
        "failing"
    }
    fn copy(&self, _: &Tensor, _: &MoveTarget<'_>, _: usize) -> Result<()> {
        Err(Error::Io {
            context: "injected transfer fault".into(),
            source: Arc::new(std::io::Error::other("disk gone")),
        })
    }
}

/// Marks the Flaky class used by the routing tests.
struct Routed;
/// Marks the Flaky class used by the claim test.
struct Claimed;

#[test]
fn routes_are_keyed_by_the_exact_pair() {
    type Flaky = common::Flaky<Routed>;
    let flaky = CarrierClass::of::<Flaky>();
    let generic_class = CarrierClass::of::<Generic>();
    let counting = Arc::new(Counting(Default::default()));
    register_move_operation(flaky, generic_class, counting.clone()).unwrap();
    let duplicate =
        register_move_operation(flaky, generic_class, Arc::new(ElementwiseMoveOperation));
    assert_eq!(duplicate.unwrap_err().kind(), ErrorKind::Value);
    assert_eq!(
        registered_move_operation(flaky, generic_class)
            .unwrap()
            .name(),
        "counting"
    );
    assert!(registered_move_operation(generic_class, flaky).is_none());

    let t = Tensor::new(Flaky::carrier(&[1.0, 2.0], true), 0, layout("2:1")).unwrap();
    let moved = move_to(&t, &generic(&[0.0, 0.0])).unwrap();
    assert_eq!(moved.to_values().unwrap(), floats(&[1.0, 2.0]));
    assert_eq!(counting.0.load(Ordering::SeqCst), 1);

    unregister_move_operation(flaky, generic_class).unwrap();
    assert_eq!(
        unregister_move_operation(flaky, generic_class)
            .unwrap_err()
            .kind(),
        ErrorKind::Key
    );

    // A registered failing route: the source stays live and the destination untouched.
    register_move_operation(flaky, generic_class, Arc::new(Failing)).unwrap();
    let source = Flaky::carrier(&[3.0], true);
    let t = Tensor::new(source.clone(), 0, layout("1:1")).unwrap();
    let destination = generic(&[0.0]);
    let error = move_to(&t, &destination).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Io);
    assert!(!source.is_released());
    assert_eq!(
        (destination.version(), destination.get(0).unwrap()),
        (0, Value::Float(0.0))
    );
    unregister_move_operation(flaky, generic_class).unwrap();
}

#[test]
fn claimed_carriers_refuse_mutation_during_a_move() {
    type Flaky = common::Flaky<Claimed>;
    // A route that tries to write to and release the claimed source while copying.
    struct Meddling;
    impl MoveOperation for Meddling {
        fn name(&self) -> &str {
            "meddling"
        }
        fn copy(&self, source: &Tensor, target: &MoveTarget<'_>, n: usize) -> Result<()> {
            let write = source.carrier().set(0, Value::Float(9.0)).unwrap_err();
            assert!(
                write.to_string().contains("claimed by a pending move"),
                "{write}"
            );
            let release = source.carrier().release().unwrap_err();
            assert_eq!(release.kind(), ErrorKind::Runtime);
            let outsider = target.carrier().set(0, Value::Float(9.0)).unwrap_err();
            assert_eq!(outsider.kind(), ErrorKind::Runtime);
            ElementwiseMoveOperation.copy(source, target, n)
        }
    }
    let generic_class = CarrierClass::of::<Generic>();
    let flaky = CarrierClass::of::<Flaky>();
    register_move_operation(generic_class, flaky, Arc::new(Meddling)).unwrap();
    let t = Tensor::new(generic(&[4.0]), 0, layout("1:1")).unwrap();
    let moved = move_to(&t, &Flaky::carrier(&[0.0], true)).unwrap();
    assert_eq!(moved.get(&0.into()).unwrap(), Value::Float(4.0));
    unregister_move_operation(generic_class, flaky).unwrap();
}

#[test]
fn bulk_routes_round_trip_cpu_and_file_backed() {
    use strideweave::carriers::{Cpu, FileBacked};
    let values: Vec<Value> = (0..12).map(|i| Value::Float(i as f64 * 0.5)).collect();
    let cpu = Cpu::from_values(&values, DType::FLOAT32, true).unwrap();
    // Offset 2 and a layout with holes: slots 2..12 (cosize 10), 6 of them addressed.
    let t = Tensor::new(cpu.clone(), 2, layout("(2,3):(1,4)")).unwrap();
    let expected = t.to_values().unwrap();
    assert_eq!(
        registered_move_operation(CarrierClass::of::<Cpu>(), CarrierClass::of::<FileBacked>())
            .unwrap()
            .name(),
        "bulk CPU->FileBacked"
    );

    let file = FileBacked::carrier(None, DType::FLOAT32, true).unwrap();
    let on_file = move_to(&t, &file).unwrap();
    assert_eq!(
        file.size(),
        10,
        "an empty FileBacked grows to exactly cosize"
    );
    assert!(cpu.is_released());
    assert_eq!(on_file.to_values().unwrap(), expected);
    let path = file.downcast_ref::<FileBacked>().unwrap().path().unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 10 * 4);

    let back = Cpu::carrier(10, DType::FLOAT32, true, false).unwrap();
    let on_cpu = move_to(&on_file, &back).unwrap();
    assert_eq!(on_cpu.to_values().unwrap(), expected);
    assert_eq!((on_cpu.offset(), on_cpu.layout()), (0, t.layout()));
    assert!(file.is_released());
    assert!(!path.exists(), "releasing a FileBacked deletes its file");
}

#[test]
fn a_file_backed_destination_that_is_not_empty_does_not_grow() {
    use strideweave::carriers::{Cpu, FileBacked};
    let cpu = Cpu::from_values(&floats(&[1.0, 2.0, 3.0]), DType::FLOAT32, true).unwrap();
    let t = Tensor::new(cpu.clone(), 0, layout("3:1")).unwrap();
    let file = FileBacked::carrier(None, DType::FLOAT32, true).unwrap();
    move_to(
        &Tensor::new(
            Cpu::carrier(1, DType::FLOAT32, true, false).unwrap(),
            0,
            layout("1:1"),
        )
        .unwrap(),
        &file,
    )
    .unwrap();
    assert_eq!(file.size(), 1);
    let error = move_to(&t, &file).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value);
    assert!(!cpu.is_released());
}

// ---------------------------------------------------------------------------------------------
// copy_async / copy_to: the non-destructive sibling of a move.

#[test]
fn a_copy_keeps_the_source_live_and_unchanged() {
    use strideweave::movement::copy_to;
    let source = generic(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let t = Tensor::new(source.clone(), 1, layout("(2,3):(1,2)")).unwrap();
    let destination = Generic::carrier(&floats(&[9.0; 6]), DType::FLOAT32, true).unwrap();
    let copied = copy_to(&t, &destination).unwrap();
    assert!(copied.carrier().same_as(&destination));
    assert_eq!((copied.offset(), copied.layout()), (0, t.layout()));
    assert_eq!(
        copied.to_values().unwrap(),
        floats(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    );
    assert!(!source.is_released());
    assert_eq!((source.version(), destination.version()), (0, 1));
    // The source is unclaimed again: it can be written, copied and moved.
    source.set(0, Value::Float(-1.0)).unwrap();
    let again = copy_to(&t, &generic(&[0.0; 6])).unwrap();
    assert_eq!(again.to_values().unwrap(), copied.to_values().unwrap());
    move_to(&t, &generic(&[0.0; 6])).unwrap();
    assert!(source.is_released());
}

#[test]
fn a_copy_follows_the_move_check_order_but_may_read_an_owned_source() {
    use strideweave::movement::copy_to;
    let source = generic(&[1.0, 2.0]);
    let t = Tensor::new(source.clone(), 0, layout("2:1")).unwrap();
    // Onto its own carrier (Value), into another dtype (Type), too small (Value).
    let own = copy_to(&t, &source).unwrap_err();
    assert_eq!(own.kind(), ErrorKind::Value, "{own}");
    assert!(own
        .to_string()
        .contains("cannot copy a tensor onto its own"));
    let int = Generic::carrier(&[Value::Int(0); 2], DType::INT32, true).unwrap();
    assert_eq!(copy_to(&t, &int).unwrap_err().kind(), ErrorKind::Type);
    assert_eq!(
        copy_to(&t, &generic(&[0.0])).unwrap_err().kind(),
        ErrorKind::Value
    );
    // An owned source is only read, so any alias may copy it; it stays owned and live.
    let token = source.claim_ownership().unwrap();
    let copied = copy_to(&t, &generic(&[0.0, 0.0])).unwrap();
    assert_eq!(copied.to_values().unwrap(), floats(&[1.0, 2.0]));
    assert!(source.is_owned() && !source.is_released());
    drop(token);
    // A released source is refused (Runtime) and nothing is written.
    source.release().unwrap();
    let destination = generic(&[7.0, 7.0]);
    assert_eq!(
        copy_to(&t, &destination).unwrap_err().kind(),
        ErrorKind::Runtime
    );
    assert_eq!(destination.version(), 0);
}

#[test]
fn a_failing_copy_publishes_nothing_and_shrinks_a_grown_destination() {
    use strideweave::movement::copy_to;
    let source = Flaky::carrier(&[1.0, 2.0, 3.0], true);
    let t = Tensor::new(source.clone(), 0, layout("3:1")).unwrap();
    let destination = Flaky::growable();
    Flaky::of(&source).fail_reads.store(true, Ordering::SeqCst);
    let error = copy_to(&t, &destination).unwrap_err();
    assert_eq!(error.to_string(), "runtime error: injected read failure");
    assert_eq!(
        destination.size(),
        0,
        "the grown destination is shrunk back"
    );
    assert_eq!((source.version(), destination.version()), (0, 0));
    assert!(!source.is_released());
    // The source is not left claimed: it can be written and the copy retried.
    Flaky::of(&source).fail_reads.store(false, Ordering::SeqCst);
    source.set(0, Value::Float(5.0)).unwrap();
    let copied = copy_to(&t, &destination).unwrap();
    assert_eq!(copied.to_values().unwrap(), floats(&[5.0, 2.0, 3.0]));
    assert!(!source.is_released());
}

#[test]
fn a_copy_handle_is_idempotent_and_gives_back_its_claim() {
    use strideweave::movement::copy_async;
    let source = generic(&[1.0, 2.0]);
    let t = Tensor::new(source.clone(), 0, layout("2:1")).unwrap();
    let handle = copy_async(&t, &generic(&[0.0, 0.0])).unwrap();
    // Legacy routes copy inline: the handle is already terminal and the claim is gone.
    assert!(handle.done());
    let first = handle.wait().unwrap();
    assert!(first.same_as(&handle.wait().unwrap()));
    source.set(1, Value::Float(3.0)).unwrap();
    assert_eq!(first.to_values().unwrap(), floats(&[1.0, 2.0]));
}

#[test]
fn a_file_backed_region_copies_in_bulk_into_a_cpu_carrier() {
    use strideweave::carriers::{Cpu, FileBacked};
    use strideweave::movement::copy_to;
    let cpu = Cpu::from_f32(&(0..12).map(|i| i as f32).collect::<Vec<_>>(), true).unwrap();
    let file = FileBacked::carrier(None, DType::FLOAT32, true).unwrap();
    let on_disk = move_to(&Tensor::new(cpu, 0, layout("12:1")).unwrap(), &file).unwrap();
    // The 2×2 tile at logical (2, 1) of a 4×3 column-major tensor: slots 6, 7, 10, 11.
    let region = Tensor::new(file.clone(), 6, layout("(2,2):(1,4)")).unwrap();
    let staged = Cpu::from_f32(&[0.0; 6], true).unwrap();
    let copied = copy_to(&region, &staged).unwrap();
    assert_eq!(copied.to_values().unwrap(), floats(&[6.0, 7.0, 10.0, 11.0]));
    assert!(!file.is_released());
    assert_eq!(on_disk.to_values().unwrap().len(), 12);
    // A FileBacked region into a too-small CPU carrier fails before reading (Value).
    let small = Cpu::from_f32(&[0.0; 2], true).unwrap();
    assert_eq!(
        copy_to(&region, &small).unwrap_err().kind(),
        ErrorKind::Value
    );
}

#[test]
fn a_bulk_move_failing_midway_leaves_a_cpu_destination_as_it_was() {
    use strideweave::carriers::{Cpu, FileBacked};
    use strideweave::Shape;
    let file = FileBacked::carrier(None, DType::FLOAT32, true).unwrap();
    let cpu = Cpu::from_f32(&[1.0, 2.0, 3.0, 4.0], true).unwrap();
    let on_disk = move_to(
        &Tensor::compact(cpu, Shape::new(4).unwrap()).unwrap(),
        &file,
    )
    .unwrap();
    // Cut the file after its first slot: the bulk read copies 4 bytes, then fails.
    let path = file.downcast_ref::<FileBacked>().unwrap().path().unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(4)
        .unwrap();
    let destination = Cpu::from_f32(&[9.0, 8.0, 7.0, 6.0], true).unwrap();
    let error = move_to(&on_disk, &destination).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Io, "{error}");
    assert!(error.to_string().contains("FileBacked"), "{error}");
    // The bytes the read had already copied were put back; nothing was published.
    assert_eq!(
        Tensor::compact(destination.clone(), Shape::new(4).unwrap())
            .unwrap()
            .to_values()
            .unwrap(),
        floats(&[9.0, 8.0, 7.0, 6.0])
    );
    assert_eq!(destination.version(), 0);
    assert!(!file.is_released());
}
