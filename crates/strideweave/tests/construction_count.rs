//! `constructed_on_this_thread`: every carrier construction on this thread is counted, and a
//! call refused by the capability gate constructs nothing.

use strideweave::carrier::constructed_on_this_thread;
use strideweave::carriers::{Cpu, FileBacked, Generic};
use strideweave::operation::call;
use strideweave::{DType, ErrorKind, Shape, Tensor, Value};

#[test]
fn constructors_factories_and_results_are_counted_and_a_refused_call_constructs_nothing() {
    let start = constructed_on_this_thread();
    let x = Generic::carrier(
        &[Value::Float(1.0), Value::Float(-2.0)],
        DType::FLOAT32,
        true,
    )
    .unwrap();
    assert_eq!(constructed_on_this_thread(), start + 1);
    let _zeros = x.allocate_like(3, true, None, false).unwrap();
    let _copy = x.new_like(&[Value::Float(4.0)], true, None).unwrap();
    assert_eq!(constructed_on_this_thread(), start + 3);

    let t = Tensor::compact(x, Shape::new(2).unwrap()).unwrap();
    let before = constructed_on_this_thread();
    let y = call("relu", [t.clone().into()], &[]).unwrap();
    assert_eq!(
        y[0].to_values().unwrap(),
        [Value::Float(1.0), Value::Float(0.0)]
    );
    assert_eq!(constructed_on_this_thread(), before + 1);

    // FileBacked advertises no operation: the gate refuses before anything is built.
    let file = FileBacked::carrier(None, DType::FLOAT32, true).unwrap();
    let source = Tensor::compact(
        Cpu::from_f32(&[3.0, -1.0], true).unwrap(),
        Shape::new(2).unwrap(),
    )
    .unwrap();
    let stored = strideweave::movement::move_to(&source, &file).unwrap();
    let before = constructed_on_this_thread();
    let refused = call("relu", [stored.into()], &[]).unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::NotImplemented, "{refused}");
    assert!(matches!(
        refused,
        strideweave::Error::UnsupportedOperationPlan(_)
    ));
    assert_eq!(constructed_on_this_thread(), before);

    let elsewhere = std::thread::spawn(|| {
        let _ = Generic::carrier(&[], DType::INT32, true).unwrap();
        constructed_on_this_thread()
    })
    .join()
    .unwrap();
    assert_eq!(elsewhere, 1);
}
