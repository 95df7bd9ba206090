//! Data-parallel training of the tour's perceptron: every rank trains on its quarter (its
//! 1/n-th) of the points and the gradients are averaged across the ranks after each backward
//! pass; then rank 0 trains alone on all the points and compares.
//!
//! ```sh
//! cargo build --release -p strideweave-mpi --example data_parallel
//! mpirun -n 4 target/release/examples/data_parallel    # add --oversubscribe on < 4 cores
//! ```

mod perceptron;

use std::process::ExitCode;

use strideweave::{Error, Result};
use strideweave_mpi::Mpi;

/// How far the data-parallel weights may be from one rank's training on every point: the
/// two differ only in the order float sums are taken.
const TOLERANCE: f32 = 1e-3;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("data_parallel failed: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<()> {
    let mpi = Mpi::init()?;
    let world = mpi.world();
    let (rank, ranks) = (world.rank(), world.size());
    let problem = perceptron::problem();
    let range = perceptron::shard(rank, ranks)?;
    let parallel = perceptron::train(&problem, range.clone(), Some(world))?;
    let flat = parallel.flat();
    // Every rank's largest distance from rank 0's weights.
    let rank0 = strideweave_mpi::all_reduce(
        &strideweave::Tensor::from_f32(
            &if rank == 0 {
                flat.clone()
            } else {
                vec![0.0; flat.len()]
            },
            strideweave::Shape::new(flat.len())?,
        )?,
        strideweave_mpi::Reduction::Sum,
        world,
    )?
    .to_f32_vec()?;
    let spread = perceptron::gather(perceptron::max_difference(&flat, &rank0), world)?;
    if rank != 0 {
        return check(&spread, None);
    }
    println!(
        "{ranks} ranks, {} points each (rank 0 has points {}..{})",
        range.len(),
        range.start,
        range.end
    );
    for (epoch, loss) in &parallel.losses {
        println!("   epoch {epoch:>3}: mean squared error over all ranks {loss:.4}");
    }
    let single = perceptron::train(&problem, 0..perceptron::POINTS, None)?;
    let names = ["w1", "b1", "w2", "b2"];
    for (name, (a, b)) in names
        .iter()
        .zip(parallel.parameters.iter().zip(&single.parameters))
    {
        println!("   {name} data-parallel: {}", preview(a));
        println!("   {name} one rank:      {}", preview(b));
    }
    let deviation = perceptron::max_difference(&flat, &single.flat());
    println!(
        "largest difference between ranks' weights: {:e} (per rank: {spread:?})",
        spread.iter().copied().fold(0.0, f32::max)
    );
    println!(
        "largest difference from one rank's training on all {} points: {deviation:e} (tolerance {TOLERANCE:e})",
        perceptron::POINTS
    );
    check(&spread, Some(deviation))
}

/// The first values of a list.
fn preview(values: &[f32]) -> String {
    let shown: Vec<String> = values.iter().take(4).map(|v| format!("{v:+.5}")).collect();
    format!(
        "[{}{}]",
        shown.join(", "),
        if values.len() > 4 { ", …" } else { "" }
    )
}

/// An error when the ranks disagree or the training differs from one rank's.
fn check(spread: &[f32], deviation: Option<f32>) -> Result<()> {
    if spread.iter().any(|d| *d != 0.0) {
        return Err(Error::Runtime(format!(
            "the ranks ended with different weights: {spread:?}"
        )));
    }
    match deviation {
        Some(d) if d.is_nan() || d > TOLERANCE => Err(Error::Runtime(format!(
            "data-parallel training is {d:e} away from one rank's training"
        ))),
        _ => Ok(()),
    }
}
