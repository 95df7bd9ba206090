//! Definition-backed dispatch against the CPU carrier, measured in the same run
//! (docs/performance-targets.md): the tiny op — a 4-element f32 `neg` through the public
//! API — on the example Device carrier (`examples/device_carrier/mod.rs`), where the kernel pack's
//! optimized pattern runs it synchronously, against the same op on the CPU carrier
//! (target ≤ 1.5×).
//!
//! Each carrier is measured twice: through `ops::neg` and through `operation::call("neg")`.
//! Both take the one pipeline on both carriers, so the difference between the carriers is
//! the cost of the definition-backed execution alone.

#[path = "../examples/device_carrier/mod.rs"]
mod device_carrier;

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use device_carrier::{device_tensor, Counters, DeviceExtension};
use strideweave::carriers::Cpu;
use strideweave::operation::call;
use strideweave::{ops, Shape, Tensor};

fn tiny_neg(c: &mut Criterion) {
    let extension = DeviceExtension::register().expect("the example extension registers");
    let xs = [1.0, -2.0, 3.5, -4.0];
    let on_device = device_tensor(extension.device, &xs).expect("Device tensor");
    let on_cpu = Tensor::compact(
        Cpu::from_f32(&xs.map(|x| x as f32), true).expect("CPU"),
        Shape::new(4).expect("shape"),
    )
    .expect("CPU tensor");
    // The Device op must take the pack's optimized kernel, not the asynchronous general one.
    ops::neg(&on_device).expect("Device neg");
    assert_eq!(Counters::get(&extension.counters.fast_ran), 1);
    assert_eq!(Counters::get(&extension.counters.general_ran), 0);

    let mut group = c.benchmark_group("tiny_neg_4xf32");
    for (name, x) in [("cpu", &on_cpu), ("device_kernel_pack", &on_device)] {
        group.bench_function(format!("{name}_ops_neg"), |bench| {
            bench.iter(|| ops::neg(black_box(x)).expect("neg"))
        });
        group.bench_function(format!("{name}_call_neg"), |bench| {
            bench.iter(|| call("neg", [black_box(x).into()], &[]).expect("neg"))
        });
    }
    group.finish();
    assert_eq!(Counters::get(&extension.counters.general_ran), 0);
}

mod group {
    use super::*;
    criterion_group!(benches, tiny_neg);
}
criterion_main!(group::benches);
