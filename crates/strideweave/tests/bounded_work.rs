//! Work and memory bounded by what is stored: views far larger than their carriers are
//! refused with an error, or handled in time bounded by the slots they span, never by an
//! abort or hours of work.
//!
//! A test whose failure could abort the process (an allocation the allocator cannot serve)
//! runs its body in a child process, so an abort fails that test instead of the whole run.

use std::process::Command;

use strideweave::carriers::{Cpu, Generic, TiledEvictable};
use strideweave::movement::move_to;
use strideweave::{ops, DType, ErrorKind, Layout, Shape, Tensor, Value};

const HUGE: usize = 1 << 40;
const CHILD: &str = "STRIDEWEAVE_BOUNDED_WORK_CHILD";

/// Runs `body` in a child process running only the test `name`, and fails unless the child
/// exits successfully; in the child, runs `body` directly.
fn in_child_process(name: &str, body: impl FnOnce()) {
    if std::env::var_os(CHILD).is_some() {
        body();
        return;
    }
    let output = Command::new(std::env::current_exe().expect("the test binary"))
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .expect("the child process starts");
    assert!(
        output.status.success(),
        "the child running {name} failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A one-slot CPU tensor of `value`, viewed as a broadcast of `HUGE` elements.
fn huge_broadcast(value: f32) -> Tensor {
    let one = Tensor::compact(
        Cpu::from_f32(&[value], true).unwrap(),
        Shape::new(1).unwrap(),
    )
    .unwrap();
    one.broadcast_to(&Shape::new(HUGE).unwrap()).unwrap()
}

#[test]
fn to_values_of_a_huge_broadcast_is_a_memory_error() {
    in_child_process("to_values_of_a_huge_broadcast_is_a_memory_error", || {
        let error = huge_broadcast(1.5).to_values().unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Memory, "{error}");
        let message = error.to_string();
        assert!(
            message.starts_with(&format!(
                "memory error: the values of a tensor of shape {HUGE} needs {HUGE} elements"
            )),
            "{message}"
        );
    });
}

#[test]
fn a_tiled_grid_too_large_for_memory_is_a_memory_error() {
    in_child_process(
        "a_tiled_grid_too_large_for_memory_is_a_memory_error",
        || {
            let primary = Cpu::carrier(0, DType::FLOAT32, true, false).unwrap();
            let secondary = Cpu::carrier(0, DType::FLOAT32, true, false).unwrap();
            let error =
                TiledEvictable::carrier(&primary, &secondary, &[HUGE], &[1], None).unwrap_err();
            assert_eq!(error.kind(), ErrorKind::Memory, "{error}");
            assert!(
                error.to_string().starts_with(
                    "memory error: the tile table of a TiledEvictable grid_shape [1099511627776] \
                 needs 1099511627776 elements"
                ),
                "{error}"
            );
            // The refused construction claimed nothing: both tiers are still free to use.
            assert!(primary.claim_ownership().is_ok());
            assert!(secondary.claim_ownership().is_ok());
        },
    );
}

#[test]
fn scatter_of_a_huge_broadcast_source_fails_at_the_first_slot_outside() {
    in_child_process(
        "scatter_of_a_huge_broadcast_source_fails_at_the_first_slot_outside",
        || {
            let receiver = Cpu::from_f32(&[0.0; 4], true).unwrap();
            let destination = Tensor::compact(receiver.clone(), Shape::new(4).unwrap()).unwrap();
            let mapping = Layout::column_major(Shape::new(HUGE).unwrap());
            let error = receiver
                .scatter(&huge_broadcast(2.0), &destination, &mapping, 0)
                .unwrap_err();
            assert_eq!(error.kind(), ErrorKind::Value, "{error}");
            assert!(
                error
                    .to_string()
                    .starts_with("value error: scatter element 4 lands outside the CPU carrier"),
                "{error}"
            );
            assert_eq!(receiver.version(), 0);
            assert_eq!(destination.to_values().unwrap(), [Value::Float(0.0); 4]);
        },
    );
}

#[test]
fn scatter_through_a_non_injective_mapping_is_a_value_error_and_writes_nothing() {
    let receiver = Cpu::from_f32(&[0.0; 4], true).unwrap();
    let destination = Tensor::compact(receiver.clone(), Shape::new(4).unwrap()).unwrap();
    let source = Tensor::compact(
        Cpu::from_f32(&[1.0, 2.0, 3.0], true).unwrap(),
        Shape::new(3).unwrap(),
    )
    .unwrap();
    let mapping: Layout = "(3):(0)".parse().unwrap();
    let error = receiver
        .scatter(&source, &destination, &mapping, 0)
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value);
    assert_eq!(
        error.to_string(),
        "value error: scatter mapping 3:0 is not injective: two source elements would land on \
         one slot"
    );
    assert_eq!(receiver.version(), 0);
    assert_eq!(destination.to_values().unwrap(), [Value::Float(0.0); 4]);
    // The same scatter through an injective mapping writes once and bumps the version once.
    let mapping: Layout = "(3):(1)".parse().unwrap();
    receiver
        .scatter(&source, &destination, &mapping, 1)
        .unwrap();
    assert_eq!(receiver.version(), 1);
    assert_eq!(
        destination.to_values().unwrap(),
        [0.0, 1.0, 2.0, 3.0].map(Value::Float)
    );
}

#[test]
fn an_elementwise_move_of_a_huge_broadcast_copies_each_slot_once() {
    let one = Tensor::compact(
        Generic::carrier(&[Value::Float(4.0)], DType::FLOAT32, true).unwrap(),
        Shape::new(1).unwrap(),
    )
    .unwrap();
    let broadcast = one
        .reshape(&Shape::new((1, 1)).unwrap())
        .unwrap()
        .broadcast_to(&Shape::new((HUGE, 3)).unwrap())
        .unwrap();
    let destination = Cpu::carrier(1, DType::FLOAT32, true, false).unwrap();
    let moved = move_to(&broadcast, &destination).unwrap();
    assert_eq!(moved.shape(), broadcast.shape());
    assert_eq!(moved.carrier().size(), 1);
    assert_eq!(moved.get(&(HUGE - 1, 2).into()).unwrap(), Value::Float(4.0));
}

#[test]
fn an_elementwise_move_of_an_overlapping_view_copies_the_slots_it_reaches() {
    // Extents 3 and 4 over strides 2 and 3 reach slots {0,2,3,4,5,6,7,8,9,10,11,13}: twelve
    // elements, some sharing a slot, over a span of 14 slots of which 1 and 12 are unreached.
    let values: Vec<Value> = (0..14).map(|i| Value::Float(f64::from(i))).collect();
    let base = Generic::carrier(&values, DType::FLOAT32, true).unwrap();
    let view = Tensor::new(base, 0, "(3,4):(2,3)".parse().unwrap()).unwrap();
    let destination = Cpu::carrier(14, DType::FLOAT32, true, false).unwrap();
    let moved = move_to(&view, &destination).unwrap();
    let expected: Vec<Value> = (0..4)
        .flat_map(|j| (0..3).map(move |i| Value::Float(f64::from(2 * i + 3 * j))))
        .collect();
    assert_eq!(moved.to_values().unwrap(), expected);
}

#[test]
fn a_kernel_over_a_huge_broadcast_is_refused_naming_the_operand() {
    let one = Tensor::compact(
        Cpu::from_f32(&[1.0], true).unwrap(),
        Shape::new((1, 1)).unwrap(),
    )
    .unwrap();
    let broadcast = one.broadcast_to(&Shape::new((2, HUGE)).unwrap()).unwrap();
    let error = ops::reduce_sum(&broadcast).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Value, "{error}");
    assert_eq!(
        error.to_string(),
        format!(
            "value error: operand 0 of 'reduce_sum' is a view of {} elements over 1 slots \
             (layout (2,{HUGE}):(0,0)); element-by-element work over views that repeat slots \
             is limited to 4294967296 elements",
            2 * HUGE
        )
    );
}

#[test]
fn a_kernel_over_a_small_broadcast_still_runs() {
    let one = Tensor::compact(
        Cpu::from_f32(&[2.0], true).unwrap(),
        Shape::new((1, 1)).unwrap(),
    )
    .unwrap();
    let row = one.broadcast_to(&Shape::new((1, 5)).unwrap()).unwrap();
    assert_eq!(
        ops::reduce_sum(&row).unwrap().to_values().unwrap(),
        [Value::Float(10.0)]
    );
}

#[test]
fn as_strided_on_one_element_decides_a_huge_selector_at_once() {
    in_child_process(
        "as_strided_on_one_element_decides_a_huge_selector_at_once",
        || {
            let one = Tensor::compact(Cpu::from_f32(&[1.0], true).unwrap(), Shape::new(1).unwrap())
                .unwrap();
            let started = std::time::Instant::now();
            let error = one
                .as_strided(
                    Shape::new((3, HUGE)).unwrap(),
                    strideweave::Stride::new((2, 3)).unwrap(),
                )
                .unwrap_err();
            assert_eq!(error.kind(), ErrorKind::Value, "{error}");
            // The selector is injective (decided from its two strides, not by enumerating
            // 3·2^40 indices), but it reaches far past the one element it selects from.
            assert!(
                error
                    .to_string()
                    .contains("reaches 3298534883330 but 1:1 has size 1"),
                "{error}"
            );
            assert!(started.elapsed() < std::time::Duration::from_secs(5));
        },
    );
}
