//! Tensors over carriers: construction, element access and views (docs/tensors.md;
//! docs/layouts.md, Views, and Worked examples items 14–17 at the tensor level).

mod common;

use common::floats;
use strideweave::carriers::Generic;
use strideweave::{DType, ErrorKind, IntTuple, Layout, Shape, SliceKey, Stride, Tensor, Value};

fn layout(text: &str) -> Layout {
    text.parse().expect("test layout")
}

fn generic(values: &[f64]) -> strideweave::Carrier {
    Generic::carrier(&floats(values), DType::FLOAT32, true).expect("generic carrier")
}

fn iota(n: usize) -> Vec<f64> {
    (0..n).map(|i| i as f64).collect()
}

#[test]
fn scenario_17_tensor_needs_cosize_slots_and_shares_the_version() {
    let small = generic(&iota(9));
    let error = Tensor::new(small, 0, layout("(2,3):(1,4)")).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value);
    assert!(error.to_string().contains("needs slots 0..0+10"), "{error}");

    let carrier = generic(&iota(10));
    let t = Tensor::new(carrier.clone(), 0, layout("(2,3):(1,4)")).unwrap();
    let view = t.permute(&[1, 0]).unwrap();
    assert_eq!(t.version(), 0);
    t.set(&(1, 0).into(), Value::Float(42.0)).unwrap();
    assert_eq!(t.version(), 1);
    assert_eq!(view.version(), 1);
    assert_eq!(view.get(&(0, 1).into()).unwrap(), Value::Float(42.0));
    assert_eq!(carrier.get(1).unwrap(), Value::Float(42.0));
    assert_eq!(t.version_token(), vec![(carrier.id(), 1)]);
}

#[test]
fn construction_checks_offset_plus_cosize() {
    let carrier = generic(&iota(10));
    assert!(Tensor::new(carrier.clone(), 4, layout("(2,3):(1,2)")).is_ok());
    let error = Tensor::new(carrier.clone(), 5, layout("(2,3):(1,2)")).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value);
    let error = Tensor::new(carrier, usize::MAX, layout("2:1")).unwrap_err();
    assert_eq!(
        error.kind(),
        ErrorKind::Value,
        "offset overflow is a Value error"
    );
}

#[test]
fn failed_writes_change_nothing() {
    let carrier = Generic::carrier(&floats(&[1.0, 2.0]), DType::FLOAT32, false).unwrap();
    let t = Tensor::compact(carrier.clone(), Shape::new(2).unwrap()).unwrap();
    let error = t.set(&0.into(), Value::Float(9.0)).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime);
    assert!(error.to_string().contains("immutable"));
    assert_eq!(
        (t.get(&0.into()).unwrap(), t.version()),
        (Value::Float(1.0), 0)
    );

    let ints = Generic::carrier(&[Value::Int(1)], DType::INT32, true).unwrap();
    let t = Tensor::compact(ints, Shape::new(1).unwrap()).unwrap();
    assert_eq!(
        t.set(&0.into(), Value::Float(1.5)).unwrap_err().kind(),
        ErrorKind::Type
    );
    assert_eq!(
        t.set(&0.into(), Value::Int(1 << 31)).unwrap_err().kind(),
        ErrorKind::Overflow
    );
    assert_eq!(
        t.set(&(-1).into(), Value::Int(3)).unwrap_err().kind(),
        ErrorKind::Value
    );
    assert_eq!((t.get(&0.into()).unwrap(), t.version()), (Value::Int(1), 0));
}

#[test]
fn released_carriers_refuse_access() {
    let carrier = generic(&iota(4));
    let t = Tensor::compact(carrier.clone(), Shape::new(4).unwrap()).unwrap();
    carrier.release().unwrap();
    assert_eq!(t.get(&0.into()).unwrap_err().kind(), ErrorKind::Runtime);
    assert_eq!(
        t.set(&0.into(), Value::Float(1.0)).unwrap_err().kind(),
        ErrorKind::Runtime
    );
    assert_eq!(carrier.size(), 0);
    assert_eq!(carrier.version(), 0);
    carrier.release().unwrap();
    assert_eq!(
        Tensor::compact(carrier, Shape::new(1).unwrap())
            .unwrap_err()
            .kind(),
        ErrorKind::Value
    );
}

#[test]
fn scenario_14_slicing_a_tensor() {
    let t = Tensor::new(generic(&iota(50)), 0, layout("(5,10):(1,5)")).unwrap();
    let row = t
        .slice(&[SliceKey::Index(2), SliceKey::stepped(1, 9, 2)])
        .unwrap();
    assert_eq!(
        (row.offset(), row.layout().to_string()),
        (7, "4:10".to_string())
    );
    assert_eq!(row.to_values().unwrap(), floats(&[7.0, 17.0, 27.0, 37.0]));
    for bad in [
        vec![SliceKey::all(), SliceKey::stepped(1, 6, 2)],
        vec![
            SliceKey::all(),
            SliceKey::Range {
                start: None,
                stop: None,
                step: Some(-1),
            },
        ],
        vec![SliceKey::from(2..5)],
    ] {
        assert_eq!(t.slice(&bad).unwrap_err().kind(), ErrorKind::Value);
    }
}

#[test]
fn scenario_15_reshape_a_tensor() {
    let t = Tensor::new(generic(&iota(12)), 1, layout("(2,3):(2,4)")).unwrap();
    let reshaped = t.reshape(&Shape::new((3, (2,))).unwrap()).unwrap();
    assert_eq!(reshaped.layout().to_string(), "(3,(2)):(2,(6))");
    assert_eq!(reshaped.offset(), 1);
    assert_eq!(reshaped.to_values().unwrap(), t.to_values().unwrap());
    let strided = Tensor::new(generic(&iota(12)), 0, layout("(2,3):(1,3)")).unwrap();
    assert_eq!(
        strided.reshape(&Shape::new(6).unwrap()).unwrap_err().kind(),
        ErrorKind::Value
    );
}

#[test]
fn scenario_16_as_strided_and_broadcast_in_dim() {
    let t = Tensor::new(generic(&iota(20)), 0, layout("(5,4):(4,1)")).unwrap();
    let view = t
        .as_strided(Shape::new((2, 2)).unwrap(), Stride::new((1, 2)).unwrap())
        .unwrap();
    assert_eq!(view.layout().to_string(), "(2,2):(4,8)");
    assert_eq!(view.to_values().unwrap(), floats(&[0.0, 4.0, 8.0, 12.0]));
    let v = Tensor::new(generic(&[1.0, 2.0]), 0, layout("2:1")).unwrap();
    let b = v
        .broadcast_in_dim(&Shape::new([3, 2]).unwrap(), &[1])
        .unwrap();
    assert_eq!(b.layout().to_string(), "(3,2):(0,1)");
    assert_eq!(b.get(&(2, 1).into()).unwrap(), Value::Float(2.0));
}

#[test]
fn views_share_carrier_and_version() {
    let carrier = generic(&iota(6));
    let t = Tensor::new(carrier.clone(), 0, layout("(2,3):(1,2)")).unwrap();
    let views = [
        t.permute(&[1, 0]).unwrap(),
        t.unsqueeze(0).unwrap(),
        t.unsqueeze(-1).unwrap().squeeze(-1).unwrap(),
        t.reshape(&Shape::new(6).unwrap()).unwrap(),
        t.slice(&[SliceKey::all(), SliceKey::Index(1)]).unwrap(),
    ];
    t.set(&(0, 1).into(), Value::Float(-1.0)).unwrap();
    for view in &views {
        assert!(view.carrier().same_as(&carrier));
        assert_eq!(view.version(), 1);
        assert!(!view.same_as(&t));
    }
    assert_eq!(views[1].layout().to_string(), "(1,2,3):(0,1,2)");
    assert_eq!(views[4].to_values().unwrap(), floats(&[-1.0, 3.0]));
    assert_eq!(t.squeeze(0).unwrap_err().kind(), ErrorKind::Value);
    assert_eq!(t.unsqueeze(4).unwrap_err().kind(), ErrorKind::Value);
    let single = t.broadcast_to(&Shape::new((2, 3)).unwrap()).unwrap();
    assert_eq!(single.layout(), t.layout());
}

#[test]
fn hierarchical_coordinates_reach_the_same_slot() {
    let t = Tensor::new(generic(&iota(24)), 0, layout("(4,(2,3)):(1,(4,8))")).unwrap();
    let full: IntTuple = (3, (1, 2)).into();
    assert_eq!(t.get(&full).unwrap(), t.get(&(3, 5).into()).unwrap());
    assert_eq!(t.get(&full).unwrap(), t.get_leaves(&[3, 1, 2]).unwrap());
    assert_eq!(t.get(&full).unwrap(), Value::Float(23.0));
    t.set_leaves(&[0, 0, 0], Value::Float(5.0)).unwrap();
    assert_eq!(t.get(&0.into()).unwrap(), Value::Float(5.0));
}
