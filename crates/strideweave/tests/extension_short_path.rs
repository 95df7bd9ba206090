//! The short authoring path: `SlotStorage`, `KernelPattern::synchronous`,
//! `KernelProvider::with_default_interface`, `OperationCapability::builtin`,
//! `ResolvedInvocation::allocate_result` / `result_from_f32`, `Tensor::from_f32` /
//! `to_f32_vec` / `write_f32` and `call_one` build the same records as the long form, with the
//! framework's checks and atomicity unchanged.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

mod common;

use common::slots::{slots_class, Slots};
use strideweave::carrier::{Carrier, CarrierClass};
use strideweave::operation::{
    call, call_one, resolve_operation_plan, OperationCapability, PlanOperand,
};
use strideweave::{DType, Error, ErrorKind, KernelPattern, Result, Shape, Tensor, Value};

/// A class with a synchronous `neg` that fails while `fail` is set.
fn class(fail: Arc<AtomicBool>) -> Result<CarrierClass> {
    let neg = KernelPattern::synchronous(
        [OperationCapability::builtin("neg", &[DType::FLOAT32])?],
        "short.neg",
        move |invocation, _| {
            let x = invocation.call().tensor(0)?.to_f32_vec()?;
            let out = invocation.allocate_result(0)?;
            out.write_f32(&x.iter().map(|v| -v).collect::<Vec<_>>())?;
            if fail.load(Ordering::SeqCst) {
                return Err(Error::Runtime("the short neg failed on purpose".into()));
            }
            Ok(vec![out])
        },
    )?;
    slots_class("ShortSlots", [neg], false)
}

fn tensor(class: CarrierClass, xs: &[f32]) -> Result<Tensor> {
    let carrier = Carrier::create(class, Slots::default(), xs.len(), DType::FLOAT32, true)?;
    let t = Tensor::compact(carrier, Shape::new(xs.len())?)?;
    t.write_f32(xs)?;
    Ok(t)
}

#[test]
fn slot_storage_goes_through_the_framework_checks() -> Result<()> {
    let class = class(Arc::default())?;
    let carrier = Carrier::create(class, Slots::default(), 3, DType::FLOAT32, true)?;
    carrier.set(1, Value::Float(0.1))?;
    assert_eq!(carrier.get(1)?, Value::Float(0.10000000149011612));
    assert_eq!(carrier.version(), 1);
    assert_eq!(carrier.get(3).unwrap_err().kind(), ErrorKind::Index);
    assert_eq!(
        carrier.set(0, Value::Bool(true)).unwrap_err().kind(),
        ErrorKind::Type
    );
    assert!(!carrier.supports_storage_dtype(DType::INT32)?);
    let error = Carrier::create(class, Slots::default(), 1, DType::INT32, true).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value);
    carrier.release()?;
    assert_eq!((carrier.size(), carrier.version()), (0, 1));
    assert_eq!(carrier.get(0).unwrap_err().kind(), ErrorKind::Runtime);
    let fresh = carrier.allocate_like(2, true, None, false)?;
    assert_eq!(fresh.class(), class);
    assert_eq!(fresh.get(1)?, Value::Float(0.0));
    Ok(())
}

#[test]
fn a_synchronous_kernel_publishes_its_results_and_advertises_its_plan() -> Result<()> {
    let class = class(Arc::default())?;
    let x = tensor(class, &[1.5, -2.0, 0.25])?;
    let plan = resolve_operation_plan("neg", &[PlanOperand::Tensor(DType::FLOAT32)], None)?;
    assert_eq!(
        x.carrier().capabilities().to_vec(),
        [OperationCapability::from_plan(plan)]
    );
    let y = call_one("neg", [x.clone().into()], &[])?;
    assert_eq!(y.carrier().class(), class);
    assert_eq!(y.to_f32_vec()?, [-1.5, 2.0, -0.25]);
    assert_eq!(call("neg", [x.clone().into()], &[])?.len(), 1);
    let refused = call_one("relu", [x.into()], &[]).unwrap_err();
    assert!(
        matches!(refused, Error::UnsupportedOperationPlan(_)),
        "{refused}"
    );
    Ok(())
}

#[test]
fn a_failing_synchronous_kernel_publishes_nothing() -> Result<()> {
    let fail = Arc::new(AtomicBool::new(true));
    let class = class(Arc::clone(&fail))?;
    let x = tensor(class, &[1.0, 2.0])?;
    let version = x.version();
    let error = call_one("neg", [x.clone().into()], &[]).unwrap_err();
    assert_eq!(
        error.to_string(),
        "runtime error: the short neg failed on purpose"
    );
    assert_eq!((x.version(), x.to_f32_vec()?), (version, vec![1.0, 2.0]));
    fail.store(false, Ordering::SeqCst);
    assert_eq!(
        call_one("neg", [x.into()], &[])?.to_f32_vec()?,
        [-1.0, -2.0]
    );
    Ok(())
}

/// A synchronous kernel runs where the long form's prepared record would be submitted: it
/// receives the provider's own interface instance and the call's operands, a panic in it is
/// the pattern's `submit` panicking, an empty result list is refused as the long form's
/// `ProviderResult` refuses it, and neither publishes anything.
#[test]
fn a_synchronous_kernel_runs_as_the_submission_of_its_long_form() -> Result<()> {
    let mode = Arc::new(std::sync::atomic::AtomicU8::new(0));
    let seen = Arc::clone(&mode);
    let neg = KernelPattern::synchronous(
        [OperationCapability::builtin("neg", &[DType::FLOAT32])?],
        "short.modes",
        move |invocation, interface| {
            assert_eq!(interface.identity().version(), "1");
            match seen.load(Ordering::SeqCst) {
                0 => panic!("the short neg panicked on purpose"),
                1 => Ok(Vec::new()),
                _ => {
                    let x = invocation.call().tensor(0)?.to_f32_vec()?;
                    Ok(vec![invocation.result_from_f32(
                        0,
                        &x.iter().map(|v| -v).collect::<Vec<_>>(),
                    )?])
                }
            }
        },
    )?;
    let class = slots_class("ShortModes", [neg], false)?;
    let x = tensor(class, &[1.0, -3.0])?;
    let version = x.version();
    let panicked = call_one("neg", [x.clone().into()], &[]).unwrap_err();
    assert_eq!(
        panicked.to_string(),
        "provider contract violated: kernel pattern 'short.modes' of ShortModes panicked in \
         submit: the short neg panicked on purpose"
    );
    mode.store(1, Ordering::SeqCst);
    let empty = call_one("neg", [x.clone().into()], &[]).unwrap_err();
    assert_eq!(empty.kind(), ErrorKind::Value, "{empty}");
    assert!(empty.to_string().contains("ProviderResult"), "{empty}");
    assert_eq!((x.version(), x.to_f32_vec()?), (version, vec![1.0, -3.0]));
    mode.store(2, Ordering::SeqCst);
    assert_eq!(call_one("neg", [x.into()], &[])?.to_f32_vec()?, [-1.0, 3.0]);
    Ok(())
}

#[test]
fn a_synchronous_pattern_needs_a_plan_of_one_operation() -> Result<()> {
    let kernel = |_: &_, _: &_| Ok(Vec::new());
    let empty = KernelPattern::synchronous([], "short.none", kernel).unwrap_err();
    assert_eq!(empty.kind(), ErrorKind::Value);
    assert!(
        empty
            .to_string()
            .contains("'short.none' needs at least one plan"),
        "{empty}"
    );
    let mixed = KernelPattern::synchronous(
        [
            OperationCapability::builtin("neg", &[DType::FLOAT32])?,
            OperationCapability::builtin("relu", &[DType::FLOAT32])?,
        ],
        "short.mixed",
        kernel,
    )
    .unwrap_err();
    assert_eq!(mixed.kind(), ErrorKind::Value);
    Ok(())
}

#[test]
fn a_builtin_capability_is_the_plan_planning_resolves() -> Result<()> {
    let add = OperationCapability::builtin("add", &[DType::INT32, DType::FLOAT32])?;
    let plan = resolve_operation_plan(
        "add",
        &[
            PlanOperand::Tensor(DType::INT32),
            PlanOperand::Tensor(DType::FLOAT32),
        ],
        None,
    )?;
    assert!(add.matches(&plan));
    let unknown = OperationCapability::builtin("nope", &[DType::FLOAT32]).unwrap_err();
    assert_eq!(unknown.kind(), ErrorKind::NotImplemented);
    let arity = OperationCapability::builtin("neg", &[]).unwrap_err();
    assert_eq!(arity.kind(), ErrorKind::Type);
    Ok(())
}

#[test]
fn f32_values_check_dtype_and_count_before_writing() -> Result<()> {
    let t = Tensor::from_f32(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], Shape::new((2, 3))?)?;
    let row = t.slice(&[
        strideweave::SliceKey::Index(1),
        strideweave::SliceKey::all(),
    ])?;
    assert_eq!(row.to_f32_vec()?, [2.0, 4.0, 6.0]);
    row.write_f32(&[-2.0, -4.0, -6.0])?;
    assert_eq!(t.to_f32_vec()?, [1.0, -2.0, 3.0, -4.0, 5.0, -6.0]);
    assert_eq!(t.version(), 3);
    let count = row.write_f32(&[1.0]).unwrap_err();
    assert_eq!(
        count.to_string(),
        "value error: 1 values for a tensor of 3 elements"
    );
    assert_eq!(t.version(), 3);
    let shape = Tensor::from_f32(&[1.0], Shape::new(2)?).unwrap_err();
    assert_eq!(shape.kind(), ErrorKind::Value);
    let ints = Tensor::compact(
        strideweave::carriers::Cpu::from_i32(&[1, 2], true)?,
        Shape::new(2)?,
    )?;
    assert_eq!(
        ints.to_f32_vec().unwrap_err().to_string(),
        "type error: to_f32_vec needs a Float32 tensor, got Int32"
    );
    assert_eq!(
        ints.write_f32(&[1.0, 2.0]).unwrap_err().kind(),
        ErrorKind::Type
    );
    assert_eq!(ints.version(), 0);
    Ok(())
}
