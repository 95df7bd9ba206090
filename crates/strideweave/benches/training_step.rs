//! One training step (forward, backward, parameter update) of a two-layer perceptron with
//! 256-wide layers, through autograd against the same arithmetic written directly on the
//! CPU operations without a graph, in one run. The ratio is the graph's overhead.

use criterion::{criterion_group, criterion_main, Criterion};
use strideweave::autograd::no_grad;
use strideweave::carriers::Cpu;
use strideweave::{ops, Result, Shape, Tensor};

const N: usize = 256;
const D: usize = 256;
const H: usize = 256;

fn tensor(values: &[f32], shape: Shape) -> Tensor {
    Tensor::compact(Cpu::from_f32(values, true).expect("CPU"), shape).expect("tensor")
}

fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| (((i as u32).wrapping_mul(2654435761) ^ seed) % 2001) as f32 / 1000.0 - 1.0)
        .collect()
}

struct Model {
    x: Tensor,
    y: Tensor,
    w1: Tensor,
    b1: Tensor,
    w2: Tensor,
}

impl Model {
    fn new() -> Model {
        Model {
            x: tensor(&values(N * D, 1), Shape::new((N, D)).expect("shape")),
            y: tensor(&values(N, 2), Shape::new((N, 1)).expect("shape")),
            w1: tensor(
                &values(H * D, 3)
                    .iter()
                    .map(|v| v * 0.05)
                    .collect::<Vec<_>>(),
                Shape::new((H, D)).expect("shape"),
            ),
            b1: tensor(&vec![0.0; H], Shape::new((1, H)).expect("shape")),
            w2: tensor(
                &values(H, 4).iter().map(|v| v * 0.05).collect::<Vec<_>>(),
                Shape::new((1, H)).expect("shape"),
            ),
        }
    }

    /// Forward through the graph, backward, and the update of every parameter.
    fn autograd_step(&self) -> Result<[Tensor; 3]> {
        for p in [&self.w1, &self.b1, &self.w2] {
            p.set_grad(None)?;
            p.set_requires_grad(true)?;
        }
        let hidden = ops::relu(&ops::add(&ops::matmul(&self.x, &self.w1)?, &self.b1)?)?;
        let diff = ops::sub(&ops::matmul(&hidden, &self.w2)?, &self.y)?;
        let loss = ops::reduce_sum(&ops::elementwise_mul(&diff, &diff)?.permute(&[1, 0])?)?;
        loss.backward(None, false)?;
        let _off = no_grad();
        let update = |p: &Tensor| -> Result<Tensor> {
            let g = p
                .grad()
                .ok_or_else(|| strideweave::Error::Runtime("no gradient".into()))?;
            ops::sub(p, &ops::mul(&g, 1e-3)?)
        };
        Ok([update(&self.w1)?, update(&self.b1)?, update(&self.w2)?])
    }

    /// The same forward, backward and update, written out with the operations directly.
    fn direct_step(&self) -> Result<[Tensor; 3]> {
        let _off = no_grad();
        let pre = ops::add(&ops::matmul(&self.x, &self.w1)?, &self.b1)?;
        let hidden = ops::relu(&pre)?;
        let out = ops::matmul(&hidden, &self.w2)?;
        let diff = ops::sub(&out, &self.y)?;
        let _loss = ops::reduce_sum(&ops::elementwise_mul(&diff, &diff)?.permute(&[1, 0])?)?;
        let d_out = ops::mul(&diff, 2.0)?; // (N,1)
        let d_w2 = ops::matmul(&d_out.permute(&[1, 0])?, &hidden.permute(&[1, 0])?)?; // (1,H)
        let d_hidden = ops::matmul(&d_out, &self.w2.permute(&[1, 0])?)?; // (N,H)
        let d_pre = ops::select(&ops::le(&pre, 0.0)?, 0.0, &d_hidden)?;
        let d_b1 = ops::reduce_sum(&d_pre.permute(&[1, 0])?)?; // (H)
        let d_w1 = ops::matmul(&d_pre.permute(&[1, 0])?, &self.x.permute(&[1, 0])?)?; // (H,D)
        let d_b1 = d_b1.unsqueeze(0)?;
        Ok([
            ops::sub(&self.w1, &ops::mul(&d_w1, 1e-3)?)?,
            ops::sub(&self.b1, &ops::mul(&d_b1, 1e-3)?)?,
            ops::sub(&self.w2, &ops::mul(&d_w2, 1e-3)?)?,
        ])
    }
}

fn training_step(c: &mut Criterion) {
    let model = Model::new();
    let mut group = c.benchmark_group("mlp_training_step_256");
    group.sample_size(20);
    group.bench_function("direct_operations", |b| {
        b.iter(|| model.direct_step().expect("step"))
    });
    group.bench_function("autograd", |b| {
        b.iter(|| model.autograd_step().expect("step"))
    });
    group.finish();
}

mod group {
    use super::*;
    criterion_group!(benches, training_step);
}
criterion_main!(group::benches);
