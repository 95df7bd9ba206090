//! Dispatch of calls on definition-free carriers (docs/carriers.md, Dispatch;
//! Worked examples item 7):
//! fresh operations with metadata, the capability gate, mixed classes, publication checks.

mod common;

use std::sync::Once;

use strideweave::carrier::{register_operation_capabilities, CarrierClass};
use strideweave::carriers::{Cpu, Generic};
use strideweave::operation::{call, resolve_operation_plan, OperationCapability, PlanOperand};
use strideweave::{DType, ErrorKind, Shape, Tensor, Value};

/// Marks the Flaky class these tests declare `neg` for.
struct Declared;
type Flaky = common::Flaky<Declared>;

/// Declares exactly the Float32 `neg` plan for the Flaky class of these tests.
fn declare_neg() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let plan =
            resolve_operation_plan("neg", &[PlanOperand::Tensor(DType::FLOAT32)], None).unwrap();
        register_operation_capabilities(
            CarrierClass::of::<Flaky>(),
            [OperationCapability::from_plan(plan)],
        )
        .unwrap();
    });
}

fn flaky(values: &[f64]) -> Tensor {
    declare_neg();
    let carrier = Flaky::carrier(values, true);
    Tensor::compact(carrier, Shape::new(values.len()).unwrap()).unwrap()
}

#[test]
fn each_dispatch_is_a_distinct_operation_with_metadata() {
    declare_neg();
    let carrier = Flaky::carrier(&[1.0, -2.0], true);
    let first = carrier.dispatch_op("neg").unwrap();
    let second = carrier.dispatch_op("neg").unwrap();
    assert!(!first.same_as(&second));
    assert_eq!(first.name(), Some("neg"));
    assert_eq!(first.carrier_class(), Some(CarrierClass::of::<Flaky>()));
    let generic = Generic::carrier(&[Value::Float(1.0)], DType::FLOAT32, true).unwrap();
    let relu = generic.dispatch_op("relu").unwrap();
    assert_eq!(
        (relu.name(), relu.carrier_class()),
        (Some("relu"), Some(CarrierClass::of::<Generic>()))
    );
}

#[test]
fn a_call_runs_the_declared_plan_on_a_custom_carrier() {
    let out = call("neg", [flaky(&[1.0, -2.0]).into()], &[]).unwrap();
    assert_eq!(
        out[0].to_values().unwrap(),
        vec![Value::Float(-1.0), Value::Float(2.0)]
    );
    assert_eq!(out[0].carrier().class(), CarrierClass::of::<Flaky>());
}

#[test]
fn an_undeclared_plan_is_refused_before_any_allocation() {
    let error = call("relu", [flaky(&[1.0]).into()], &[]).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotImplemented);
    assert_eq!(
        error.to_string(),
        "unsupported operation plan for 'relu': Flaky declares no operation-plan capability for 'relu'"
    );
}

#[test]
fn unknown_names_are_not_implemented() {
    declare_neg();
    let error = Flaky::carrier(&[1.0], true)
        .dispatch_op("nope")
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotImplemented);
    let generic = Generic::carrier(&[Value::Float(1.0)], DType::FLOAT32, true).unwrap();
    let error = generic.dispatch_op("nope").unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotImplemented);
    assert_eq!(
        call("nope", [flaky(&[1.0]).into()], &[])
            .unwrap_err()
            .kind(),
        ErrorKind::NotImplemented
    );
}

#[test]
fn a_cached_operation_is_a_type_error_and_keeps_its_first_metadata() {
    declare_neg();
    let carrier = Flaky::carrier(&[1.0], true);
    let first = carrier.dispatch_op("cached").unwrap();
    let error = carrier.dispatch_op("cached").unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Type);
    assert!(
        error
            .to_string()
            .contains("already dispatched as 'cached' by Flaky"),
        "{error}"
    );
    assert_eq!(first.name(), Some("cached"));
}

#[test]
fn mixed_carrier_classes_are_a_type_error_and_instances_of_one_class_work() {
    let generic = Generic::carrier(&[Value::Float(1.0)], DType::FLOAT32, true).unwrap();
    let generic = Tensor::compact(generic, Shape::new(1).unwrap()).unwrap();
    let cpu =
        Tensor::compact(Cpu::from_f32(&[2.0], true).unwrap(), Shape::new(1).unwrap()).unwrap();
    let error = call("add", [generic.clone().into(), cpu.clone().into()], &[]).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Type);
    assert!(error
        .to_string()
        .starts_with("type error: Tensor backing carriers must match"));
    let other_cpu =
        Tensor::compact(Cpu::from_f32(&[3.0], true).unwrap(), Shape::new(1).unwrap()).unwrap();
    let sum = call("add", [cpu.into(), other_cpu.into()], &[]).unwrap();
    assert_eq!(sum[0].to_values().unwrap(), vec![Value::Float(5.0)]);
}

#[test]
fn a_result_with_the_wrong_layout_is_a_provider_contract_error() {
    let input = flaky(&[1.0]);
    let carrier = input.carrier().clone();
    Flaky::of(&carrier)
        .wrong_results
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let error = call("neg", [input.clone().into()], &[]).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime);
    assert_eq!(
        error.to_string(),
        "provider contract violated: 'neg' on Flaky: result 0 has layout (1,1):(0,1) at offset 0, expected 1:1 at offset 0"
    );
    assert_eq!(input.version(), 0);
}
