//! The MPI tests: `cargo test` runs this binary, which launches itself under `mpirun` once per
//! case (2 or 4 ranks, each launch bounded by `timeout 120`), and each rank runs the case's
//! scenario and prints `RANK <r> OK …` when every check passed. The launcher then checks
//! every rank's line and mpirun's exit status.
//!
//! `cargo test -p strideweave-mpi --test mpirun -- fault` runs the cases whose name contains
//! "fault". Needs Open MPI's `mpirun` on the PATH (README, Getting started).

#[path = "../examples/perceptron/mod.rs"]
mod perceptron;

use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use strideweave::carriers::{Cpu, FileBacked};
use strideweave::movement::move_to;
use strideweave::{ops, DType, Error, ErrorKind, Result, Shape, Tensor};
use strideweave_mpi::{
    all_reduce, average_gradients, Communicator, FailPoint, Mpi, MpiHost, Reduction,
    TIMEOUT_VARIABLE,
};

/// The variable that tells a launched rank which scenario to run.
const SCENARIO: &str = "STRIDEWEAVE_MPI_TEST_SCENARIO";
/// The collective timeout of the fault cases, in seconds.
const FAULT_TIMEOUT: &str = "3";

fn main() -> ExitCode {
    match std::env::var(SCENARIO) {
        Ok(scenario) => worker(&scenario),
        Err(_) => launcher(),
    }
}

// ---------------------------------------------------------------------------------------------
// The launcher.

/// One launch of the test binary under mpirun.
struct Case {
    name: &'static str,
    ranks: usize,
    scenario: &'static str,
    /// Whether a rank exits on purpose: mpirun is then told not to abort the job, and the
    /// failing rank prints no line.
    fault: bool,
}

const CASES: &[Case] = &[
    Case {
        name: "all_reduce_and_gradients_on_2_ranks",
        ranks: 2,
        scenario: "collectives",
        fault: false,
    },
    Case {
        name: "all_reduce_and_gradients_on_4_ranks",
        ranks: 4,
        scenario: "collectives",
        fault: false,
    },
    Case {
        name: "mismatched_arguments_fail_on_every_rank_on_4_ranks",
        ranks: 4,
        scenario: "mismatch",
        fault: false,
    },
    Case {
        name: "data_parallel_perceptron_matches_one_rank_on_4_ranks",
        ranks: 4,
        scenario: "data_parallel",
        fault: false,
    },
    Case {
        name: "fault_a_rank_exiting_mid_collective_fails_the_others_on_4_ranks",
        ranks: 4,
        scenario: "exit_mid_collective",
        fault: true,
    },
    Case {
        name: "fault_a_rank_that_never_joins_fails_the_other_on_2_ranks",
        ranks: 2,
        scenario: "exit_before_joining",
        fault: true,
    },
];

fn launcher() -> ExitCode {
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let selected: Vec<&Case> = CASES
        .iter()
        .filter(|c| filter.as_deref().is_none_or(|f| c.name.contains(f)))
        .collect();
    let started = Instant::now();
    println!("\nrunning {} tests", selected.len());
    let mut failures = Vec::new();
    for case in &selected {
        let begin = Instant::now();
        match launch(case) {
            Ok(()) => println!(
                "test {} ... ok ({:.1} s)",
                case.name,
                begin.elapsed().as_secs_f64()
            ),
            Err(report) => {
                println!("test {} ... FAILED", case.name);
                failures.push((case.name, report));
            }
        }
    }
    for (name, report) in &failures {
        println!("\n---- {name} ----\n{report}");
    }
    println!(
        "\ntest result: {}. {} passed; {} failed; 0 ignored; 0 measured; {} filtered out; finished in {:.2}s\n",
        if failures.is_empty() { "ok" } else { "FAILED" },
        selected.len() - failures.len(),
        failures.len(),
        CASES.len() - selected.len(),
        started.elapsed().as_secs_f64()
    );
    if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Runs one case under `timeout 120 mpirun` and checks every rank's line.
fn launch(case: &Case) -> std::result::Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this test binary: {e}"))?;
    let mut command = Command::new("timeout");
    command.args([
        "-k",
        "10",
        "120",
        "mpirun",
        "--allow-run-as-root",
        "--oversubscribe",
    ]);
    command.args(["-n", &case.ranks.to_string(), "-x", SCENARIO]);
    command.env(SCENARIO, case.scenario);
    if case.fault {
        // Without these, mpirun ends the whole job as soon as one rank exits with an error
        // status or without finalizing MPI, before the others can report
        // (docs/distributed.md, Faults).
        command.args(["--mca", "orte_abort_on_non_zero_status", "0"]);
        command.args(["--mca", "orte_allowed_exit_without_sync", "1"]);
        command.env(TIMEOUT_VARIABLE, FAULT_TIMEOUT);
        command.args(["-x", TIMEOUT_VARIABLE]);
    } else {
        command.env_remove(TIMEOUT_VARIABLE);
    }
    command.arg(exe);
    let output = command.output().map_err(|e| {
        format!(
            "cannot run `timeout … mpirun` (is Open MPI's mpirun installed? see the README): {e}"
        )
    })?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let report = |why: String| {
        format!(
            "{why}\nexit status: {}\n--- stdout\n{stdout}--- stderr\n{stderr}",
            output.status
        )
    };
    if output.status.code() == Some(124) || output.status.code() == Some(137) {
        return Err(report("mpirun did not finish within 120 s".into()));
    }
    if !case.fault && !output.status.success() {
        return Err(report("mpirun failed".into()));
    }
    let expected: Vec<usize> = if case.fault {
        (0..case.ranks - 1).collect()
    } else {
        (0..case.ranks).collect()
    };
    for rank in expected {
        let prefix = format!("RANK {rank} OK");
        if !stdout.lines().any(|l| l.starts_with(&prefix)) {
            return Err(report(format!("rank {rank} did not print `{prefix}`")));
        }
    }
    if case.fault {
        let failing = case.ranks - 1;
        if stdout
            .lines()
            .any(|l| l.starts_with(&format!("RANK {failing} ")))
        {
            return Err(report(format!(
                "rank {failing} should have exited without a line"
            )));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The ranks.

fn worker(scenario: &str) -> ExitCode {
    let mpi = match Mpi::init() {
        Ok(mpi) => mpi,
        Err(error) => {
            println!("RANK ? ERROR cannot initialize MPI: {error}");
            return ExitCode::FAILURE;
        }
    };
    let world = mpi.world().clone();
    let outcome = match scenario {
        "collectives" => collectives(&world),
        "mismatch" => mismatch(&world),
        "data_parallel" => data_parallel(&world),
        "exit_mid_collective" => exit_mid_collective(&world),
        "exit_before_joining" => exit_before_joining(&world),
        other => Err(Error::Value(format!("unknown scenario {other:?}"))),
    };
    let rank = world.rank();
    match outcome {
        Ok(detail) => {
            println!("RANK {rank} OK {scenario}: {detail}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            println!("RANK {rank} ERROR {scenario}: {error}");
            ExitCode::FAILURE
        }
    }
}

/// A Runtime error saying what a check found.
fn fail(what: String) -> Error {
    Error::Runtime(what)
}

fn expect_values(what: &str, got: &[f32], expected: &[f32]) -> Result<()> {
    let close = got.len() == expected.len()
        && got
            .iter()
            .zip(expected)
            .all(|(a, b)| (a - b).abs() <= 1e-5 * b.abs().max(1.0));
    if close {
        Ok(())
    } else {
        Err(fail(format!("{what}: got {got:?}, expected {expected:?}")))
    }
}

/// Sums and means on several carriers and layouts, the operation's gradient, and
/// `average_gradients`.
fn collectives(world: &Communicator) -> Result<String> {
    let (rank, n) = (world.rank(), world.size());
    let (r, nf) = (rank as f32, n as f32);
    let base = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    let mine: Vec<f32> = base.iter().map(|b| b * (r + 1.0)).collect();
    // Σ_r (r + 1) = n (n + 1) / 2.
    let factor = nf * (nf + 1.0) / 2.0;
    let sum: Vec<f32> = base.iter().map(|b| b * factor).collect();
    let mean: Vec<f32> = sum.iter().map(|s| s / nf).collect();

    let x = Tensor::from_f32(&mine, Shape::new((2, 3))?)?;
    let total = all_reduce(&x, Reduction::Sum, world)?;
    if total.carrier().downcast_ref::<Cpu>().is_none() || total.shape() != x.shape() {
        return Err(fail(
            "a CPU tensor's sum is not a CPU tensor of its shape".into(),
        ));
    }
    expect_values("sum of a CPU tensor", &total.to_f32_vec()?, &sum)?;
    expect_values(
        "mean of a CPU tensor",
        &all_reduce(&x, Reduction::Mean, world)?.to_f32_vec()?,
        &mean,
    )?;

    let on_host = MpiHost::tensor(&mine, Shape::new((2, 3))?)?;
    let reduced = all_reduce(&on_host, Reduction::Sum, world)?;
    if reduced.carrier().downcast_ref::<MpiHost>().is_none() {
        return Err(fail("an MpiHost tensor's sum is not on MpiHost".into()));
    }
    expect_values("sum of an MpiHost tensor", &reduced.to_f32_vec()?, &sum)?;

    // A permuted view: its elements in its own (colexicographic) order.
    let transposed = x.permute(&[1, 0])?;
    let expected: Vec<f32> = transposed
        .to_f32_vec()?
        .iter()
        .map(|v| v / (r + 1.0) * factor)
        .collect();
    expect_values(
        "sum of a permuted view",
        &all_reduce(&transposed, Reduction::Sum, world)?.to_f32_vec()?,
        &expected,
    )?;

    // A carrier that is not the CPU but moves to it.
    let on_disk = move_to(
        &Tensor::from_f32(&mine, Shape::new((2, 3))?)?,
        &FileBacked::carrier(None, DType::FLOAT32, true)?,
    )?;
    expect_values(
        "sum of a FileBacked tensor",
        &all_reduce(&on_disk, Reduction::Sum, world)?.to_f32_vec()?,
        &sum,
    )?;

    // A reduction right after the all-reduce hands its backward a broadcast cotangent:
    // d/dx_r Σ_k Σ y_k with y = mean_r(c_r · x_r) is c_r.
    let leaf = Tensor::from_f32(&[1.0, 2.0], Shape::new((1, 2))?)?;
    leaf.set_requires_grad(true)?;
    let y = all_reduce(
        &ops::mul(&leaf, f64::from(r + 1.0))?,
        Reduction::Mean,
        world,
    )?;
    ops::reduce_sum(&y)?.backward(None, false)?;
    let grad = leaf
        .grad()
        .ok_or_else(|| fail("the leaf under a reduce_sum got no gradient".into()))?;
    expect_values(
        "the gradient through reduce_sum of a mean",
        &grad.to_f32_vec()?,
        &[r + 1.0; 2],
    )?;

    world.barrier()?;

    // The gradient: with y = all_reduce(c_r · x_r) and L_r = Σ w_r ⊙ y, the gradient of
    // Σ_k L_k with respect to x_r is c_r · Σ_k w_k (sum), or c_r · (1/n) Σ_k w_k (mean).
    let w_sum: Vec<f32> = (0..3)
        .map(|j| (0..n).map(|k| weight(k, j)).sum::<f32>())
        .collect();
    for reduction in [Reduction::Sum, Reduction::Mean] {
        let leaf = Tensor::from_f32(&[0.5, -1.0, 2.0], Shape::new((1, 3))?)?;
        leaf.set_requires_grad(true)?;
        let c = r + 1.0;
        let y = all_reduce(&ops::mul(&leaf, f64::from(c))?, reduction, world)?;
        let w: Vec<f32> = (0..3).map(|j| weight(rank, j)).collect();
        let w = Tensor::from_f32(&w, Shape::new((1, 3))?)?;
        let loss = ops::reduce_sum(&ops::elementwise_mul(&y, &w)?)?;
        loss.backward(None, false)?;
        let scale = if reduction == Reduction::Sum {
            1.0
        } else {
            1.0 / nf
        };
        let expected: Vec<f32> = w_sum.iter().map(|s| c * s * scale).collect();
        let grad = leaf
            .grad()
            .ok_or_else(|| fail("the leaf got no gradient".into()))?;
        expect_values(
            &format!("gradient through a {reduction:?} all-reduce"),
            &grad.to_f32_vec()?,
            &expected,
        )?;
    }

    // average_gradients: parameter 0 has gradient (r + 1)·[1, 2, 3]; parameter 1 none.
    let p = Tensor::from_f32(&[0.0; 3], Shape::new(3)?)?;
    p.set_requires_grad(true)?;
    p.set_grad(Some(Tensor::from_f32(
        &[r + 1.0, 2.0 * (r + 1.0), 3.0 * (r + 1.0)],
        Shape::new(3)?,
    )?))?;
    let q = Tensor::from_f32(&[0.0; 2], Shape::new(2)?)?;
    q.set_requires_grad(true)?;
    average_gradients(&[p.clone(), q.clone()], world)?;
    let m = (nf + 1.0) / 2.0;
    let averaged = p.grad().ok_or_else(|| fail("p lost its gradient".into()))?;
    expect_values(
        "an averaged gradient",
        &averaged.to_f32_vec()?,
        &[m, 2.0 * m, 3.0 * m],
    )?;
    if q.grad().is_some() {
        return Err(fail("a parameter without gradient got one".into()));
    }
    Ok(format!(
        "sums, means, views, FileBacked, gradients on {n} ranks"
    ))
}

/// Rank `k`'s weight `j` in the gradient check.
fn weight(k: usize, j: usize) -> f32 {
    (k + 1) as f32 * 0.5 + j as f32
}

/// Checks that `outcome` failed with `kind` and a message containing every piece.
/// Returns the message.
fn expect_error<T>(
    what: &str,
    outcome: Result<T>,
    kind: ErrorKind,
    pieces: &[&str],
) -> Result<String> {
    match outcome {
        Ok(_) => Err(fail(format!("{what}: succeeded, expected an error"))),
        Err(error) => {
            let message = error.to_string();
            if error.kind() == kind && pieces.iter().all(|p| message.contains(p)) {
                Ok(message)
            } else {
                Err(fail(format!(
                    "{what}: got {:?} error {message:?}, expected a {kind:?} error mentioning {pieces:?}",
                    error.kind()
                )))
            }
        }
    }
}

/// Every kind of disagreement fails on every rank with what differed; the communicator
/// still works afterwards.
fn mismatch(world: &Communicator) -> Result<String> {
    let (rank, n) = (world.rank(), world.size());
    let others = if n == 2 {
        "rank 0".to_owned()
    } else {
        format!(
            "ranks 0, {}",
            (2..n).map(|r| r.to_string()).collect::<Vec<_>>().join(", ")
        )
    };
    // Shapes.
    let shape = if rank == 1 { (4, 3) } else { (4, 2) };
    let x = Tensor::from_f32(&vec![1.0; 4 * shape.1], Shape::new(shape)?)?;
    let shapes = expect_error(
        "different shapes",
        all_reduce(&x, Reduction::Sum, world),
        ErrorKind::Value,
        &[
            "all_reduce #1",
            &format!("shape differs: (4,2) on {others}; (4,3) on rank 1"),
        ],
    )?;
    // Dtypes: rank 1 passes an Int32 tensor.
    let y = if rank == 1 {
        Tensor::compact(Cpu::from_i32(&[1, 2, 3], true)?, Shape::new(3)?)?
    } else {
        Tensor::from_f32(&[1.0, 2.0, 3.0], Shape::new(3)?)?
    };
    expect_error(
        "different dtypes",
        all_reduce(&y, Reduction::Sum, world),
        ErrorKind::Value,
        &[&format!(
            "dtype differs: Float32 on {others}; Int32 on rank 1"
        )],
    )?;
    // Reductions.
    let reduction = if rank == 0 {
        Reduction::Mean
    } else {
        Reduction::Sum
    };
    let z = Tensor::from_f32(&[1.0, 2.0], Shape::new(2)?)?;
    expect_error(
        "different reductions",
        all_reduce(&z, reduction, world),
        ErrorKind::Value,
        &["reduction differs: mean on rank 0; sum on rank"],
    )?;
    // Gradients present on some ranks only.
    let p = Tensor::from_f32(&[0.0; 2], Shape::new(2)?)?;
    p.set_requires_grad(true)?;
    if rank != 1 {
        p.set_grad(Some(Tensor::from_f32(&[1.0, 1.0], Shape::new(2)?)?))?;
    }
    expect_error(
        "a gradient missing on rank 1",
        average_gradients(&[p], world),
        ErrorKind::Value,
        &[
            "average_gradients #4",
            "parameter 0 differs",
            "no gradient on rank 1",
        ],
    )?;
    // A rank that cannot take part (its tensor's carrier is released) still tells the others.
    let w = Tensor::from_f32(&[1.0, 2.0], Shape::new(2)?)?;
    if rank == 1 {
        w.carrier().release()?;
        expect_error(
            "a released tensor on this rank",
            all_reduce(&w, Reduction::Sum, world),
            ErrorKind::Runtime,
            &["released"],
        )?;
    } else {
        expect_error(
            "a released tensor on rank 1",
            all_reduce(&w, Reduction::Sum, world),
            ErrorKind::Runtime,
            &["all_reduce #5", "rank 1:", "released"],
        )?;
    }
    // The communicator still works.
    let ok = all_reduce(
        &Tensor::from_f32(&[1.0], Shape::new(1)?)?,
        Reduction::Sum,
        world,
    )?;
    expect_values("a sum after the failures", &ok.to_f32_vec()?, &[n as f32])?;
    Ok(format!(
        "shape, dtype, reduction, gradient and local failures reported on every rank, e.g. {shapes}"
    ))
}

/// The tour's perceptron on every rank's share, compared with rank 0's training on all
/// points.
fn data_parallel(world: &Communicator) -> Result<String> {
    let problem = perceptron::problem();
    let trained = perceptron::train(
        &problem,
        perceptron::shard(world.rank(), world.size())?,
        Some(world),
    )?;
    let flat = trained.flat();
    let mut first = if world.rank() == 0 {
        flat.clone()
    } else {
        vec![0.0; flat.len()]
    };
    first = all_reduce(
        &Tensor::from_f32(&first, Shape::new(flat.len())?)?,
        Reduction::Sum,
        world,
    )?
    .to_f32_vec()?;
    let spread = perceptron::max_difference(&flat, &first);
    if spread != 0.0 {
        return Err(fail(format!(
            "this rank's weights differ from rank 0's by {spread:e}"
        )));
    }
    if world.rank() != 0 {
        return Ok("the same weights as rank 0".into());
    }
    let single = perceptron::train(&problem, 0..perceptron::POINTS, None)?;
    let deviation = perceptron::max_difference(&flat, &single.flat());
    if deviation.is_nan() || deviation > 1e-3 {
        return Err(fail(format!(
            "data-parallel weights are {deviation:e} away from one rank's training"
        )));
    }
    Ok(format!(
        "every rank has rank 0's weights; largest difference from one rank's training {deviation:e}"
    ))
}

/// The last rank leaves in the middle of an all-reduce: the others fail within the timeout
/// plus the grace period, naming it, and MPI is unusable for them afterwards.
fn exit_mid_collective(world: &Communicator) -> Result<String> {
    let failing = world.size() - 1;
    if world.rank() == failing {
        world.fail_next_collective(FailPoint::ExitAfterHeader { code: 3 });
    }
    expect_fault(world, failing, "while reducing the data")
}

/// Rank 1 exits as its first collective starts: rank 0 fails naming it.
fn exit_before_joining(world: &Communicator) -> Result<String> {
    if world.rank() == 1 {
        world.fail_next_collective(FailPoint::ExitBeforeJoining { code: 4 });
    }
    expect_fault(world, 1, "while exchanging headers")
}

fn expect_fault(world: &Communicator, failing: usize, stage: &str) -> Result<String> {
    let x = Tensor::from_f32(&[1.0; 1024], Shape::new(1024)?)?;
    let started = Instant::now();
    let outcome = all_reduce(&x, Reduction::Sum, world);
    let elapsed = started.elapsed();
    let message = expect_error(
        "an all-reduce with a rank gone",
        outcome,
        ErrorKind::Runtime,
        &[
            "all_reduce #1 timed out",
            stage,
            &format!("rank {failing} did not respond"),
        ],
    )?;
    let bound = world.timeout() + world.grace_period() + Duration::from_secs(2);
    if elapsed < world.timeout() || elapsed > bound {
        return Err(fail(format!(
            "the fault took {elapsed:?}, expected between {:?} and {bound:?}",
            world.timeout()
        )));
    }
    let again = Instant::now();
    expect_error(
        "a collective after the fault",
        world.barrier(),
        ErrorKind::Runtime,
        &["MPI is unusable in this process"],
    )?;
    if again.elapsed() > Duration::from_millis(100) {
        return Err(fail("a collective after a fault waited".into()));
    }
    Ok(format!("failed after {elapsed:?}: {message}"))
}
