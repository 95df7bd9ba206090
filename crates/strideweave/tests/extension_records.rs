//! The carrier-extension value records (carrier-extension spec): Unsupported, the completion
//! protocol and CompletionCell, ProviderResult, execution-interface identity and the
//! prepared-work records.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;

use strideweave::carriers::extension::{
    CompletionCell, ExecutionInterface, InterfaceHandle, KernelExecutionInterface,
    PreparedComposite, PreparedKernel, PreparedTransfer, ProviderCompletion, ProviderResult,
    Submitted, Unsupported,
};
use strideweave::carriers::Generic;
use strideweave::{DType, Error, ErrorKind, Result, Shape, Tensor, Value};

fn tensor(values: &[f64]) -> Result<Tensor> {
    let values: Vec<Value> = values.iter().copied().map(Value::Float).collect();
    let carrier = Generic::carrier(&values, DType::FLOAT32, true)?;
    Tensor::compact(carrier, Shape::flat(&[values.len()])?)
}

struct AcceleratorInterface {
    base: KernelExecutionInterface,
    stream: u32,
}

impl ExecutionInterface for AcceleratorInterface {
    fn version(&self) -> &str {
        self.base.version()
    }
}

struct OtherInterface {
    base: KernelExecutionInterface,
}

impl ExecutionInterface for OtherInterface {
    fn version(&self) -> &str {
        self.base.version()
    }
}

struct EmptyVersionInterface;

impl ExecutionInterface for EmptyVersionInterface {
    fn version(&self) -> &str {
        ""
    }
}

fn accelerator(version: &str, stream: u32) -> Result<InterfaceHandle> {
    InterfaceHandle::new(AcceleratorInterface {
        base: KernelExecutionInterface::new(version)?,
        stream,
    })
}

#[test]
fn unsupported_requires_a_non_empty_reason() -> Result<()> {
    let error = Unsupported::new("").unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value);
    assert!(error.to_string().contains("Unsupported"), "{error}");
    assert!(error.to_string().contains("non-empty"), "{error}");

    let rejection = Unsupported::new("misaligned source layout")?;
    assert_eq!(rejection.reason(), "misaligned source layout");
    assert_eq!(rejection.clone(), rejection);
    Ok(())
}

#[test]
fn provider_result_requires_outputs_and_keeps_their_order() -> Result<()> {
    let error = ProviderResult::new(Vec::<Tensor>::new()).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value);
    assert!(error.to_string().contains("ProviderResult"), "{error}");
    assert!(error.to_string().contains("non-empty"), "{error}");

    let a = tensor(&[1.0, 2.0])?;
    let b = tensor(&[3.0])?;
    // A one-shot iterator: materialized exactly once.
    let result = ProviderResult::new(std::iter::once(a.clone()).chain([b.clone()]))?;
    assert_eq!(result.outputs().len(), 2);
    assert!(result.outputs()[0].same_as(&a));
    assert!(result.outputs()[1].same_as(&b));
    // A copy holds the very same output tensors.
    let copy = result.clone();
    assert_eq!(copy.outputs().len(), 2);
    assert!(copy.outputs()[0].same_as(&a) && copy.outputs()[1].same_as(&b));
    Ok(())
}

#[test]
fn execution_interface_requires_a_non_empty_version() {
    let error = KernelExecutionInterface::new("").unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value);
    assert!(
        error.to_string().contains("KernelExecutionInterface"),
        "{error}"
    );
    assert!(error.to_string().contains("non-empty"), "{error}");

    let error = InterfaceHandle::new(EmptyVersionInterface).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value);
    assert!(
        error.to_string().contains("EmptyVersionInterface"),
        "{error}"
    );
}

#[test]
fn completion_is_not_done_until_completed_and_then_stable() {
    let cell = CompletionCell::<Arc<String>>::new();
    assert!(!cell.done());
    let value = Arc::new("result".to_string());
    assert!(cell.complete(Ok(Arc::clone(&value))));
    assert!(cell.done());

    // A second completion is ignored.
    assert!(!cell.complete(Ok(Arc::new("other".to_string()))));
    assert!(!cell.complete(Err(Error::Runtime("late".into()))));
    assert!(cell.done());

    for _ in 0..3 {
        let observed = cell.wait().unwrap();
        assert!(
            Arc::ptr_eq(&observed, &value),
            "same terminal value identity"
        );
    }
}

#[test]
fn concurrent_waiters_spawned_before_completion_see_the_same_value() {
    let cell = CompletionCell::<Arc<Vec<u8>>>::new();
    let started = Arc::new(Barrier::new(5));
    let waiters: Vec<_> = (0..4)
        .map(|_| {
            let cell = cell.clone();
            let started = Arc::clone(&started);
            thread::spawn(move || {
                started.wait();
                cell.wait()
            })
        })
        .collect();
    started.wait();
    assert!(!cell.done());
    let value = Arc::new(vec![1, 2, 3]);
    assert!(cell.complete(Ok(Arc::clone(&value))));
    for waiter in waiters {
        let observed = waiter.join().unwrap().unwrap();
        assert!(Arc::ptr_eq(&observed, &value));
    }
    assert!(Arc::ptr_eq(&cell.wait().unwrap(), &value));
}

#[test]
fn an_error_completion_returns_equal_errors_every_time() {
    let cell = CompletionCell::<u32>::new();
    let waiters: Vec<_> = (0..4)
        .map(|_| {
            let cell = cell.clone();
            thread::spawn(move || cell.wait())
        })
        .collect();
    assert!(cell.complete(Err(Error::Runtime("device lost".into()))));
    assert!(!cell.complete(Ok(1)));
    let first = cell.wait().unwrap_err();
    assert_eq!(first.kind(), ErrorKind::Runtime);
    for waiter in waiters {
        let error = waiter.join().unwrap().unwrap_err();
        assert_eq!(error.kind(), first.kind());
        assert_eq!(error.to_string(), first.to_string());
    }
    let again = cell.wait().unwrap_err();
    assert_eq!(again.to_string(), first.to_string());
}

#[test]
fn a_ready_completion_is_done_from_the_start() {
    let cell = CompletionCell::ready(Ok(5_u8));
    assert!(cell.done());
    assert_eq!(cell.wait().unwrap(), 5);
    assert!(!cell.complete(Ok(6)));
    assert_eq!(cell.wait().unwrap(), 5);
}

#[test]
fn interface_identity_is_exact_type_and_version() -> Result<()> {
    let a = accelerator("1.0", 0)?;
    let b = accelerator("1.0", 7)?; // different facilities, same identity
    let newer = accelerator("2.0", 0)?;
    let other = InterfaceHandle::new(OtherInterface {
        base: KernelExecutionInterface::new("1.0")?,
    })?;
    let base = InterfaceHandle::new(KernelExecutionInterface::new("1.0")?)?;

    assert_eq!(a.identity(), b.identity());
    assert_ne!(a.identity(), newer.identity());
    assert_ne!(a.identity(), other.identity());
    assert_ne!(a.identity(), base.identity());
    assert_ne!(other.identity(), base.identity());
    assert_eq!(a.identity().version(), "1.0");
    assert_eq!(a.version(), "1.0");

    // The trait's own identity agrees with the handle's.
    let concrete = AcceleratorInterface {
        base: KernelExecutionInterface::new("1.0")?,
        stream: 1,
    };
    assert_eq!(&concrete.identity(), a.identity());

    assert_eq!(
        b.downcast_ref::<AcceleratorInterface>().map(|i| i.stream),
        Some(7)
    );
    assert!(b.downcast_ref::<OtherInterface>().is_none());
    assert!(a.same_instance(&a.clone()));
    assert!(!a.same_instance(&b));
    Ok(())
}

#[test]
fn prepared_kernel_carries_its_interface_and_submits_once() -> Result<()> {
    let interface = accelerator("1.0", 2)?;
    let output = tensor(&[4.0, 5.0])?;
    let runs = Arc::new(AtomicUsize::new(0));
    let prepared = {
        let runs = Arc::clone(&runs);
        let output = output.clone();
        PreparedKernel::new(interface.clone(), move || {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok(Submitted::Ready(ProviderResult::new([output])?))
        })
    };
    assert_eq!(prepared.interface().identity(), interface.identity());
    assert!(prepared.interface().same_instance(&interface));
    assert_eq!(
        runs.load(Ordering::SeqCst),
        0,
        "construction does not submit"
    );

    let submitted = prepared.submit()?;
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert!(submitted.is_done());
    let result = submitted.wait()?;
    assert!(result.outputs()[0].same_as(&output));
    Ok(())
}

#[test]
fn pending_submission_wraps_a_completion() -> Result<()> {
    let output = tensor(&[1.0])?;
    let cell = CompletionCell::<ProviderResult>::new();
    let prepared = {
        let cell = cell.clone();
        PreparedComposite::new(move || Ok(Submitted::pending(cell)))
    };
    let submitted = prepared.submit()?;
    assert!(matches!(submitted, Submitted::Pending(_)));
    assert!(!submitted.is_done());

    let device = {
        let cell = cell.clone();
        let output = output.clone();
        thread::spawn(move || cell.complete(ProviderResult::new([output])))
    };
    let result = submitted.wait()?;
    assert!(device.join().unwrap());
    assert!(submitted.is_done());
    assert!(result.outputs()[0].same_as(&output));
    Ok(())
}

#[test]
fn transfer_submission_is_unit_or_a_completion_and_errors_propagate() -> Result<()> {
    let ready = PreparedTransfer::new(|| Ok(Submitted::Ready(())));
    assert!(ready.submit()?.wait().is_ok());

    let completion: Arc<dyn ProviderCompletion<()>> = Arc::new(CompletionCell::ready(Err(
        Error::Runtime("copy engine fault".into()),
    )));
    let pending = PreparedTransfer::new(move || Ok(Submitted::Pending(completion)));
    let submitted = pending.submit()?;
    assert!(submitted.is_done());
    let error = submitted.wait().unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime);
    assert!(error.to_string().contains("copy engine fault"));

    let failing = PreparedTransfer::new(|| Err(Error::Memory("no staging buffer".into())));
    assert_eq!(failing.submit().unwrap_err().kind(), ErrorKind::Memory);
    Ok(())
}

#[test]
fn a_panicking_submit_becomes_an_error() {
    let prepared = PreparedTransfer::new(|| panic!("driver exploded"));
    let error = prepared.submit().unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime);
    assert!(error.to_string().contains("PreparedTransfer"), "{error}");
    assert!(error.to_string().contains("driver exploded"), "{error}");
}
