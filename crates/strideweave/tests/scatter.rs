//! Carrier scatter (docs/carriers.md, Scatter, and Worked examples item 6): atomic, all checks
//! first.

mod common;

use common::floats;
use strideweave::carriers::Generic;
use strideweave::{DType, ErrorKind, Layout, Shape, Tensor, Value};

fn layout(text: &str) -> Layout {
    text.parse().expect("test layout")
}

fn tensor(values: &[f64]) -> Tensor {
    let carrier = Generic::carrier(&floats(values), DType::FLOAT32, true).unwrap();
    Tensor::compact(carrier, Shape::new(values.len()).unwrap()).unwrap()
}

#[test]
fn scenario_06_scatter_through_a_mapping() {
    let destination = tensor(&[0.0, 0.0, 0.0, 0.0]);
    let source = tensor(&[1.0, 2.0]);
    let receiver = destination.carrier().clone();
    receiver
        .scatter(&source, &destination, &layout("2:2"), 0)
        .unwrap();
    assert_eq!(
        destination.to_values().unwrap(),
        floats(&[1.0, 0.0, 2.0, 0.0])
    );
    assert_eq!(receiver.version(), 1, "one scatter is one version step");
    receiver
        .scatter(&source, &destination, &layout("2:2"), 1)
        .unwrap();
    assert_eq!(
        destination.to_values().unwrap(),
        floats(&[1.0, 1.0, 2.0, 2.0])
    );
    assert_eq!(receiver.version(), 2);
}

#[test]
fn scenario_06_bad_shapes_and_foreign_destinations_are_value_errors() {
    let destination = tensor(&[0.0, 0.0, 0.0, 0.0]);
    let receiver = destination.carrier().clone();
    let error = receiver
        .scatter(&tensor(&[1.0, 2.0, 3.0]), &destination, &layout("2:2"), 0)
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value);
    assert!(error.to_string().contains("differs from the mapping shape"));
    assert!(error.to_string().contains("mapping shape must match"));
    let foreign = tensor(&[0.0, 0.0, 0.0, 0.0]);
    let error = receiver
        .scatter(&tensor(&[1.0, 2.0]), &foreign, &layout("2:2"), 0)
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value);
    assert!(error.to_string().contains("another Generic carrier"));
    assert_eq!(receiver.version(), 0);
}

#[test]
fn an_out_of_range_slot_fails_before_any_write() {
    let destination = tensor(&[0.0, 0.0, 0.0]);
    let receiver = destination.carrier().clone();
    // Slots 0, 2, 4: the first two fit, the last does not; nothing may be written.
    let error = receiver
        .scatter(&tensor(&[1.0, 2.0, 3.0]), &destination, &layout("3:2"), 0)
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value);
    assert!(
        error
            .to_string()
            .contains("scatter element 2 lands outside"),
        "{error}"
    );
    assert_eq!(destination.to_values().unwrap(), floats(&[0.0, 0.0, 0.0]));
    assert_eq!(receiver.version(), 0);
}

#[test]
fn a_value_the_dtype_refuses_fails_before_any_write() {
    let ints = Generic::carrier(&[Value::Int(0), Value::Int(0)], DType::INT32, true).unwrap();
    let destination = Tensor::compact(ints.clone(), Shape::new(2).unwrap()).unwrap();
    let source_carrier = Generic::carrier(&[Value::Int(5), Value::Bool(true)], DType::INT32, true);
    assert_eq!(source_carrier.unwrap_err().kind(), ErrorKind::Type);
    let source = tensor(&[1.0, 2.5]);
    let error = ints
        .scatter(&source, &destination, &layout("2:1"), 0)
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Type);
    assert_eq!(
        destination.to_values().unwrap(),
        vec![Value::Int(0), Value::Int(0)]
    );
    assert_eq!(ints.version(), 0);
}

#[test]
fn immutable_and_owned_receivers_refuse_scatter() {
    let carrier = Generic::carrier(&floats(&[0.0, 0.0]), DType::FLOAT32, false).unwrap();
    let destination = Tensor::compact(carrier.clone(), Shape::new(2).unwrap()).unwrap();
    let error = carrier
        .scatter(&tensor(&[1.0]), &destination, &layout("1:1"), 0)
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime);

    let destination = tensor(&[0.0, 0.0]);
    let owned = destination.carrier().clone();
    let token = owned.claim_ownership().unwrap();
    let error = owned
        .scatter(&tensor(&[1.0]), &destination, &layout("1:1"), 0)
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime);
    assert!(error.to_string().contains("owned"));
    let _access = token.access().unwrap();
    owned
        .scatter(&tensor(&[1.0]), &destination, &layout("1:1"), 1)
        .unwrap();
    assert_eq!(destination.to_values().unwrap(), floats(&[0.0, 1.0]));
}

#[test]
fn file_backed_scatter_is_not_implemented() {
    use strideweave::carriers::FileBacked;
    let file = FileBacked::carrier(None, DType::FLOAT32, true).unwrap();
    let grown = strideweave::movement::move_to(&tensor(&[0.0, 0.0]), &file).unwrap();
    let error = file
        .scatter(&tensor(&[1.0]), &grown, &layout("1:1"), 0)
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotImplemented);
    assert!(error
        .to_string()
        .contains("FileBacked carriers do not support scatter"));
    let error = file.dispatch_op("relu").unwrap_err();
    assert_eq!(error.kind(), ErrorKind::NotImplemented);
}

/// A CPU tensor of `values` with `dtype` under `layout`.
fn cpu_tensor(values: &[Value], dtype: DType, layout_text: &str) -> Tensor {
    let carrier = strideweave::carriers::Cpu::from_values(values, dtype, true).unwrap();
    Tensor::new(carrier, 0, layout(layout_text)).unwrap()
}

#[test]
fn cpu_scatter_copies_natively_through_strided_source_and_mapping() {
    // The source is read through a permuted view, the mapping is strided.
    let source = cpu_tensor(
        &floats(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
        DType::FLOAT32,
        "(2,3):(3,1)",
    );
    let destination = cpu_tensor(&floats(&[0.0; 12]), DType::FLOAT32, "12:1");
    let receiver = destination.carrier().clone();
    receiver
        .scatter(&source, &destination, &layout("(2,3):(1,4)"), 1)
        .unwrap();
    // Ordinal (i,j) of the source is slot 3i+j; it lands at 1 + i + 4j.
    assert_eq!(
        destination.to_values().unwrap(),
        floats(&[0.0, 1.0, 4.0, 0.0, 0.0, 2.0, 5.0, 0.0, 0.0, 3.0, 6.0, 0.0])
    );
    assert_eq!(receiver.version(), 1);
    assert_eq!(source.version(), 0);
}

#[test]
fn cpu_scatter_into_itself_reads_every_source_slot_before_writing() {
    let values = floats(&[1.0, 2.0, 3.0, 4.0]);
    let whole = cpu_tensor(&values, DType::FLOAT32, "4:1");
    let carrier = whole.carrier().clone();
    let front = Tensor::new(carrier.clone(), 0, layout("3:1")).unwrap();
    // Slots 0..3 shift to 1..4: an element-by-element copy would smear slot 0 forward.
    carrier.scatter(&front, &whole, &layout("3:1"), 1).unwrap();
    assert_eq!(whole.to_values().unwrap(), floats(&[1.0, 1.0, 2.0, 3.0]));
    assert_eq!(carrier.version(), 1);
}

#[test]
fn cpu_scatter_between_element_types_and_of_bools() {
    let ints = cpu_tensor(&[Value::Int(7), Value::Int(-2)], DType::INT32, "2:1");
    let destination = cpu_tensor(&floats(&[0.5; 3]), DType::FLOAT32, "3:1");
    destination
        .carrier()
        .scatter(&ints, &destination, &layout("2:2"), 0)
        .unwrap();
    assert_eq!(destination.to_values().unwrap(), floats(&[7.0, 0.5, -2.0]));

    let flags = cpu_tensor(&[Value::Bool(true), Value::Bool(false)], DType::BOOL, "2:1");
    let target = cpu_tensor(&[Value::Bool(false); 2], DType::BOOL, "2:1");
    // Bool to Bool is copied natively; Int32 into Bool is refused before any write.
    let reversed = Tensor::new(flags.carrier().clone(), 0, layout("2:1")).unwrap();
    target
        .carrier()
        .scatter(&reversed, &target, &layout("2:1"), 0)
        .unwrap();
    assert_eq!(
        target.to_values().unwrap(),
        [Value::Bool(true), Value::Bool(false)]
    );
    let error = target
        .carrier()
        .scatter(&ints, &target, &layout("2:1"), 0)
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Type, "{error}");
    assert_eq!(target.version(), 1);
}

#[test]
fn cpu_scatter_from_a_released_source_writes_nothing() {
    let source = cpu_tensor(&floats(&[1.0, 2.0]), DType::FLOAT32, "2:1");
    let destination = cpu_tensor(&floats(&[0.0; 2]), DType::FLOAT32, "2:1");
    source.carrier().release().unwrap();
    let error = destination
        .carrier()
        .scatter(&source, &destination, &layout("2:1"), 0)
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime, "{error}");
    assert!(error.to_string().contains("released"), "{error}");
    assert_eq!(destination.to_values().unwrap(), floats(&[0.0, 0.0]));
    assert_eq!(destination.version(), 0);
}
