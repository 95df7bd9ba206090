//! `StorageProvider::with_fresh_for`: the factories (`new_like`, `allocate_like`) build a
//! fresh carrier's state with the request of what they construct — slots, dtype and
//! mutability — before the framework's construction runs on it; a failing fresh callback
//! makes nothing. `StorageProvider::new_with_fresh_for` takes the same callback in place of
//! `new_fallible`'s `fresh`.

use std::sync::{Arc, Mutex};

use strideweave::carrier::{Carrier, CarrierClass, ClassKind};
use strideweave::carriers::extension::FreshRequest;
use strideweave::{register_carrier_definition, CarrierDefinition, DType, Error, StorageProvider};
use strideweave::{ErrorKind, Value};

/// The state: values, the request it was made for, and a log of the requests its fresh
/// callback saw (shared by every carrier of the class).
#[derive(Default)]
struct Made {
    values: Vec<Value>,
    made_for: Option<FreshRequest>,
    log: Arc<Mutex<Vec<FreshRequest>>>,
}

fn class_with_fresh_for(name: &str) -> CarrierClass {
    let storage = StorageProvider::new(
        |_: &Made, dtype| dtype == DType::FLOAT32 || dtype == DType::INT32,
        |state: &Made| state.values.len() as i64,
        |state: &mut Made, slots, dtype| {
            state.values = vec![dtype.zero().unwrap_or(Value::Int(0)); slots];
            Ok(())
        },
        |state: &mut Made| {
            state.values.clear();
            Ok(())
        },
        |state: &Made, index| Ok(state.values[index]),
        |state: &mut Made, index, value| {
            state.values[index] = value;
            Ok(())
        },
    )
    .with_fresh_for(|prototype: &Made, request: FreshRequest| {
        prototype.log.lock().unwrap().push(request);
        if request.slots() == 13 {
            return Err(Error::Lookup("no carrier of 13 slots".to_owned()));
        }
        Ok(Made {
            values: Vec::new(),
            made_for: Some(request),
            log: Arc::clone(&prototype.log),
        })
    });
    let class = CarrierClass::mint(name, ClassKind::Independent);
    register_carrier_definition(class, CarrierDefinition::new(storage)).unwrap();
    class
}

fn made_for(carrier: &Carrier) -> Option<FreshRequest> {
    carrier
        .with_provider_state(|state: &Made| state.made_for)
        .unwrap()
}

#[test]
fn the_factories_hand_their_request_to_the_fresh_state() {
    let class = class_with_fresh_for("FreshForCarrier");
    let log = Arc::new(Mutex::new(Vec::new()));
    let prototype = Carrier::create(
        class,
        Made {
            log: Arc::clone(&log),
            ..Made::default()
        },
        2,
        DType::FLOAT32,
        true,
    )
    .unwrap();
    assert_eq!(made_for(&prototype), None);

    let zeros = prototype
        .allocate_like(3, false, Some(DType::INT32), false)
        .unwrap();
    let request = made_for(&zeros).unwrap();
    assert_eq!(
        (request.slots(), request.dtype(), request.mutable()),
        (3, DType::INT32, false)
    );
    assert!(!zeros.is_mutable() && zeros.dtype() == DType::INT32 && zeros.size() == 3);

    let filled = prototype
        .new_like(&[Value::Float(1.5), Value::Float(2.5)], true, None)
        .unwrap();
    let request = made_for(&filled).unwrap();
    assert_eq!(
        (request.slots(), request.dtype(), request.mutable()),
        (2, DType::FLOAT32, true)
    );
    assert_eq!(filled.get(1).unwrap(), Value::Float(2.5));
    assert_eq!(log.lock().unwrap().len(), 2);
}

#[test]
fn a_failing_fresh_callback_makes_nothing() {
    let class = class_with_fresh_for("FreshForFailing");
    let prototype = Carrier::create(class, Made::default(), 1, DType::FLOAT32, true).unwrap();
    let error = prototype.allocate_like(13, true, None, false).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Lookup);
    assert_eq!(error.to_string(), "lookup error: no carrier of 13 slots");
}

/// A state with a configuration and no default: the device it lives on.
struct OnDevice {
    device: u32,
    values: Vec<Value>,
    made_for: Option<FreshRequest>,
}

#[test]
fn new_with_fresh_for_builds_the_factories_state_from_the_prototype_and_the_request() {
    let storage = StorageProvider::new_with_fresh_for(
        |state: &OnDevice, dtype| {
            if state.device == 0 {
                return Err(Error::Value("device 0 is not configured".to_owned()));
            }
            Ok(dtype == DType::FLOAT32)
        },
        |state: &OnDevice| Ok(state.values.len() as i64),
        |state: &mut OnDevice, slots, _dtype| {
            state.values = vec![Value::Float(0.0); slots];
            Ok(())
        },
        |state: &mut OnDevice| {
            state.values.clear();
            Ok(())
        },
        |state: &OnDevice, index| Ok(state.values[index]),
        |state: &mut OnDevice, index, value| {
            state.values[index] = value;
            Ok(())
        },
        |prototype: &OnDevice, request: FreshRequest| {
            if request.slots() == 13 {
                return Err(Error::Lookup("no carrier of 13 slots".to_owned()));
            }
            Ok(OnDevice {
                device: prototype.device,
                values: Vec::new(),
                made_for: Some(request),
            })
        },
    );
    let class = CarrierClass::mint("NewWithFreshFor", ClassKind::Independent);
    register_carrier_definition(class, CarrierDefinition::new(storage)).unwrap();
    let on_device = |device| OnDevice {
        device,
        values: Vec::new(),
        made_for: None,
    };
    let prototype = Carrier::create(class, on_device(7), 1, DType::FLOAT32, true).unwrap();

    let made = prototype.allocate_like(4, false, None, false).unwrap();
    let (device, request) = made
        .with_provider_state(|state: &OnDevice| (state.device, state.made_for))
        .unwrap();
    let request = request.unwrap();
    assert_eq!(device, 7);
    assert_eq!(
        (request.slots(), request.dtype(), request.mutable()),
        (4, DType::FLOAT32, false)
    );
    assert!(made.size() == 4 && !made.is_mutable());

    let error = prototype.allocate_like(13, true, None, false).unwrap_err();
    assert_eq!(error.to_string(), "lookup error: no carrier of 13 slots");
    let error = Carrier::create(class, on_device(0), 1, DType::FLOAT32, true).unwrap_err();
    assert_eq!(error.to_string(), "value error: device 0 is not configured");
}
