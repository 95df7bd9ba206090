//! The Gpu carrier against the same work written directly in wgpu, side by side in one run
//! (docs/gpu-carrier.md, Speed):
//!
//! - `tiny_add`: a 4-element `add` with its pipeline cached — the framework's per-op share
//!   (plan, capability gate, pattern selection, result carrier, completion) over a direct
//!   dispatch that allocates its result buffer, binds, dispatches, submits and waits;
//! - `add_16mi`: a 16 Mi-element `add`, against a hand-written shader on the same device.
//!
//! Prints `SKIPPED: <reason>` and measures nothing where no adapter exists.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use strideweave::{ops, Shape, Tensor};
use strideweave_wgpu::{Gpu, GpuInterface};

const DIRECT_ADD: &str = "
@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.y * groups.x + wid.x) * 256u + lid;
    if (i < arrayLength(&c)) { c[i] = a[i] + b[i]; }
}
";

/// The hand-written dispatch: operand buffers bound as they are, a fresh result buffer per
/// call (as the framework makes), one submission, a blocking wait.
struct Direct {
    device: wgpu::Device,
    queue: wgpu::Queue,
    pipeline: wgpu::ComputePipeline,
    a: wgpu::Buffer,
    b: wgpu::Buffer,
    n: usize,
}

impl Direct {
    fn new(gpu: &Gpu, a: &Tensor, b: &Tensor) -> Direct {
        let interface = gpu
            .interface()
            .downcast_ref::<GpuInterface>()
            .expect("the Gpu interface");
        let device = gpu.device().wgpu_device().clone();
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("direct add"),
            source: wgpu::ShaderSource::Wgsl(DIRECT_ADD.into()),
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("direct add"),
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        });
        Direct {
            queue: gpu.device().wgpu_queue().clone(),
            pipeline,
            a: interface.buffer_of(a).expect("operand a"),
            b: interface.buffer_of(b).expect("operand b"),
            n: a.size(),
            device,
        }
    }

    fn run(&self) -> wgpu::Buffer {
        let c = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("direct result"),
            size: (self.n * 4) as u64,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &self.pipeline.get_bind_group_layout(0),
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: self.a.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: self.b.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 2,
                    resource: c.as_entire_binding(),
                },
            ],
        });
        let mut encoder = self.device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            pass.set_pipeline(&self.pipeline);
            pass.set_bind_group(0, &group, &[]);
            let groups = self.n.div_ceil(256);
            let x = groups.min(65535);
            pass.dispatch_workgroups(x as u32, groups.div_ceil(x) as u32, 1);
        }
        let index = self.queue.submit([encoder.finish()]);
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(index),
                timeout: None,
            })
            .expect("the direct add finishes");
        c
    }
}

/// Runs `other` (untimed) then `timed`, `iterations` times: the time of `timed`.
fn alternate<A, B>(iterations: u64, other: &impl Fn() -> A, timed: &impl Fn() -> B) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iterations {
        drop(other());
        let start = Instant::now();
        drop(timed());
        total += start.elapsed();
    }
    total
}

fn pair(c: &mut Criterion, gpu: &Gpu, name: &str, n: usize) {
    let values: Vec<f32> = (0..n).map(|i| (i % 1024) as f32).collect();
    let a = gpu
        .from_f32(&values, Shape::new(n).expect("shape"))
        .expect("upload");
    let b = gpu
        .from_f32(&values, Shape::new(n).expect("shape"))
        .expect("upload");
    let direct = Direct::new(gpu, &a, &b);
    ops::add(&a, &b).expect("warm the pipeline cache");
    let framework = || black_box(ops::add(&a, &b).expect("add"));
    let hand_written = || black_box(direct.run());
    // Each measurement alternates with the other side's work (untimed), so both see the same
    // device state and the same machine load, which on a shared software device varies more
    // than the difference measured.
    let mut group = c.benchmark_group(name);
    group.bench_function("direct_wgpu", |bench| {
        bench.iter_custom(|iterations| alternate(iterations, &framework, &hand_written))
    });
    group.bench_function("strideweave_gpu", |bench| {
        bench.iter_custom(|iterations| alternate(iterations, &hand_written, &framework))
    });
    group.finish();
}

fn gpu_benches(c: &mut Criterion) {
    let gpu = match Gpu::shared() {
        Ok(gpu) => gpu,
        Err(error) => {
            println!("SKIPPED: the Gpu benchmarks: {error}");
            return;
        }
    };
    println!("adapter: {}", gpu.device().adapter());
    pair(c, &gpu, "tiny_add", 4);
    pair(c, &gpu, "add_16mi", 16 << 20);
}

mod group {
    use super::*;
    criterion_group! {
        name = benches;
        config = Criterion::default().sample_size(20);
        targets = gpu_benches
    }
}
criterion_main!(group::benches);
