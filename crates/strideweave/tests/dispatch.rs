//! The dispatch hook of definition-free carriers (semantics-carriers.md §4, §10 item 7's
//! mechanism; the shipped carriers' operations come with the operations issue).

mod common;

use strideweave::carrier::CarrierClass;
use strideweave::carriers::Generic;
use strideweave::operation::Operation;
use strideweave::{DType, ErrorKind, Shape, Tensor, Value};

type Flaky = common::Flaky<()>;

#[test]
fn each_dispatch_is_a_distinct_operation_with_metadata() {
    let carrier = Flaky::carrier(&[1.0, -2.0], true);
    let first = carrier.dispatch_op("negate").unwrap();
    let second = carrier.dispatch_op("negate").unwrap();
    assert!(!first.same_as(&second));
    assert_eq!(first.name(), Some("negate"));
    assert_eq!(first.carrier_class(), Some(CarrierClass::of::<Flaky>()));
    let input = Tensor::compact(carrier, Shape::new(2).unwrap()).unwrap();
    let output = first.forward(std::slice::from_ref(&input)).unwrap();
    assert_eq!(
        output[0].to_values().unwrap(),
        vec![Value::Float(-1.0), Value::Float(2.0)]
    );
    assert_eq!(output[0].carrier().class(), CarrierClass::of::<Flaky>());
}

#[test]
fn unknown_names_are_not_implemented() {
    let error = Flaky::carrier(&[1.0], true)
        .dispatch_op("nope")
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotImplemented);
    let generic = Generic::carrier(&[Value::Float(1.0)], DType::FLOAT32, true).unwrap();
    let error = generic.dispatch_op("nope").unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotImplemented);
    assert!(error
        .to_string()
        .contains("Generic carriers dispatch no operation 'nope'"));
}

#[test]
fn a_cached_operation_is_a_type_error_and_keeps_its_first_metadata() {
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
fn an_undispatched_operation_does_not_run() {
    let op = Operation::new(|_| Ok(vec![]));
    assert_eq!(op.name(), None);
    assert_eq!(op.forward(&[]).unwrap_err().kind(), ErrorKind::Runtime);
}

#[test]
fn mixed_carrier_classes_are_a_type_error_and_instances_of_one_class_work() {
    let flaky = Tensor::compact(Flaky::carrier(&[1.0], true), Shape::new(1).unwrap()).unwrap();
    let other_flaky =
        Tensor::compact(Flaky::carrier(&[2.0], true), Shape::new(1).unwrap()).unwrap();
    let generic_carrier = Generic::carrier(&[Value::Float(1.0)], DType::FLOAT32, true).unwrap();
    let generic = Tensor::compact(generic_carrier, Shape::new(1).unwrap()).unwrap();
    let error = strideweave::operation::call("negate", &[flaky.clone(), generic]).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Type);
    assert!(error
        .to_string()
        .starts_with("type error: Tensor backing carriers must match"));
    let out = strideweave::operation::call("negate", &[flaky, other_flaky]).unwrap();
    assert_eq!(out[0].to_values().unwrap(), vec![Value::Float(-1.0)]);
}
