//! The failures callers branch on without reading messages have variants of their own, with
//! the fields that identify what failed, and keep their kinds and messages.

use strideweave::carrier::CarrierClass;
use strideweave::carriers::{Cpu, Generic};
use strideweave::{DType, Error, ErrorKind, Value};

#[test]
fn a_released_carrier_is_reported_with_its_class_and_the_refused_action() {
    let carrier = Cpu::from_f32(&[1.0, 2.0], true).unwrap();
    carrier.release().unwrap();
    let error = carrier.get(0).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime);
    assert_eq!(
        error.to_string(),
        "runtime error: cannot read a slot: CPU is released"
    );
    let Error::Released { class, action } = &error else {
        panic!("expected Error::Released, got {error:?}");
    };
    assert_eq!(*class, carrier.class());
    assert_eq!(action, "read a slot");
    let write = carrier.set(0, Value::Float(3.0)).unwrap_err();
    assert!(matches!(write, Error::Released { .. }), "{write:?}");
}

#[test]
fn a_slot_out_of_range_names_the_slot_and_the_size() {
    let carrier = Generic::carrier(&[Value::Float(1.0); 3], DType::FLOAT32, true).unwrap();
    let error = carrier.get(7).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Index);
    assert_eq!(
        error.to_string(),
        "index error: slot 7 is out of range for a Generic carrier of size 3"
    );
    let Error::SlotOutOfRange { class, index, size } = error else {
        panic!("expected Error::SlotOutOfRange, got {error:?}");
    };
    assert_eq!((class, index, size), (CarrierClass::of::<Generic>(), 7, 3));
}

#[test]
fn an_unstorable_dtype_names_the_class_and_the_dtype() {
    let carrier = Cpu::from_f32(&[1.0], true).unwrap();
    let error = carrier.new_like(&[], true, Some(DType::ANY)).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value);
    assert_eq!(
        error.to_string(),
        "value error: CPU carriers cannot store dtype Any"
    );
    let Error::UnstorableDtype { class, dtype } = error else {
        panic!("expected Error::UnstorableDtype, got {error:?}");
    };
    assert_eq!(class, carrier.class());
    assert_eq!(dtype, DType::ANY);
}
