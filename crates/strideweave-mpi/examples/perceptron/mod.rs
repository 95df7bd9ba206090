//! The tour's two-layer perceptron (crates/strideweave-tour/examples/tour.rs, part 6), trained
//! on one rank or data-parallel on several: shared by `examples/data_parallel.rs` and the
//! MPI tests.

#![allow(dead_code)]

use strideweave::autograd::no_grad;
use strideweave::carriers::Cpu;
use strideweave::{ops, Error, Result, Shape, Tensor};
use strideweave_mpi::{all_reduce, average_gradients, Communicator, Reduction};

/// Points in the tour's data set.
pub const POINTS: usize = 256;
/// Hidden units.
pub const HIDDEN: usize = 16;
/// Training epochs (the tour's 600, plus the initial evaluation).
pub const EPOCHS: usize = 600;
/// The learning rate.
pub const RATE: f64 = 2.0;

/// A deterministic pseudo-random number in [-1, 1) (the tour's generator).
fn noise(state: &mut u64) -> f32 {
    *state = state
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    ((*state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
}

/// The data set and the initial parameters, exactly as the tour draws them.
pub struct Problem {
    /// Point `i` is `(x0[i], x1[i])`.
    pub x0: Vec<f32>,
    /// The second coordinates.
    pub x1: Vec<f32>,
    /// 1 where the point's coordinates share a sign.
    pub labels: Vec<f32>,
    /// Initial `w1` (HIDDEN, 2), column-major.
    pub w1: Vec<f32>,
    /// Initial `w2` (1, HIDDEN).
    pub w2: Vec<f32>,
}

/// The tour's problem.
pub fn problem() -> Problem {
    let mut state = 7u64;
    let (mut x0, mut x1, mut labels) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..POINTS {
        let (a, b) = (noise(&mut state), noise(&mut state));
        x0.push(a);
        x1.push(b);
        labels.push(if a * b > 0.0 { 1.0 } else { 0.0 });
    }
    let w1 = (0..HIDDEN * 2).map(|_| noise(&mut state) * 1.5).collect();
    let w2 = (0..HIDDEN).map(|_| noise(&mut state)).collect();
    Problem {
        x0,
        x1,
        labels,
        w1,
        w2,
    }
}

/// The trained parameters' values (w1, b1, w2, b2) and the losses logged every 100 epochs.
pub struct Trained {
    /// w1, b1, w2, b2, each column-major.
    pub parameters: Vec<Vec<f32>>,
    /// (epoch, mean squared error over every point).
    pub losses: Vec<(usize, f64)>,
}

impl Trained {
    /// Every parameter value in one list.
    pub fn flat(&self) -> Vec<f32> {
        self.parameters.concat()
    }
}

fn leaf(values: &[f32], shape: Shape) -> Result<Tensor> {
    let t = Tensor::compact(Cpu::from_f32(values, true)?, shape)?;
    t.set_requires_grad(true)?;
    Ok(t)
}

fn step(p: &Tensor) -> Result<Tensor> {
    let updated = {
        let _off = no_grad();
        let g = p
            .grad()
            .ok_or_else(|| Error::Runtime("a parameter has no gradient".into()))?;
        ops::sub(p, &ops::mul(&g, RATE)?)?
    };
    updated.set_requires_grad(true)?;
    Ok(updated)
}

/// Trains on the points `range` of `problem`. With `comm`, every rank trains on its own
/// range and the gradients are averaged across the ranks after each backward pass (the
/// ranges must be equally large, so that the mean of the ranks' mean losses is the mean
/// loss over all points); the logged loss is then the mean over all ranks.
pub fn train(
    problem: &Problem,
    range: std::ops::Range<usize>,
    comm: Option<&Communicator>,
) -> Result<Trained> {
    let n = range.len();
    let points: Vec<f32> = [&problem.x0[range.clone()], &problem.x1[range.clone()]].concat();
    let x = Tensor::compact(Cpu::from_f32(&points, true)?, Shape::new((n, 2))?)?;
    let y = Tensor::compact(
        Cpu::from_f32(&problem.labels[range], true)?,
        Shape::new((n, 1))?,
    )?;
    let mut w1 = leaf(&problem.w1, Shape::new((HIDDEN, 2))?)?;
    let mut b1 = leaf(&[0.0; HIDDEN], Shape::new((1, HIDDEN))?)?;
    let mut w2 = leaf(&problem.w2, Shape::new((1, HIDDEN))?)?;
    let mut b2 = leaf(&[0.0], Shape::new((1, 1))?)?;
    let mut losses = Vec::new();
    for epoch in 0..=EPOCHS {
        let hidden = ops::relu(&ops::add(&ops::matmul(&x, &w1)?, &b1)?)?;
        let p = ops::sigmoid(&ops::add(&ops::matmul(&hidden, &w2)?, &b2)?)?;
        let diff = ops::sub(&p, &y)?;
        let squared = ops::elementwise_mul(&diff, &diff)?;
        let loss = ops::mul(
            &ops::reduce_sum(&squared.permute(&[1, 0])?)?,
            1.0 / n as f64,
        )?;
        if epoch % 100 == 0 {
            let _off = no_grad();
            let global = match comm {
                Some(comm) => all_reduce(&loss.detach(), Reduction::Mean, comm)?,
                None => loss.detach(),
            };
            losses.push((epoch, f64::from(global.to_f32_vec()?[0])));
        }
        if epoch == EPOCHS {
            break;
        }
        loss.backward(None, false)?;
        let parameters = [w1.clone(), b1.clone(), w2.clone(), b2.clone()];
        if let Some(comm) = comm {
            average_gradients(&parameters, comm)?;
        }
        w1 = step(&w1)?;
        b1 = step(&b1)?;
        w2 = step(&w2)?;
        b2 = step(&b2)?;
    }
    Ok(Trained {
        parameters: vec![
            w1.to_f32_vec()?,
            b1.to_f32_vec()?,
            w2.to_f32_vec()?,
            b2.to_f32_vec()?,
        ],
        losses,
    })
}

/// This rank's equal share of the points, or a Value error when they do not split evenly.
pub fn shard(rank: usize, ranks: usize) -> Result<std::ops::Range<usize>> {
    if ranks == 0 || !POINTS.is_multiple_of(ranks) {
        return Err(Error::Value(format!(
            "{POINTS} points do not split evenly over {ranks} ranks"
        )));
    }
    let size = POINTS / ranks;
    Ok(rank * size..(rank + 1) * size)
}

/// The largest absolute difference between two equally long lists.
pub fn max_difference(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// Every rank's `value` in one list on every rank (an all-reduce of one slot per rank).
pub fn gather(value: f32, comm: &Communicator) -> Result<Vec<f32>> {
    let mut slots = vec![0.0; comm.size()];
    slots[comm.rank()] = value;
    let t = Tensor::compact(Cpu::from_f32(&slots, true)?, Shape::new(comm.size())?)?;
    all_reduce(&t, Reduction::Sum, comm)?.to_f32_vec()
}
