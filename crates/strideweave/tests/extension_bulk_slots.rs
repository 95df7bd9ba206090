//! Bulk slot reads (`StorageProvider::with_bulk_read`) and slot copies between carriers of
//! one class (`StorageProvider::with_slot_copy`): what keeps a scatter, a tensor's values and
//! the journal of provider work from reading and writing a device carrier one slot at a time
//! (carrier-extension spec, "StorageProvider defines the complete generic storage surface";
//! docs/extension-design.md, "Bulk slot reads and slot copies").

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use strideweave::carrier::{Carrier, CarrierClass, ClassKind};
use strideweave::carriers::extension::{
    InterfaceHandle, Preparation, PreparedKernel, ProviderResult, Submitted,
};
use strideweave::operation::{
    call, operation_definition, resolve_operation_plan, OperationCapability, PlanOperand,
    ResolvedInvocation,
};
use strideweave::{
    register_carrier_definition, CarrierDefinition, DType, Error, ErrorKind,
    KernelExecutionInterface, KernelPattern, KernelProvider, Layout, Result, Shape,
    StorageProvider, Tensor, Value,
};

/// Float32 slots kept behind a handle, as a device keeps a buffer: the slot copy works on
/// handles taken from the states.
#[derive(Default)]
struct Device {
    words: Arc<Mutex<Vec<f32>>>,
}

/// What the class's slot copy and bulk read do.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Copy,
    Decline,
    Fail,
    Panic,
    ShortRead,
}

/// How often each storage path ran, and how the class behaves.
#[derive(Default)]
struct Counters {
    reads: AtomicUsize,
    writes: AtomicUsize,
    bulk_reads: AtomicUsize,
    bulk_slots: AtomicUsize,
    copies: AtomicUsize,
    same_handle: AtomicUsize,
    mode: Mutex<Option<Mode>>,
}

impl Counters {
    fn mode(&self) -> Mode {
        self.mode.lock().unwrap().unwrap_or(Mode::Copy)
    }

    fn set_mode(&self, mode: Mode) {
        *self.mode.lock().unwrap() = Some(mode);
    }

    fn get(&self, counter: &AtomicUsize) -> usize {
        counter.load(Ordering::SeqCst)
    }
}

fn bump(counter: &AtomicUsize, by: usize) {
    counter.fetch_add(by, Ordering::SeqCst);
}

fn storage(counters: &Arc<Counters>) -> StorageProvider {
    let (reads, writes, bulk, copying) = (
        Arc::clone(counters),
        Arc::clone(counters),
        Arc::clone(counters),
        Arc::clone(counters),
    );
    StorageProvider::new(
        |_: &Device, dtype| dtype == DType::FLOAT32,
        |state: &Device| state.words.lock().unwrap().len() as i64,
        |state: &mut Device, slots, _| {
            *state.words.lock().unwrap() = vec![0.0; slots];
            Ok(())
        },
        |state: &mut Device| {
            state.words.lock().unwrap().clear();
            Ok(())
        },
        move |state: &Device, index| {
            bump(&reads.reads, 1);
            Ok(Value::Float(f64::from(state.words.lock().unwrap()[index])))
        },
        move |state: &mut Device, index, value| {
            bump(&writes.writes, 1);
            state.words.lock().unwrap()[index] = value.as_f64().unwrap_or(f64::NAN) as f32;
            Ok(())
        },
    )
    .with_bulk_read(move |state: &Device, indices: &[usize]| {
        bump(&bulk.bulk_reads, 1);
        bump(&bulk.bulk_slots, indices.len());
        let words = state.words.lock().unwrap();
        let count = if bulk.mode() == Mode::ShortRead {
            indices.len().saturating_sub(1)
        } else {
            indices.len()
        };
        Ok(indices[..count]
            .iter()
            .map(|&i| Value::Float(f64::from(words[i])))
            .collect())
    })
    .with_slot_copy(
        |state: &Device| Ok(Arc::clone(&state.words)),
        move |to: &Arc<Mutex<Vec<f32>>>,
              from: &Arc<Mutex<Vec<f32>>>,
              sources: &[usize],
              targets: &[usize]| {
            match copying.mode() {
                Mode::Decline | Mode::ShortRead => return Ok(false),
                Mode::Fail => {
                    return Err(Error::Runtime(
                        "the device refused the slot copy".to_string(),
                    ))
                }
                Mode::Panic => panic!("the slot copy panicked"),
                Mode::Copy => {}
            }
            bump(&copying.copies, 1);
            if Arc::ptr_eq(to, from) {
                bump(&copying.same_handle, 1);
            }
            let gathered: Vec<f32> = {
                let words = from.lock().unwrap();
                sources.iter().map(|&s| words[s]).collect()
            };
            let mut words = to.lock().unwrap();
            for (&t, x) in targets.iter().zip(gathered) {
                words[t] = x;
            }
            Ok(true)
        },
    )
}

/// A fresh class over [`Device`] whose one kernel is a Float32 `relu` that copies its
/// operand into a fresh carrier with a scatter (a slot copy inside provider work, so the
/// journal records the fresh carrier's previous values) and then zeroes the negative slots
/// one `set` each.
fn class(counters: &Arc<Counters>) -> Result<CarrierClass> {
    let class = CarrierClass::mint("BulkDevice", ClassKind::Independent);
    let plan = OperationCapability::from_plan(resolve_operation_plan(
        "relu",
        &[PlanOperand::Tensor(DType::FLOAT32)],
        None,
    )?);
    let pattern = KernelPattern::new(
        &operation_definition("relu")?,
        [plan],
        "bulk_device.relu",
        move |invocation: &ResolvedInvocation, interface: &InterfaceHandle| {
            let x = invocation.call().tensor(0)?.clone();
            let spec = invocation.results()[0].clone();
            Ok(Preparation::Kernel(PreparedKernel::new(
                interface.clone(),
                move || {
                    let n = x.size();
                    let fresh = x
                        .carrier()
                        .allocate_like(n, true, Some(spec.dtype()), true)?;
                    let whole = Tensor::new(fresh.clone(), 0, Layout::from_flat(&[n], &[1])?)?;
                    fresh.scatter(&x, &whole, &Layout::from_flat(&[n], &[1])?, 0)?;
                    for (i, value) in x.to_values()?.into_iter().enumerate() {
                        if value.as_f64().unwrap_or(0.0) < 0.0 {
                            fresh.set(i, Value::Float(0.0))?;
                        }
                    }
                    let out = Tensor::new(fresh, 0, spec.layout().clone())?;
                    ProviderResult::new([out]).map(Submitted::Ready)
                },
            )))
        },
        0,
    )?;
    let interface = InterfaceHandle::new(KernelExecutionInterface::new("1")?)?;
    register_carrier_definition(
        class,
        CarrierDefinition::new(storage(counters))
            .with_kernels(KernelProvider::new(interface, [pattern])?)?,
    )?;
    Ok(class)
}

fn carrier(class: CarrierClass, xs: &[f32]) -> Result<Carrier> {
    let carrier = Carrier::create(class, Device::default(), xs.len(), DType::FLOAT32, true)?;
    for (i, x) in xs.iter().enumerate() {
        carrier.set(i, Value::Float(f64::from(*x)))?;
    }
    Ok(carrier)
}

fn floats(carrier: &Carrier) -> Result<Vec<f64>> {
    let whole = Tensor::compact(carrier.clone(), Shape::new(carrier.size())?)?;
    Ok(whole
        .to_values()?
        .into_iter()
        .map(|v| v.as_f64().unwrap_or(f64::NAN))
        .collect())
}

/// Scatters the four slots `1..5` of `source` to slots `4, 6, 8, 10` of `destination`.
fn scatter_four(source: &Carrier, destination: &Carrier) -> Result<()> {
    let from = Tensor::new(source.clone(), 1, Layout::from_flat(&[4], &[1])?)?;
    let whole = Tensor::compact(destination.clone(), Shape::new(destination.size())?)?;
    destination.scatter(&from, &whole, &Layout::from_flat(&[4], &[2])?, 4)
}

#[test]
fn a_scatter_between_carriers_of_one_class_is_one_slot_copy() -> Result<()> {
    let counters = Arc::new(Counters::default());
    let class = class(&counters)?;
    let source = carrier(class, &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0])?;
    let destination = carrier(class, &[-1.0; 12])?;
    let version = destination.version();
    let (reads, writes) = (
        counters.get(&counters.reads),
        counters.get(&counters.writes),
    );
    scatter_four(&source, &destination)?;
    assert_eq!(counters.get(&counters.copies), 1);
    assert_eq!(counters.get(&counters.same_handle), 0);
    assert_eq!(counters.get(&counters.reads), reads, "no slot read");
    assert_eq!(counters.get(&counters.writes), writes, "no slot written");
    assert_eq!(destination.version(), version + 1);
    let mut expected = vec![-1.0; 12];
    for (k, x) in [1.0, 2.0, 3.0, 4.0].into_iter().enumerate() {
        expected[4 + 2 * k] = x;
    }
    assert_eq!(floats(&destination)?, expected);
    assert_eq!(source.version(), 6, "the source's six writes only");
    Ok(())
}

#[test]
fn a_carrier_scattering_into_itself_hands_the_copy_its_own_handle_twice() -> Result<()> {
    let counters = Arc::new(Counters::default());
    let class = class(&counters)?;
    let shared = carrier(
        class,
        &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0],
    )?;
    scatter_four(&shared, &shared)?;
    assert_eq!(counters.get(&counters.copies), 1);
    assert_eq!(counters.get(&counters.same_handle), 1);
    assert_eq!(
        floats(&shared)?,
        [0.0, 1.0, 2.0, 3.0, 1.0, 5.0, 2.0, 7.0, 3.0, 9.0, 4.0]
    );
    Ok(())
}

#[test]
fn a_declined_slot_copy_falls_back_to_writes_with_bulk_reads() -> Result<()> {
    let counters = Arc::new(Counters::default());
    let class = class(&counters)?;
    let source = carrier(class, &[0.0, 1.0, 2.0, 3.0, 4.0])?;
    let destination = carrier(class, &[-1.0; 11])?;
    counters.set_mode(Mode::Decline);
    let (reads, writes, bulk) = (
        counters.get(&counters.reads),
        counters.get(&counters.writes),
        counters.get(&counters.bulk_reads),
    );
    scatter_four(&source, &destination)?;
    assert_eq!(counters.get(&counters.copies), 0);
    assert_eq!(counters.get(&counters.writes) - writes, 4);
    assert_eq!(counters.get(&counters.reads), reads, "every read in bulk");
    // The sources, then the destination's previous values (kept to undo a failed write).
    assert_eq!(counters.get(&counters.bulk_reads) - bulk, 2);
    assert_eq!(
        floats(&destination)?,
        [-1.0, -1.0, -1.0, -1.0, 1.0, -1.0, 2.0, -1.0, 3.0, -1.0, 4.0]
    );
    Ok(())
}

#[test]
fn a_failing_or_panicking_slot_copy_fails_the_scatter_and_changes_nothing() -> Result<()> {
    let counters = Arc::new(Counters::default());
    let class = class(&counters)?;
    let source = carrier(class, &[0.0, 1.0, 2.0, 3.0, 4.0])?;
    let destination = carrier(class, &[-1.0; 11])?;
    let version = destination.version();
    counters.set_mode(Mode::Fail);
    let error = scatter_four(&source, &destination).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime);
    assert!(
        error
            .to_string()
            .contains("the device refused the slot copy"),
        "{error}"
    );
    counters.set_mode(Mode::Panic);
    let error = scatter_four(&source, &destination).unwrap_err();
    assert!(matches!(error, Error::ProviderPanicked(_)), "{error:?}");
    assert!(error.to_string().contains("slot copy"), "{error}");
    assert!(error.to_string().contains("BulkDevice"), "{error}");
    assert_eq!(destination.version(), version);
    assert_eq!(floats(&destination)?, vec![-1.0; 11]);
    Ok(())
}

#[test]
fn a_bulk_read_answering_the_wrong_count_is_a_provider_contract_error() -> Result<()> {
    let counters = Arc::new(Counters::default());
    let class = class(&counters)?;
    let source = carrier(class, &[0.0, 1.0, 2.0, 3.0, 4.0])?;
    let destination = carrier(class, &[-1.0; 11])?;
    let version = destination.version();
    counters.set_mode(Mode::ShortRead);
    let error = scatter_four(&source, &destination).unwrap_err();
    assert!(matches!(error, Error::ProviderContract(_)), "{error:?}");
    assert!(
        error.to_string().contains("read 3 values for 4 slots"),
        "{error}"
    );
    assert!(error.to_string().contains("BulkDevice"), "{error}");
    assert_eq!(destination.version(), version);
    counters.set_mode(Mode::Copy);
    assert_eq!(floats(&destination)?, vec![-1.0; 11]);
    Ok(())
}

#[test]
fn provider_work_journals_the_slots_it_writes_in_bulk() -> Result<()> {
    let counters = Arc::new(Counters::default());
    let class = class(&counters)?;
    let x = Tensor::compact(
        carrier(class, &[-1.0, 2.0, -3.0, 4.0, 5.0])?,
        Shape::new(5)?,
    )?;
    let (reads, bulk, slots) = (
        counters.get(&counters.reads),
        counters.get(&counters.bulk_reads),
        counters.get(&counters.bulk_slots),
    );
    let y = call("relu", [x.clone().into()], &[])?.remove(0);
    assert_eq!(
        y.to_values()?,
        [0.0, 2.0, 0.0, 4.0, 5.0].map(Value::Float).to_vec()
    );
    assert_eq!(
        counters.get(&counters.reads),
        reads,
        "no slot read one by one"
    );
    assert_eq!(counters.get(&counters.copies), 1);
    // The journal reads the five scattered slots at once and each `set` slot once; the
    // kernel reads its operand once, and the test reads the result once.
    assert_eq!(counters.get(&counters.bulk_reads) - bulk, 1 + 2 + 1 + 1);
    assert_eq!(counters.get(&counters.bulk_slots) - slots, 5 + 2 + 5 + 5);
    Ok(())
}
