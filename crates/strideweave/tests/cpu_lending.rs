//! CPU carriers lending their slots (`Cpu::export`) and borrowing memory (`Cpu::borrowing`):
//! an export refuses writes and defers a release, a borrowed carrier reads in place, is
//! immutable and drops its owner on release.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use strideweave::carriers::{Cpu, Generic};
use strideweave::layout::Layout;
use strideweave::{ops, Carrier, DType, ErrorKind, Result, Tensor, Value};

fn floats(carrier: &Carrier) -> Result<Vec<f64>> {
    (0..carrier.size())
        .map(|i| match carrier.get(i)? {
            Value::Float(x) => Ok(x),
            other => panic!("a Float32 slot read {other:?}"),
        })
        .collect()
}

/// The `count` f32 values at an export's address.
fn exported_f32(address: usize, count: usize) -> Vec<f32> {
    // SAFETY: the caller holds a live `CpuExport` of at least `count` Float32 slots at
    // `address`, which keeps the memory valid and unwritten.
    unsafe { std::slice::from_raw_parts(address as *const f32, count) }.to_vec()
}

#[test]
fn an_export_refuses_writes_until_it_is_dropped_and_the_version_stays() -> Result<()> {
    // 4 slots live inline, 40 on the heap: both refuse.
    for slots in [4usize, 40] {
        let values: Vec<f32> = (0..slots).map(|i| i as f32).collect();
        let carrier = Cpu::from_f32(&values, true)?;
        let export = Cpu::export(&carrier)?;
        assert_eq!(export.len_bytes(), 4 * slots);
        assert_eq!(export.dtype(), DType::FLOAT32);
        assert!(export.carrier().same_as(&carrier));
        assert_eq!(
            carrier.downcast_ref::<Cpu>().map(Cpu::live_exports),
            Some(1)
        );
        assert_eq!(exported_f32(export.address(), slots), values);

        let error = carrier.set(1, Value::Float(9.0)).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Runtime, "{error}");
        assert_eq!(
            error.to_string(),
            "runtime error: cannot write the CPU carrier: its slots are exported to 1 live \
             view(s) (such as a numpy array); writes are refused until every view is dropped"
        );
        let tensor = Tensor::compact(carrier.clone(), strideweave::Shape::flat(&[slots])?)?;
        let error = tensor.set(&strideweave::IntTuple::Int(0), Value::Float(5.0));
        assert_eq!(error.unwrap_err().kind(), ErrorKind::Runtime);
        assert_eq!(carrier.version(), 0);
        assert_eq!(exported_f32(export.address(), slots), values);

        // A second export counts too; reads and operations still run.
        let second = Cpu::export(&carrier)?;
        assert_eq!(second.address(), export.address());
        assert_eq!(
            carrier.downcast_ref::<Cpu>().map(Cpu::live_exports),
            Some(2)
        );
        let doubled = ops::add(&tensor, &tensor)?;
        assert_eq!(
            doubled.get(&strideweave::IntTuple::Int(1))?,
            Value::Float(2.0)
        );
        drop(export);
        assert!(carrier.set(1, Value::Float(9.0)).is_err());
        drop(second);
        assert_eq!(
            carrier.downcast_ref::<Cpu>().map(Cpu::live_exports),
            Some(0)
        );
        carrier.set(1, Value::Float(9.0))?;
        assert_eq!(carrier.version(), 1);
        assert_eq!(floats(&carrier)?[1], 9.0);
    }
    Ok(())
}

#[test]
fn a_release_while_exported_is_deferred_and_the_memory_stays_valid() -> Result<()> {
    for slots in [3usize, 1000] {
        let values: Vec<f32> = (0..slots).map(|i| i as f32 * 0.5).collect();
        let carrier = Cpu::from_f32(&values, true)?;
        let export = Cpu::export(&carrier)?;
        carrier.release()?;
        assert!(carrier.is_released());
        let error = carrier.get(0).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Runtime, "{error}");
        // The exported memory still holds the values after the release.
        let before_drop = exported_f32(export.address(), slots);
        assert_eq!(before_drop, values);
        let again = Cpu::export(&carrier).unwrap_err();
        assert_eq!(again.kind(), ErrorKind::Runtime);
        assert_eq!(
            again.to_string(),
            "runtime error: cannot export the CPU carrier: it is released"
        );
        drop(export);
        assert_eq!(
            carrier.downcast_ref::<Cpu>().map(Cpu::live_exports),
            Some(0)
        );
    }
    Ok(())
}

#[test]
fn only_cpu_carriers_export() -> Result<()> {
    let generic = Generic::carrier(&[Value::Float(1.0)], DType::FLOAT32, true)?;
    let error = Cpu::export(&generic).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Type);
    assert_eq!(
        error.to_string(),
        "type error: only CPU carriers export their slots, not a Generic carrier"
    );
    let empty = Cpu::carrier(0, DType::INT32, true, false)?;
    let export = Cpu::export(&empty)?;
    assert_eq!((export.address(), export.len_bytes()), (0, 0));
    Ok(())
}

#[test]
fn writers_racing_exports_never_change_exported_memory() -> Result<()> {
    let carrier = Cpu::from_f32(&[0.0; 64], true)?;
    std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            let mut refused = 0usize;
            for round in 1..=2_000u32 {
                match carrier.set((round % 64) as usize, Value::Float(f64::from(round))) {
                    Ok(()) => {}
                    Err(error) => {
                        assert_eq!(error.kind(), ErrorKind::Runtime, "{error}");
                        assert!(error.to_string().contains("exported"), "{error}");
                        refused += 1;
                    }
                }
            }
            refused
        });
        for _ in 0..500 {
            let export = Cpu::export(&carrier).expect("a live CPU carrier exports");
            let first = exported_f32(export.address(), 64);
            std::hint::spin_loop();
            assert_eq!(exported_f32(export.address(), 64), first);
        }
        writer.join().expect("the writer thread");
    });
    Ok(())
}

/// An owner that records being dropped.
struct Flagged(Arc<AtomicBool>, Vec<f32>);

impl Drop for Flagged {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

fn borrowed(values: Vec<f32>) -> Result<(Carrier, Arc<AtomicBool>)> {
    let dropped = Arc::new(AtomicBool::new(false));
    let owner = Box::new(Flagged(dropped.clone(), values));
    let address = NonNull::from(owner.1.as_slice()).cast::<u8>();
    let bytes = owner.1.len() * 4;
    // SAFETY: the vector's memory lives as long as `owner`, which the carrier keeps, and
    // nothing writes it.
    let carrier = unsafe { Cpu::borrowing(address, bytes, DType::FLOAT32, owner) }?;
    Ok((carrier, dropped))
}

#[test]
fn a_borrowing_carrier_reads_in_place_is_immutable_and_drops_its_owner() -> Result<()> {
    let (carrier, dropped) = borrowed(vec![1.0, 2.5, -3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0])?;
    assert!(!carrier.is_mutable());
    assert_eq!(carrier.size(), 9);
    assert_eq!(floats(&carrier)?[..3], [1.0, 2.5, -3.0]);
    let error = carrier.set(0, Value::Float(0.0)).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime, "{error}");

    let x = Tensor::new(carrier.clone(), 0, Layout::from_flat(&[3, 3], &[1, 3])?)?;
    let sum = ops::add(&x, &x)?;
    assert_eq!(sum.get(&strideweave::IntTuple::Int(1))?, Value::Float(5.0));
    assert!(sum.carrier().is_mutable());
    let export = Cpu::export(&carrier)?;
    assert_eq!(exported_f32(export.address(), 2), [1.0, 2.5]);
    carrier.release()?;
    assert!(
        !dropped.load(Ordering::SeqCst),
        "the owner outlives the export"
    );
    drop(export);
    assert!(
        dropped.load(Ordering::SeqCst),
        "the last export frees the borrowed memory"
    );
    Ok(())
}

#[test]
fn a_dropped_borrowing_carrier_drops_its_owner() -> Result<()> {
    let (carrier, dropped) = borrowed(vec![0.0; 20])?;
    drop(carrier);
    assert!(dropped.load(Ordering::SeqCst));
    Ok(())
}

#[test]
fn borrowing_checks_the_dtype_alignment_and_byte_count() {
    let values = vec![0u32; 8];
    let base = NonNull::from(values.as_slice()).cast::<u8>();
    // SAFETY: every call below is refused before the memory is touched.
    let cases = unsafe {
        [
            Cpu::borrowing(base, 32, DType::BOOL, Box::new(())).unwrap_err(),
            Cpu::borrowing(base, 32, DType::FLOAT64, Box::new(())).unwrap_err(),
            Cpu::borrowing(base.add(1), 16, DType::FLOAT32, Box::new(())).unwrap_err(),
            Cpu::borrowing(base, 30, DType::INT32, Box::new(())).unwrap_err(),
        ]
    };
    let messages: Vec<String> = cases.iter().map(ToString::to_string).collect();
    assert!(
        cases.iter().all(|e| e.kind() == ErrorKind::Value),
        "{messages:?}"
    );
    assert!(
        messages[0].contains("Float32 or Int32 slots, not Bool"),
        "{}",
        messages[0]
    );
    assert!(messages[1].contains("Float64"), "{}", messages[1]);
    assert!(
        messages[2].contains("4-byte aligned Float32"),
        "{}",
        messages[2]
    );
    assert!(messages[3].contains("and 30 bytes"), "{}", messages[3]);
}
