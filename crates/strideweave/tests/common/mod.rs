//! Test carriers with injectable failures, shared by the integration tests.

#![allow(dead_code)]

use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use strideweave::carrier::{Carrier, ClassKind, DefinitionFreeCarrier};
use strideweave::carriers::extension::StorageProvider;
use strideweave::operation::{Operation, ResolvedInvocation};
use strideweave::{DType, Error, Result, Tensor, Value};

pub mod slots;
pub mod tiled;

/// A definition-free carrier whose hooks can be made to fail. The marker `M` makes a
/// distinct exact class per test that registers process-global routes, so parallel tests
/// do not see each other's registrations.
#[derive(Debug)]
pub struct Flaky<M: 'static = ()> {
    pub values: Mutex<Vec<Value>>,
    pub fail_writes: AtomicBool,
    pub fail_reads: AtomicBool,
    pub growable: bool,
    /// Makes the dispatched "neg" return a result with the wrong layout.
    pub wrong_results: AtomicBool,
    /// The operation the dispatch hook hands out for "cached" (wrongly, every time).
    pub cached: OnceLock<Operation>,
    marker: PhantomData<fn() -> M>,
}

impl<M: 'static> Default for Flaky<M> {
    fn default() -> Self {
        Flaky {
            values: Mutex::default(),
            fail_writes: AtomicBool::default(),
            fail_reads: AtomicBool::default(),
            growable: false,
            wrong_results: AtomicBool::new(false),
            cached: OnceLock::new(),
            marker: PhantomData,
        }
    }
}

impl<M: 'static> Flaky<M> {
    pub fn carrier(values: &[f64], mutable: bool) -> Carrier {
        let body = Flaky::<M> {
            values: Mutex::new(values.iter().map(|v| Value::Float(*v)).collect()),
            ..Flaky::default()
        };
        Carrier::new(body, DType::FLOAT32, mutable).expect("Flaky stores Float32")
    }

    pub fn growable() -> Carrier {
        let body = Flaky::<M> {
            growable: true,
            ..Flaky::default()
        };
        Carrier::new(body, DType::FLOAT32, true).expect("Flaky stores Float32")
    }

    pub fn of(carrier: &Carrier) -> &Flaky<M> {
        carrier.downcast_ref::<Flaky<M>>().expect("a Flaky carrier")
    }
}

impl<M: 'static> DefinitionFreeCarrier for Flaky<M> {
    const NAME: &'static str = "Flaky";

    fn supports_storage_dtype(&self, dtype: DType) -> bool {
        dtype == DType::FLOAT32
    }

    fn size(&self) -> usize {
        self.values.lock().unwrap().len()
    }

    fn read(&self, index: usize, _dtype: DType) -> Result<Value> {
        if self.fail_reads.load(Ordering::SeqCst) {
            return Err(Error::Runtime("injected read failure".into()));
        }
        Ok(self.values.lock().unwrap()[index])
    }

    fn write(&self, index: usize, value: Value, _dtype: DType) -> Result<()> {
        if self.fail_writes.load(Ordering::SeqCst) {
            return Err(Error::Runtime("injected write failure".into()));
        }
        self.values.lock().unwrap()[index] = value;
        Ok(())
    }

    fn release(&self) -> Result<()> {
        self.values.lock().unwrap().clear();
        Ok(())
    }

    fn new_like(&self, values: &[Value], _dtype: DType) -> Result<Self> {
        Ok(Flaky {
            values: Mutex::new(values.to_vec()),
            ..Flaky::default()
        })
    }

    fn allocate_like(&self, size: usize, _dtype: DType, _empty: bool) -> Result<Self> {
        Ok(Flaky {
            values: Mutex::new(vec![Value::Float(0.0); size]),
            ..Flaky::default()
        })
    }

    fn grows_as_destination(&self) -> bool {
        self.growable
    }

    /// "neg" is a fresh operation per call computing the built-in `neg` (with a wrong result
    /// layout while `wrong_results` is set); "cached" reuses one operation (a contract
    /// violation).
    fn dispatch_op(&self, name: &str) -> Result<Operation> {
        let wrong = self.wrong_results.load(Ordering::SeqCst);
        let negate = move || {
            Operation::new(move |invocation: &ResolvedInvocation| {
                let input = invocation.call().tensor(0)?;
                let values = input
                    .to_values()?
                    .into_iter()
                    .map(|v| Value::Float(-v.as_f64().unwrap_or(0.0)))
                    .collect::<Vec<_>>();
                let spec = &invocation.results()[0];
                let carrier = input
                    .carrier()
                    .new_like(&values, true, Some(spec.dtype()))?;
                let layout = if wrong {
                    spec.layout().unsqueeze(0)?
                } else {
                    spec.layout().clone()
                };
                Ok(vec![Tensor::new(carrier, 0, layout)?])
            })
        };
        let triple = || {
            Operation::new(move |invocation: &ResolvedInvocation| {
                let input = invocation.call().tensor(0)?;
                let values = input
                    .to_values()?
                    .into_iter()
                    .map(|v| Value::Float(3.0 * v.as_f64().unwrap_or(0.0)))
                    .collect::<Vec<_>>();
                let spec = &invocation.results()[0];
                let carrier = input
                    .carrier()
                    .new_like(&values, true, Some(spec.dtype()))?;
                Ok(vec![Tensor::new(carrier, 0, spec.layout().clone())?])
            })
        };
        match name {
            "neg" => Ok(negate()),
            "custom.triple" => Ok(triple()),
            "cached" => Ok(self.cached.get_or_init(negate).clone()),
            _ => Err(Error::NotImplemented(format!(
                "Flaky dispatches no '{name}'"
            ))),
        }
    }

    fn set_extent(&self, slots: usize, _dtype: DType) -> Result<()> {
        self.values.lock().unwrap().resize(slots, Value::Float(0.0));
        Ok(())
    }
}

/// A dependent test class (composes others): closed to capability declarations.
#[derive(Debug)]
pub struct Composite;

impl DefinitionFreeCarrier for Composite {
    const NAME: &'static str = "Composite";
    const KIND: ClassKind = ClassKind::Dependent;

    fn supports_storage_dtype(&self, dtype: DType) -> bool {
        dtype == DType::FLOAT32
    }
    fn size(&self) -> usize {
        0
    }
    fn read(&self, _index: usize, _dtype: DType) -> Result<Value> {
        Err(Error::Runtime("Composite holds nothing".into()))
    }
    fn write(&self, _index: usize, _value: Value, _dtype: DType) -> Result<()> {
        Err(Error::Runtime("Composite holds nothing".into()))
    }
    fn release(&self) -> Result<()> {
        Ok(())
    }
    fn new_like(&self, _values: &[Value], _dtype: DType) -> Result<Self> {
        Ok(Composite)
    }
    fn allocate_like(&self, _size: usize, _dtype: DType, _empty: bool) -> Result<Self> {
        Ok(Composite)
    }
}

/// Float32 values as `Value`s.
pub fn floats(values: &[f64]) -> Vec<Value> {
    values.iter().map(|v| Value::Float(*v)).collect()
}

/// The provider-owned state of the definition-backed test carriers: plain Float32 slots.
#[derive(Clone, Default)]
pub struct F32s(pub Vec<f32>);

/// A storage provider over [`F32s`] that stores Float32 and rejects other values.
pub fn f32_storage() -> StorageProvider {
    StorageProvider::new(
        |_: &F32s, dtype| dtype == DType::FLOAT32,
        |state: &F32s| state.0.len() as i64,
        |state: &mut F32s, slots, _dtype| {
            state.0 = vec![0.0; slots];
            Ok(())
        },
        |state: &mut F32s| {
            state.0.clear();
            Ok(())
        },
        |state: &F32s, index| Ok(Value::Float(f64::from(state.0[index]))),
        |state: &mut F32s, index, value| match value {
            Value::Float(x) => {
                state.0[index] = x as f32;
                Ok(())
            }
            other => Err(Error::Type(format!("F32s stores floats, not {other:?}"))),
        },
    )
}
