//! Carrier examples 1–5 of docs/carriers.md, Worked examples, and the CPU and FileBacked carriers
//! through the public API.

use std::path::PathBuf;

use strideweave::carrier::{capabilities_for_carrier_class, Carrier, CarrierClass};
use strideweave::carriers::{Cpu, FileBacked, Generic};
use strideweave::{DType, ErrorKind, Result, Value};

fn values(carrier: &Carrier) -> Result<Vec<Value>> {
    (0..carrier.size()).map(|i| carrier.get(i)).collect()
}

fn floats(xs: &[f64]) -> Vec<Value> {
    xs.iter().copied().map(Value::Float).collect()
}

fn path_of(carrier: &Carrier) -> PathBuf {
    carrier
        .downcast_ref::<FileBacked>()
        .and_then(FileBacked::path)
        .unwrap_or_else(|| panic!("{carrier:?} has no FileBacked file"))
}

fn cpu_pointer(carrier: &Carrier) -> Option<usize> {
    carrier.downcast_ref::<Cpu>().and_then(Cpu::pointer)
}

#[test]
fn scenario_01_generic_float32_write_rounds_and_bumps_version() -> Result<()> {
    let carrier = Generic::carrier(&floats(&[1.0, 2.0, 3.0]), DType::FLOAT32, true)?;
    carrier.set(1, Value::Float(0.1))?;
    assert_eq!(carrier.get(1)?, Value::Float(0.10000000149011612));
    assert_eq!(carrier.version(), 1);

    let error = carrier.get(3).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Index);
    assert!(error.to_string().contains("slot 3"), "{error}");
    let error = carrier.set(3, Value::Float(1.0)).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Index);
    // usize::MAX is as far out of range as the seed's [-1].
    assert_eq!(
        carrier.get(usize::MAX).unwrap_err().kind(),
        ErrorKind::Index
    );
    assert_eq!(carrier.version(), 1);
    assert_eq!(values(&carrier)?, floats(&[1.0, 0.10000000149011612, 3.0]));
    Ok(())
}

#[test]
fn scenario_02_value_checks() -> Result<()> {
    let immutable = Generic::carrier(&floats(&[1.0]), DType::FLOAT32, false)?;
    let error = immutable.set(0, Value::Float(5.0)).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime);
    assert!(error.to_string().contains("immutable"), "{error}");
    assert_eq!(
        (immutable.get(0)?, immutable.version()),
        (Value::Float(1.0), 0)
    );

    let ints = Generic::carrier(&[Value::Int(0)], DType::INT32, true)?;
    assert_eq!(
        ints.set(0, Value::Int(1 << 31)).unwrap_err().kind(),
        ErrorKind::Overflow
    );
    assert_eq!(
        ints.set(0, Value::Float(1.5)).unwrap_err().kind(),
        ErrorKind::Type
    );
    assert_eq!((ints.get(0)?, ints.version()), (Value::Int(0), 0));

    let bools = Generic::carrier(&[Value::Bool(false)], DType::BOOL, true)?;
    assert_eq!(
        bools.set(0, Value::Int(1)).unwrap_err().kind(),
        ErrorKind::Type
    );
    assert_eq!(bools.get(0)?, Value::Bool(false));

    let float = Generic::carrier(&floats(&[0.0]), DType::FLOAT32, true)?;
    float.set(0, Value::Float(1e40))?;
    assert_eq!(float.get(0)?, Value::Float(f64::INFINITY));

    // CPU stores through the same normalization.
    let cpu = Cpu::carrier(1, DType::INT32, true, false)?;
    assert_eq!(
        cpu.set(0, Value::Int(1 << 31)).unwrap_err().kind(),
        ErrorKind::Overflow
    );
    assert_eq!((cpu.get(0)?, cpu.version()), (Value::Int(0), 0));
    Ok(())
}

#[test]
fn scenario_03_cpu_construction_and_dtype_support() -> Result<()> {
    let carrier = Cpu::carrier(3, DType::FLOAT32, true, false)?;
    assert_eq!(carrier.class(), CarrierClass::of::<Cpu>());
    assert_eq!(carrier.class().name(), "CPU");
    assert_eq!(values(&carrier)?, floats(&[0.0, 0.0, 0.0]));

    let error = Cpu::carrier(3, DType::FLOAT64, true, false).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value);
    let message = error.to_string();
    assert!(
        message.contains("CPU") && message.contains("Float64"),
        "{message}"
    );

    let support = |c: &Carrier| {
        (
            c.supports_storage_dtype(DType::INT32).unwrap(),
            c.supports_storage_dtype(DType::FLOAT64).unwrap(),
        )
    };
    assert_eq!(support(&carrier), (true, false));
    carrier.release()?;
    assert_eq!(support(&carrier), (true, false));
    assert_eq!(carrier.size(), 0);
    assert_eq!(carrier.dtype(), DType::FLOAT32);
    let error = carrier.get(0).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime);
    assert!(error.to_string().contains("released"), "{error}");
    assert_eq!(cpu_pointer(&carrier), None);
    Ok(())
}

#[test]
fn scenario_04_file_backed_lifecycle() -> Result<()> {
    let carrier = FileBacked::carrier(Some("scenario-04"), DType::FLOAT32, true)?;
    assert_eq!(carrier.size(), 0);
    assert_eq!(carrier.class().name(), "FileBacked");
    let path = path_of(&carrier);
    assert!(path.exists());
    assert_eq!(carrier.get(0).unwrap_err().kind(), ErrorKind::Index);

    let error = FileBacked::carrier(Some("a/b"), DType::FLOAT32, true).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value);
    assert!(error.to_string().contains("a/b"), "{error}");

    let error = FileBacked::carrier(Some("scenario-04"), DType::INT32, true).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value);
    assert!(error.to_string().contains("scenario-04"), "{error}");
    assert!(path.exists());
    assert_eq!(path_of(&carrier), path);

    let allocated = carrier.allocate_like(3, true, None, false)?;
    assert_eq!(allocated.class(), CarrierClass::of::<FileBacked>());
    assert_eq!(values(&allocated)?, floats(&[0.0, 0.0, 0.0]));
    allocated.set(2, Value::Float(2.5))?;
    assert_eq!(values(&allocated)?, floats(&[0.0, 0.0, 2.5]));
    let allocated_path = path_of(&allocated);
    assert_ne!(allocated_path, path);

    carrier.release()?;
    assert!(!path.exists());
    assert_eq!(
        carrier
            .downcast_ref::<FileBacked>()
            .and_then(FileBacked::path),
        None
    );
    assert_eq!(carrier.size(), 0);

    drop(allocated);
    assert!(!allocated_path.exists());

    assert!(capabilities_for_carrier_class(CarrierClass::of::<FileBacked>()).is_empty());
    assert!(CarrierClass::of::<FileBacked>().is_shipped());
    assert!(CarrierClass::of::<Cpu>().is_shipped());
    Ok(())
}

#[test]
fn scenario_05_released_generic_is_a_prototype() -> Result<()> {
    let prototype = Generic::carrier(&floats(&[1.0, 2.0]), DType::FLOAT32, true)?;
    prototype.release()?;
    let fresh = prototype.new_like(&[Value::Float(4.0)], true, None)?;
    assert_eq!(fresh.class(), CarrierClass::of::<Generic>());
    assert!(!fresh.same_as(&prototype));
    assert!(!fresh.is_released());
    assert_eq!((values(&fresh)?, fresh.version()), (floats(&[4.0]), 0));
    fresh.set(0, Value::Float(5.0))?;
    assert_eq!(fresh.version(), 1);

    let error = prototype
        .allocate_like(usize::MAX / 2, true, None, false)
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Memory);
    assert!(error.to_string().contains("Generic"), "{error}");

    let cpu = Cpu::carrier(1, DType::FLOAT32, true, false)?;
    cpu.release()?;
    let error = cpu.allocate_like(1 << 60, true, None, true).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Memory);
    assert!(
        error
            .to_string()
            .contains(&format!("{} bytes", 4_usize << 60)),
        "{error}"
    );
    Ok(())
}

#[test]
fn cpu_bool_round_trip() -> Result<()> {
    let carrier = Cpu::carrier(3, DType::BOOL, true, false)?;
    assert_eq!(values(&carrier)?, [Value::Bool(false); 3]);
    carrier.set(0, Value::Bool(true))?;
    carrier.set(2, Value::Bool(true))?;
    carrier.set(2, Value::Bool(false))?;
    assert_eq!(
        values(&carrier)?,
        [Value::Bool(true), Value::Bool(false), Value::Bool(false)]
    );
    assert_eq!(carrier.version(), 3);
    assert_eq!(
        carrier.set(1, Value::Int(1)).unwrap_err().kind(),
        ErrorKind::Type
    );
    let copy = Cpu::from_values(&values(&carrier)?, DType::BOOL, true)?;
    assert_eq!(values(&copy)?, values(&carrier)?);
    Ok(())
}

#[test]
fn cpu_int32_round_trip() -> Result<()> {
    let extremes = [i64::from(i32::MIN), -1, 0, i64::from(i32::MAX)].map(Value::Int);
    let carrier = Cpu::from_values(&extremes, DType::INT32, true)?;
    assert_eq!(values(&carrier)?, extremes);
    carrier.set(1, Value::Int(123_456))?;
    assert_eq!(carrier.get(1)?, Value::Int(123_456));
    assert_eq!(
        carrier.set(1, Value::Float(1.0)).unwrap_err().kind(),
        ErrorKind::Type
    );
    assert_eq!(carrier.version(), 1);
    Ok(())
}

#[test]
fn cpu_huge_buffer_is_huge_page_aligned() -> Result<()> {
    let slots = (4 << 20) / 4 + 3; // just over 4 MiB of Float32
    let carrier = Cpu::carrier(slots, DType::FLOAT32, true, false)?;
    let pointer = cpu_pointer(&carrier);
    assert!(pointer.is_some_and(|p| p % (2 << 20) == 0), "{pointer:?}");
    let last = slots - 1;
    assert_eq!(carrier.get(last)?, Value::Float(0.0));
    carrier.set(last, Value::Float(-7.25))?;
    assert_eq!(carrier.get(last)?, Value::Float(-7.25));
    assert_eq!(carrier.get(last - 1)?, Value::Float(0.0));
    assert_eq!(carrier.get(slots).unwrap_err().kind(), ErrorKind::Index);
    Ok(())
}

#[test]
fn cpu_empty_allocation_works() -> Result<()> {
    for slots in [0, 5, (2 << 20) + 1] {
        let carrier = Cpu::carrier(slots, DType::INT32, true, true)?;
        assert_eq!(carrier.size(), slots);
        if let Some(last) = slots.checked_sub(1) {
            carrier.set(last, Value::Int(42))?;
            assert_eq!(carrier.get(last)?, Value::Int(42));
            assert!(cpu_pointer(&carrier).is_some());
        } else {
            assert_eq!(cpu_pointer(&carrier), None);
        }
    }
    let prototype = Cpu::carrier(1, DType::FLOAT32, true, false)?;
    let empty = prototype.allocate_like(4, true, Some(DType::BOOL), true)?;
    assert_eq!((empty.size(), empty.dtype()), (4, DType::BOOL));
    empty.set(3, Value::Bool(true))?;
    assert_eq!(empty.get(3)?, Value::Bool(true));
    Ok(())
}

#[test]
fn cpu_concurrent_reads_and_writes_keep_the_version_exact() -> Result<()> {
    const THREADS: usize = 4;
    const WRITES: usize = 500;
    let carrier = Cpu::carrier(THREADS, DType::INT32, true, false)?;
    let written = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|thread| {
                let carrier = carrier.clone();
                scope.spawn(move || -> Result<usize> {
                    let mut written = 0;
                    for step in 0..WRITES {
                        let value = i64::try_from(thread * WRITES + step).unwrap_or(0);
                        carrier.set(thread, Value::Int(value))?;
                        written += 1;
                        // Every slot holds 0 or a value its own thread wrote.
                        for other in 0..THREADS {
                            let Value::Int(seen) = carrier.get(other)? else {
                                panic!("an Int32 slot held a non-int");
                            };
                            let owner = usize::try_from(seen).unwrap_or(usize::MAX) / WRITES;
                            assert!(seen == 0 || owner == other, "slot {other} held {seen}");
                        }
                    }
                    Ok(written)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| {
                worker
                    .join()
                    .unwrap_or_else(|_| panic!("a worker panicked"))
            })
            .sum::<Result<usize>>()
    })?;
    assert_eq!(written, THREADS * WRITES);
    assert_eq!(carrier.version(), u64::try_from(written).unwrap_or(0));
    for thread in 0..THREADS {
        let last = i64::try_from(thread * WRITES + WRITES - 1).unwrap_or(0);
        assert_eq!(carrier.get(thread)?, Value::Int(last));
    }
    Ok(())
}

#[test]
fn ownership_blocks_writes_outside_the_owner_access() -> Result<()> {
    let carrier = Cpu::from_values(&floats(&[1.0, 2.0]), DType::FLOAT32, true)?;
    let token = carrier.claim_ownership()?;
    assert!(carrier.is_owned());
    assert!(!carrier.is_mutable());
    let error = carrier.set(0, Value::Float(9.0)).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime);
    assert!(error.to_string().contains("owned"), "{error}");
    assert_eq!((carrier.get(0)?, carrier.version()), (Value::Float(1.0), 0));
    {
        let _access = token.access()?;
        assert!(carrier.is_mutable());
        carrier.set(0, Value::Float(9.0))?;
        assert_eq!(carrier.get(0)?, Value::Float(9.0));
    }
    assert_eq!(
        carrier.set(1, Value::Float(3.0)).unwrap_err().kind(),
        ErrorKind::Runtime
    );
    assert_eq!(carrier.get(1)?, Value::Float(2.0));
    drop(token);
    assert!(!carrier.is_owned());
    carrier.set(1, Value::Float(3.0))?;
    assert_eq!(values(&carrier)?, floats(&[9.0, 3.0]));
    assert_eq!(carrier.version(), 2);
    Ok(())
}

#[test]
fn cpu_bulk_constructors_copy_native_slices() -> Result<()> {
    let floats = Cpu::from_f32(&[0.5, -1.25, 3.0], false)?;
    assert_eq!(floats.dtype(), DType::FLOAT32);
    assert!(!floats.is_mutable());
    assert_eq!(
        values(&floats)?,
        vec![Value::Float(0.5), Value::Float(-1.25), Value::Float(3.0)]
    );
    let ints = Cpu::from_i32(&[i32::MIN, 7], true)?;
    assert_eq!(ints.dtype(), DType::INT32);
    assert_eq!(
        values(&ints)?,
        vec![Value::Int(i32::MIN as i64), Value::Int(7)]
    );
    assert_eq!(Cpu::from_f32(&[], true)?.size(), 0);
    Ok(())
}
