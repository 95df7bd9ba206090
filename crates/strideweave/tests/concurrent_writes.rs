//! An operand written while an operation runs: the provider is blamed only for the writes it
//! made, and a write by another thread is a Runtime error saying so. Either way no result is
//! published.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Barrier, Mutex, Once};
use std::thread;

use strideweave::carrier::{register_operation_capabilities, CarrierClass, DefinitionFreeCarrier};
use strideweave::carriers::Cpu;
use strideweave::operation::{
    call, resolve_operation_plan, Operation, OperationCapability, PlanOperand, ResolvedInvocation,
};
use strideweave::{Carrier, DType, Error, ErrorKind, Result, Shape, Tensor, Value};

/// What the `neg` kernel of [`Scribble`] does to its operand before computing.
const PLAIN: u8 = 0;
const KERNEL_WRITES: u8 = 1;
const OTHER_THREAD_WRITES: u8 = 2;

/// A definition-free carrier whose dispatched `neg` may write its own operand, or have
/// another thread write it, while it runs.
#[derive(Debug, Default)]
struct Scribble {
    values: Mutex<Vec<Value>>,
    mode: AtomicU8,
}

impl DefinitionFreeCarrier for Scribble {
    const NAME: &'static str = "Scribble";

    fn supports_storage_dtype(&self, dtype: DType) -> bool {
        dtype == DType::FLOAT32
    }
    fn size(&self) -> usize {
        self.values.lock().unwrap().len()
    }
    fn read(&self, index: usize, _dtype: DType) -> Result<Value> {
        Ok(self.values.lock().unwrap()[index])
    }
    fn write(&self, index: usize, value: Value, _dtype: DType) -> Result<()> {
        self.values.lock().unwrap()[index] = value;
        Ok(())
    }
    fn release(&self) -> Result<()> {
        self.values.lock().unwrap().clear();
        Ok(())
    }
    fn new_like(&self, values: &[Value], _dtype: DType) -> Result<Self> {
        Ok(Scribble {
            values: Mutex::new(values.to_vec()),
            ..Scribble::default()
        })
    }
    fn allocate_like(&self, size: usize, _dtype: DType, _empty: bool) -> Result<Self> {
        Ok(Scribble {
            values: Mutex::new(vec![Value::Float(0.0); size]),
            ..Scribble::default()
        })
    }
    fn dispatch_op(&self, name: &str) -> Result<Operation> {
        if name != "neg" {
            return Err(Error::NotImplemented(format!("Scribble has no '{name}'")));
        }
        let mode = self.mode.load(Ordering::SeqCst);
        Ok(Operation::new(move |invocation: &ResolvedInvocation| {
            let input = invocation.call().tensor(0)?.clone();
            match mode {
                KERNEL_WRITES => input.set(&0.into(), Value::Float(100.0))?,
                OTHER_THREAD_WRITES => {
                    let other = input.clone();
                    thread::spawn(move || other.set(&0.into(), Value::Float(200.0)))
                        .join()
                        .expect("the writer thread")?;
                }
                _ => {}
            }
            let values: Vec<Value> = input
                .to_values()?
                .into_iter()
                .map(|v| Value::Float(-v.as_f64().unwrap_or(0.0)))
                .collect();
            let spec = &invocation.results()[0];
            let carrier = input
                .carrier()
                .new_like(&values, true, Some(spec.dtype()))?;
            Ok(vec![Tensor::new(carrier, 0, spec.layout().clone())?])
        }))
    }
}

fn scribble(values: &[f64], mode: u8) -> Tensor {
    static DECLARE: Once = Once::new();
    DECLARE.call_once(|| {
        let plan =
            resolve_operation_plan("neg", &[PlanOperand::Tensor(DType::FLOAT32)], None).unwrap();
        register_operation_capabilities(
            CarrierClass::of::<Scribble>(),
            [OperationCapability::from_plan(plan)],
        )
        .unwrap();
    });
    let body = Scribble {
        values: Mutex::new(values.iter().map(|&v| Value::Float(v)).collect()),
        mode: AtomicU8::new(mode),
    };
    let carrier = Carrier::new(body, DType::FLOAT32, true).unwrap();
    Tensor::compact(carrier, Shape::new(values.len()).unwrap()).unwrap()
}

#[test]
fn an_unmutated_operand_publishes_the_result() {
    let x = scribble(&[1.0, -2.0], PLAIN);
    let y = call("neg", [x.clone().into()], &[]).unwrap();
    assert_eq!(
        y[0].to_values().unwrap(),
        [Value::Float(-1.0), Value::Float(2.0)]
    );
    assert_eq!(x.version(), 0);
}

#[test]
fn a_kernel_that_writes_its_operand_breaks_the_provider_contract() {
    let x = scribble(&[1.0, -2.0], KERNEL_WRITES);
    let error = call("neg", [x.clone().into()], &[]).unwrap_err();
    assert!(matches!(error, Error::ProviderContract(_)), "{error:?}");
    assert_eq!(
        error.to_string(),
        "provider contract violated: 'neg' on Scribble: tensor operand 0 was mutated by the \
         provider"
    );
}

#[test]
fn another_thread_writing_the_operand_is_a_runtime_error_not_the_providers_fault() {
    let x = scribble(&[1.0, -2.0], OTHER_THREAD_WRITES);
    let error = call("neg", [x.clone().into()], &[]).unwrap_err();
    assert!(matches!(error, Error::Runtime(_)), "{error:?}");
    assert_eq!(error.kind(), ErrorKind::Runtime);
    assert_eq!(
        error.to_string(),
        "runtime error: 'neg' on Scribble: tensor operand 0 was written by another thread while \
         the operation ran; its results were discarded"
    );
    assert_eq!(x.version(), 1);
    assert_eq!(x.get(&0.into()).unwrap(), Value::Float(200.0));
}

#[test]
fn a_concurrent_writer_never_makes_cpu_operations_blame_the_provider() {
    let values: Vec<f32> = (0..4096).map(|i| i as f32).collect();
    let x = Tensor::compact(
        Cpu::from_f32(&values, true).unwrap(),
        Shape::new(4096).unwrap(),
    )
    .unwrap();
    let start = Arc::new(Barrier::new(2));
    let writer = {
        let (x, start) = (x.clone(), Arc::clone(&start));
        thread::spawn(move || {
            start.wait();
            for i in 0..20_000u32 {
                x.set(&((i % 4096) as usize).into(), Value::Float(f64::from(i)))
                    .unwrap();
            }
        })
    };
    start.wait();
    for _ in 0..2_000 {
        match call("add", [x.clone().into(), x.clone().into()], &[]) {
            Ok(results) => assert_eq!(results[0].size(), 4096),
            Err(error) => {
                assert!(matches!(error, Error::Runtime(_)), "{error:?}");
                assert!(
                    error.to_string().ends_with(
                        "was written by another thread while the operation ran; its results \
                         were discarded"
                    ),
                    "{error}"
                );
            }
        }
    }
    writer.join().unwrap();
}
