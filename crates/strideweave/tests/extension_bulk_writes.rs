//! Bulk destination writes of a transfer route (`TransferRequest::write_f32s` and
//! `write_i32s`) and the bulk CPU reads (`Cpu::with_f32`, `Cpu::with_i32`) that let a carrier
//! extension move a device buffer without a `Value` per slot (carrier-extension spec,
//! "Transfer routes expose exact preparation and submission").

use std::sync::{Arc, Mutex};

use strideweave::carrier::{Carrier, CarrierClass, ClassKind};
use strideweave::carriers::extension::{
    read_f32s, read_i32s, PreparedTransfer, Submitted, TransferPreparation, TransferProvider,
    TransferRequest,
};
use strideweave::carriers::{Cpu, FileBacked};
use strideweave::movement::move_to;
use strideweave::{
    register_carrier_definition, CarrierDefinition, DType, ErrorKind, Result, Shape,
    StorageProvider, Tensor, TransferRoute, Value,
};

/// Provider-owned slots of the test class, as raw 32-bit words.
#[derive(Clone, Default)]
struct Words {
    words: Vec<u32>,
}

fn storage() -> StorageProvider {
    StorageProvider::new(
        |_: &Words, dtype| dtype == DType::FLOAT32 || dtype == DType::INT32,
        |state: &Words| state.words.len() as i64,
        |state: &mut Words, slots, _dtype| {
            state.words = vec![0; slots];
            Ok(())
        },
        |state: &mut Words| {
            state.words.clear();
            Ok(())
        },
        |state: &Words, index| Ok(Value::Int(i64::from(state.words[index]))),
        |state: &mut Words, index, value| {
            state.words[index] = match value {
                Value::Float(x) => (x as f32).to_bits(),
                Value::Int(x) => x as i32 as u32,
                _ => 0,
            };
            Ok(())
        },
    )
}

/// What the route does with its request, so one test can try every way of writing.
type Submit = dyn Fn(&TransferRequest) -> Result<()> + Send + Sync;

/// A fresh class whose route to `destination` runs `submit`; `prepare_probe` records the
/// outcome of a bulk write attempted during preparation.
fn define(
    destination: CarrierClass,
    submit: Arc<Submit>,
    prepare_probe: Arc<Mutex<Option<ErrorKind>>>,
) -> Result<CarrierClass> {
    let class = CarrierClass::mint("BulkSource", ClassKind::Independent);
    let provider = TransferProvider::new(move |request| {
        *prepare_probe.lock().unwrap() = request.write_f32s(0, &[1.0]).err().map(|e| e.kind());
        let request = request.clone();
        let submit = Arc::clone(&submit);
        Ok(TransferPreparation::Transfer(PreparedTransfer::new(
            move || {
                submit(&request)?;
                Ok(Submitted::Ready(()))
            },
        )))
    });
    register_carrier_definition(
        class,
        CarrierDefinition::new(storage()).with_transfers(vec![TransferRoute::new(
            class,
            destination,
            "bulk",
            provider,
        )?])?,
    )?;
    Ok(class)
}

fn source(class: CarrierClass, slots: usize, dtype: DType) -> Result<Tensor> {
    let carrier = Carrier::create(class, Words::default(), slots, dtype, true)?;
    Tensor::compact(carrier, Shape::new(slots)?)
}

fn no_probe() -> Arc<Mutex<Option<ErrorKind>>> {
    Arc::new(Mutex::new(None))
}

#[test]
fn a_route_writes_float32_slots_to_cpu_in_bulk_and_the_move_commits_once() -> Result<()> {
    let probe = no_probe();
    let class = define(
        CarrierClass::of::<Cpu>(),
        Arc::new(|request: &TransferRequest| request.write_f32s(1, &[2.5, -3.0, 4.0])),
        Arc::clone(&probe),
    )?;
    let moved = move_to(
        &source(class, 4, DType::FLOAT32)?,
        &Cpu::carrier(4, DType::FLOAT32, true, false)?,
    )?;
    assert_eq!(
        moved.to_values()?,
        [0.0, 2.5, -3.0, 4.0].map(Value::Float).to_vec()
    );
    assert_eq!(moved.version(), 1);
    assert_eq!(*probe.lock().unwrap(), Some(ErrorKind::Runtime));
    Ok(())
}

#[test]
fn a_route_writes_int32_slots_in_bulk_to_cpu_and_slot_by_slot_elsewhere() -> Result<()> {
    for destination in [
        Cpu::carrier(3, DType::INT32, true, false)?,
        FileBacked::carrier(None, DType::INT32, true)?,
    ] {
        let class = define(
            destination.class(),
            Arc::new(|request: &TransferRequest| request.write_i32s(0, &[7, -8, i32::MIN])),
            no_probe(),
        )?;
        let moved = move_to(&source(class, 3, DType::INT32)?, &destination)?;
        assert_eq!(
            moved.to_values()?,
            [7, -8, i64::from(i32::MIN)].map(Value::Int).to_vec()
        );
        assert_eq!(destination.version(), 1);
    }
    Ok(())
}

#[test]
fn a_bulk_write_out_of_range_or_of_another_dtype_fails_the_move_with_nothing_published(
) -> Result<()> {
    let cases: [(Arc<Submit>, ErrorKind, &str); 3] = [
        (
            Arc::new(|request: &TransferRequest| request.write_f32s(2, &[1.0, 2.0, 3.0])),
            ErrorKind::Index,
            "move writes slots 2..2+3 of a CPU carrier of size 4",
        ),
        (
            Arc::new(|request: &TransferRequest| request.write_f32s(usize::MAX, &[1.0, 2.0])),
            ErrorKind::Index,
            "of a CPU carrier of size 4",
        ),
        (
            Arc::new(|request: &TransferRequest| request.write_i32s(0, &[1])),
            ErrorKind::Type,
            "move writes Int32 slots into a CPU carrier of dtype Float32",
        ),
    ];
    for (submit, kind, message) in cases {
        let class = define(CarrierClass::of::<Cpu>(), submit, no_probe())?;
        let tensor = source(class, 4, DType::FLOAT32)?;
        let destination = Cpu::from_f32(&[9.0; 4], true)?;
        let error = move_to(&tensor, &destination).unwrap_err();
        assert_eq!(error.kind(), kind, "{error}");
        assert!(error.to_string().contains(message), "{error}");
        assert_eq!(destination.version(), 0);
        assert_eq!(destination.get(2)?, Value::Float(9.0));
        assert!(!tensor.carrier().is_released());
        assert_eq!(tensor.version(), 0);
    }
    Ok(())
}

#[test]
fn bulk_reads_see_the_slots_and_refuse_another_dtype_a_bad_range_or_a_released_carrier(
) -> Result<()> {
    let floats = Cpu::from_f32(&[1.0, -2.0, 3.5, 8.0], true)?;
    assert_eq!(read_f32s(&floats, 1, 2)?, [-2.0, 3.5]);
    let error = read_i32s(&floats, 0, 1).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Type);
    assert_eq!(
        error.to_string(),
        "type error: a bulk Int32 read of a CPU carrier of dtype Float32"
    );
    let error = read_f32s(&floats, 3, 2).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Index);
    assert!(error.to_string().contains("slots 3..3+2"), "{error}");
    let on_file = move_to(
        &Tensor::compact(Cpu::from_i32(&[0, 6, -9], true)?, Shape::new(3)?)?,
        &FileBacked::carrier(None, DType::INT32, true)?,
    )?;
    assert_eq!(read_i32s(on_file.carrier(), 1, 2)?, [6, -9]);
    let ints = Cpu::from_i32(&[4, -5], true)?;
    assert_eq!(read_i32s(&ints, 0, 2)?, [4, -5]);
    ints.release()?;
    assert_eq!(
        read_i32s(&ints, 0, 2).unwrap_err().kind(),
        ErrorKind::Runtime
    );
    Ok(())
}
