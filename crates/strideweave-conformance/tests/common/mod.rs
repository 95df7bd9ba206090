//! What the suite's own tests share: the Ring carrier they break in one way at a time
//! (Float32 slots, `neg` and `relu` kernels, and a fault injector consulted by every
//! callback), and the README's one-kernel carrier's Float32 slots.

#![allow(dead_code)]

#[path = "../../examples/one_kernel_carrier.rs"]
pub mod one_kernel_carrier;

use strideweave::carrier::{Carrier, CarrierClass, ClassKind};
use strideweave::carriers::extension::{
    InterfaceHandle, Preparation, PreparedKernel, ProviderResult, Submitted,
};
use strideweave::operation::{
    operation_definition, resolve_operation_plan, OperationCapability, PlanOperand,
    ResolvedInvocation,
};
use strideweave::Unsupported;
use strideweave::{
    register_carrier_definition, CarrierDefinition, DType, Error, KernelExecutionInterface,
    KernelPattern, KernelProvider, Result, StorageProvider, Value,
};
use strideweave_conformance::{check, run, Factory, FaultInjector, Promise, Verdict};

/// One way to break the Ring carrier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flaw {
    /// None: a correct carrier.
    None,
    /// `neg` is advertised but its kernel always fails.
    FailingKernel,
    /// `neg` is advertised but its kernel returns the operand's values unchanged.
    WrongKernel,
    /// `supports_dtype` answers by bit width, not identity.
    DtypeByBits,
    /// `supports_dtype` answers false once the carrier is released.
    DtypeByState,
    /// `write` stores the value before consulting its fault point.
    WriteLandsOnFailure,
    /// `neg` declines gapped or offset operands at run time — after allocating its result.
    AllocatesThenDeclines,
    /// The Int32 `add` kernel wraps around instead of failing with Overflow.
    WrappingAdd,
    /// `neg` takes an operand whose elements share slots (a broadcast, stride 0) for a
    /// scalar and repeats its first element.
    BroadcastAsScalar,
}

/// The Ring carrier's state: Float32 slots.
#[derive(Default)]
pub struct Ring {
    values: Vec<Value>,
    released: bool,
}

fn storage(flaw: Flaw, faults: FaultInjector, ints: bool) -> StorageProvider {
    let (f1, f2, f3, f4) = (faults.clone(), faults.clone(), faults.clone(), faults);
    StorageProvider::new(
        move |ring: &Ring, dtype| match flaw {
            Flaw::DtypeByBits => dtype.bits() == Some(32),
            Flaw::DtypeByState => dtype == DType::FLOAT32 && !ring.released,
            _ => dtype == DType::FLOAT32 || (ints && dtype == DType::INT32),
        },
        |ring: &Ring| ring.values.len() as i64,
        move |ring: &mut Ring, slots, _dtype| {
            f1.check(FaultInjector::ALLOCATE)?;
            ring.values = vec![Value::Float(0.0); slots];
            Ok(())
        },
        move |ring: &mut Ring| {
            f2.check("release")?;
            ring.values.clear();
            ring.released = true;
            Ok(())
        },
        move |ring: &Ring, index| {
            f3.check("read")?;
            Ok(ring.values[index])
        },
        move |ring: &mut Ring, index, value| {
            if flaw == Flaw::WriteLandsOnFailure {
                ring.values[index] = value;
                return f4.check("write");
            }
            f4.check("write")?;
            ring.values[index] = value;
            Ok(())
        },
    )
    .with_elementwise_fallback(true)
}

/// The Ring's kernel for the unary built-in `name` (`neg` or `relu`).
fn unary_kernel(
    name: &'static str,
    class: CarrierClass,
    flaw: Flaw,
    faults: FaultInjector,
) -> Result<KernelPattern> {
    let plan = OperationCapability::from_plan(resolve_operation_plan(
        name,
        &[PlanOperand::Tensor(DType::FLOAT32)],
        None,
    )?);
    KernelPattern::new(
        &operation_definition(name)?,
        [plan],
        &format!("ring.{name}"),
        move |invocation: &ResolvedInvocation, interface: &InterfaceHandle| {
            faults.check("prepare")?;
            let x = invocation.call().tensor(0)?.clone();
            let gapped = x.offset() != 0 || x.layout().cosize() != x.layout().size();
            if flaw == Flaw::AllocatesThenDeclines && gapped {
                let _scratch = invocation.allocate_result(0)?;
                return Ok(Preparation::Unsupported(Unsupported::new(
                    "the Ring's neg takes dense operands only",
                )?));
            }
            let spec = invocation.results()[0].clone();
            let faults = faults.clone();
            Ok(Preparation::Kernel(PreparedKernel::new(
                interface.clone(),
                move || {
                    faults.check("submit")?;
                    if flaw == Flaw::FailingKernel {
                        return Err(Error::Runtime(format!(
                            "the Ring's {name} is not written yet"
                        )));
                    }
                    let layout = spec.layout();
                    let carrier = Carrier::create(
                        class,
                        Ring::default(),
                        layout.cosize(),
                        spec.dtype(),
                        true,
                    )?;
                    let mut values = x.to_values()?;
                    let aliased = x.layout().cosize() < x.layout().size();
                    if flaw == Flaw::BroadcastAsScalar && aliased {
                        let first = values[0];
                        values.iter_mut().for_each(|v| *v = first);
                    }
                    for (i, value) in values.into_iter().enumerate() {
                        let x = value.as_f64().unwrap_or(f64::NAN);
                        let y = match (flaw, name) {
                            (Flaw::WrongKernel, _) => x,
                            (_, "relu") => x.max(0.0),
                            _ => -x,
                        };
                        carrier.set(layout.index_of(i)?, Value::Float(y))?;
                    }
                    ProviderResult::new([spec.tensor(carrier)?]).map(Submitted::Ready)
                },
            )))
        },
        0,
    )
}

/// The Ring's Int32 `add` kernel: checked, or wrapping with [`Flaw::WrappingAdd`].
fn int_add_kernel(flaw: Flaw) -> Result<KernelPattern> {
    KernelPattern::synchronous(
        [OperationCapability::builtin(
            "add",
            &[DType::INT32, DType::INT32],
        )?],
        "ring.add_i32",
        move |invocation, _| {
            let lhs = invocation.call().tensor(0)?.to_values()?;
            let rhs = invocation.call().tensor(1)?.to_values()?;
            let result = invocation.allocate_result(0)?;
            let layout = result.layout().clone();
            let mut sums = Vec::with_capacity(lhs.len());
            for (a, b) in lhs.iter().zip(&rhs) {
                let (Value::Int(a), Value::Int(b)) = (a, b) else {
                    return Err(Error::Type("the Ring's add takes Int32 values".into()));
                };
                let (a, b) = (*a as i32, *b as i32);
                let sum = if flaw == Flaw::WrappingAdd {
                    a.wrapping_add(b)
                } else {
                    a.checked_add(b).ok_or_else(|| {
                        Error::Overflow(format!("{a} + {b} leaves the Int32 range"))
                    })?
                };
                sums.push(Value::Int(sum.into()));
            }
            for (i, sum) in sums.into_iter().enumerate() {
                result.carrier().set(layout.index_of(i)?, sum)?;
            }
            Ok(vec![result])
        },
    )
}

/// The fault points of every Ring callback.
pub fn ring_faults() -> FaultInjector {
    FaultInjector::new([
        FaultInjector::ALLOCATE,
        "read",
        "write",
        "release",
        "prepare",
        "submit",
    ])
}

/// Registers a fresh Ring class with `flaw` whose callbacks consult `faults`; `kernels`
/// names the built-ins it runs (the unary `neg` and `relu` on Float32; `add` on Int32, which
/// also makes the class store Int32).
pub fn define_ring(flaw: Flaw, faults: &FaultInjector, kernels: &[&'static str]) -> CarrierClass {
    let class = CarrierClass::mint("Ring", ClassKind::Independent);
    let interface = InterfaceHandle::new(KernelExecutionInterface::new("1").unwrap()).unwrap();
    let ints = kernels.contains(&"add");
    let patterns = kernels.iter().map(|name| match *name {
        "add" => int_add_kernel(flaw).unwrap(),
        _ => unary_kernel(name, class, flaw, faults.clone()).unwrap(),
    });
    let kernels = KernelProvider::new(interface, patterns).unwrap();
    let definition = CarrierDefinition::new(storage(flaw, faults.clone(), ints))
        .with_kernels(kernels)
        .unwrap();
    register_carrier_definition(class, definition).unwrap();
    class
}

/// A Ring carrier of `class` holding `values`.
pub fn ring_carrier(class: CarrierClass, dtype: DType, values: &[Value]) -> Result<Carrier> {
    let carrier = Carrier::create(class, Ring::default(), values.len(), dtype, true)?;
    for (i, value) in values.iter().enumerate() {
        carrier.set(i, *value)?;
    }
    Ok(carrier)
}

/// A factory over a fresh Ring class with `flaw` and the `neg` kernel.
pub fn ring(flaw: Flaw) -> Factory {
    ring_running(flaw, &["neg"])
}

/// A factory over a fresh Ring class with `flaw` running `kernels` (see [`define_ring`]).
pub fn ring_running(flaw: Flaw, kernels: &[&'static str]) -> Factory {
    let kernels = kernels.to_vec();
    let (_, factory) = ring_parts(flaw, &kernels);
    factory.with_fresh_class(move || Ok(ring_parts(flaw, &kernels)))
}

/// A fresh Ring class with `flaw` running `kernels`, and a factory over it without a
/// fresh-class hook.
pub fn ring_parts(flaw: Flaw, kernels: &[&'static str]) -> (CarrierClass, Factory) {
    let faults = ring_faults();
    let class = define_ring(flaw, &faults, kernels);
    let factory = Factory::new(format!("Ring ({flaw:?})"), move |dtype, values| {
        ring_carrier(class, dtype, values)
    })
    .with_faults(faults);
    (class, factory)
}

/// The message of the broken promise `promise` of `factory`, failing the test when it held
/// or another promise broke.
pub fn broken_message(factory: &Factory, promise: Promise) -> String {
    match check(factory, promise).verdict {
        Verdict::Broken(broken) => {
            assert_eq!(broken.promise, promise);
            broken.to_string()
        }
        other => panic!("{promise} should have broken, got {other:?}"),
    }
}

/// The promises of `factory` that broke.
pub fn broken_promises(factory: &Factory) -> Vec<Promise> {
    run(factory).broken().iter().map(|b| b.promise).collect()
}

/// How a [`Bag`] is broken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BagFlaw {
    /// None: a correct definition-free carrier that grows as a move destination.
    None,
    /// `set_extent` only ever adds slots, so a failed move into an empty Bag leaves it grown.
    NeverShrinks,
    /// The bulk write (`write_all`, what scatter uses) stores only the first pair it is given.
    DropsBulkPairs,
    /// `write` writes the value again through the carrier's own public handle: each `set`
    /// lands twice and bumps the version twice.
    WritesTwice,
    /// `read` answers the next slot's value (the last slot answers the first's).
    ReadsNextSlot,
    /// The factories copy the prototype's configuration out of its storage, so they fail once
    /// the prototype is released.
    FactoriesNeedLiveStorage,
    /// `allocate_like` copies the prototype's values instead of zeroing.
    AllocateKeepsValues,
}

/// A definition-free carrier of Float32 values that grows as a move destination, broken by
/// its [`BagFlaw`].
pub struct Bag {
    values: parking_lot::RwLock<Vec<Value>>,
    flaw: BagFlaw,
    /// The carrier's own handle, for [`BagFlaw::WritesTwice`].
    me: std::sync::Arc<std::sync::OnceLock<Carrier>>,
    writing_again: std::sync::atomic::AtomicBool,
    released: std::sync::atomic::AtomicBool,
}

impl Bag {
    /// A factory named `name` of Bags with `flaw`.
    pub fn factory(name: &str, flaw: BagFlaw) -> Factory {
        Factory::new(name, move |dtype, values| {
            let bag = Bag::holding(values.to_vec(), flaw);
            let me = std::sync::Arc::clone(&bag.me);
            let carrier = Carrier::new(bag, dtype, true)?;
            let _ = me.set(carrier.clone());
            Ok(carrier)
        })
    }

    fn holding(values: Vec<Value>, flaw: BagFlaw) -> Bag {
        Bag {
            values: parking_lot::RwLock::new(values),
            flaw,
            me: std::sync::Arc::default(),
            writing_again: std::sync::atomic::AtomicBool::new(false),
            released: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// What the factories take from the prototype: nothing, unless the flaw makes them read
    /// it out of storage that a release took away.
    fn configuration(&self) -> Result<()> {
        let released = self.released.load(std::sync::atomic::Ordering::SeqCst);
        if self.flaw == BagFlaw::FactoriesNeedLiveStorage && released {
            return Err(Error::Runtime(
                "the Bag's factories read their configuration from the prototype's storage, \
                 which release freed"
                    .into(),
            ));
        }
        Ok(())
    }
}

impl strideweave::carrier::DefinitionFreeCarrier for Bag {
    const NAME: &'static str = "Bag";

    fn supports_storage_dtype(&self, dtype: DType) -> bool {
        dtype == DType::FLOAT32
    }

    fn size(&self) -> usize {
        self.values.read().len()
    }

    fn read(&self, index: usize, _dtype: DType) -> Result<Value> {
        let values = self.values.read();
        Ok(match self.flaw {
            BagFlaw::ReadsNextSlot => values[(index + 1) % values.len()],
            _ => values[index],
        })
    }

    fn write(&self, index: usize, value: Value, _dtype: DType) -> Result<()> {
        use std::sync::atomic::Ordering;
        self.values.write()[index] = value;
        if self.flaw == BagFlaw::WritesTwice && !self.writing_again.swap(true, Ordering::SeqCst) {
            let again = self.me.get().map_or(Ok(()), |me| me.set(index, value));
            self.writing_again.store(false, Ordering::SeqCst);
            again?;
        }
        Ok(())
    }

    fn write_all(&self, writes: &[(usize, Value)], dtype: DType) -> Result<()> {
        let kept = match self.flaw {
            BagFlaw::DropsBulkPairs => &writes[..writes.len().min(1)],
            _ => writes,
        };
        kept.iter()
            .try_for_each(|&(index, value)| self.write(index, value, dtype))
    }

    fn release(&self) -> Result<()> {
        self.values.write().clear();
        self.released
            .store(true, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }

    fn new_like(&self, values: &[Value], _dtype: DType) -> Result<Self> {
        self.configuration()?;
        Ok(Bag::holding(values.to_vec(), self.flaw))
    }

    fn allocate_like(&self, size: usize, _dtype: DType, _empty: bool) -> Result<Self> {
        self.configuration()?;
        let values = match self.flaw {
            BagFlaw::AllocateKeepsValues => {
                let mut kept = self.values.read().clone();
                kept.resize(size, Value::Float(0.0));
                kept
            }
            _ => vec![Value::Float(0.0); size],
        };
        Ok(Bag::holding(values, self.flaw))
    }

    fn grows_as_destination(&self) -> bool {
        true
    }

    fn set_extent(&self, slots: usize, _dtype: DType) -> Result<()> {
        let mut values = self.values.write();
        if self.flaw != BagFlaw::NeverShrinks || slots > values.len() {
            values.resize(slots, Value::Float(0.0));
        }
        Ok(())
    }
}
