//! The cluster-memory tests: `cargo test` runs this binary, which launches itself under
//! `mpirun` once per case (2 or 4 ranks, each launch bounded by `timeout 120`). Rank 0 is the
//! client, the other ranks serve its memory; every rank prints `RANK <r> OK …` when its
//! checks passed, and the launcher checks every rank's line and mpirun's exit status.
//!
//! `cargo test -p strideweave-mpi --test cluster -- fault` runs the cases whose name
//! contains "fault". Needs Open MPI's `mpirun` on the PATH (README, Getting started).

use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use strideweave::carriers::{
    Cpu, ResidencyPlan, ResidencyPolicy, ResidencyPurpose, TileLocation, TileProgress, TileSet,
    TiledEvictable,
};
use strideweave::movement::{move_async, move_to};
use strideweave::{ops, Carrier, DType, Error, ErrorKind, Result, Shape, Tensor};
use strideweave_mpi::{
    Cluster, ClusterLocal, ClusterMemory, Mpi, RequestKind, ServerFault, TIMEOUT_VARIABLE,
};

/// The variable that tells a launched rank which scenario to run.
const SCENARIO: &str = "STRIDEWEAVE_MPI_TEST_SCENARIO";
/// The request timeout of the fault cases, in seconds.
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
    /// Whether the last rank exits on purpose: mpirun is then told not to abort the job, and
    /// that rank prints no line.
    fault: bool,
}

const CASES: &[Case] = &[
    Case {
        name: "tiered_reduce_matmul_and_training_match_the_cpu_on_2_ranks",
        ranks: 2,
        scenario: "tier",
        fault: false,
    },
    Case {
        name: "tiered_reduce_matmul_and_training_match_the_cpu_on_4_ranks",
        ranks: 4,
        scenario: "tier",
        fault: false,
    },
    Case {
        name: "a_failed_transfer_leaves_both_carriers_as_they_were_on_4_ranks",
        ranks: 4,
        scenario: "failed_transfer",
        fault: false,
    },
    Case {
        name: "fault_an_owner_exiting_mid_read_fails_the_client_on_4_ranks",
        ranks: 4,
        scenario: "exit_mid_get",
        fault: true,
    },
    Case {
        name: "fault_an_owner_exiting_mid_write_fails_the_client_on_2_ranks",
        ranks: 2,
        scenario: "exit_mid_put",
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
    let last = case.ranks - 1;
    let expected = if case.fault { last } else { case.ranks };
    for rank in 0..expected {
        let prefix = format!("RANK {rank} OK");
        if !stdout.lines().any(|l| l.starts_with(&prefix)) {
            return Err(report(format!("rank {rank} did not print `{prefix}`")));
        }
    }
    if case.fault
        && stdout
            .lines()
            .any(|l| l.starts_with(&format!("RANK {last} ")))
    {
        return Err(report(format!(
            "rank {last} should have exited without a line"
        )));
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
    let rank = world.rank();
    let outcome = Cluster::join(&world, 0).and_then(|cluster| match scenario {
        "tier" => tier(&cluster),
        "failed_transfer" => failed_transfer(&cluster),
        "exit_mid_get" => exit_mid_transfer(&cluster, RequestKind::Get),
        "exit_mid_put" => exit_mid_transfer(&cluster, RequestKind::Put),
        other => Err(Error::Value(format!("unknown scenario {other:?}"))),
    });
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

/// Runs `client` on the client and serves on the owners; the client stops the cluster
/// afterwards even when its checks failed.
fn client_or_serve(cluster: &Cluster, client: impl FnOnce() -> Result<String>) -> Result<String> {
    if !cluster.is_client() {
        let summary = cluster.serve()?;
        if summary.peak_slots == 0 {
            return Err(fail(format!(
                "rank {} served but never held a slot: {summary:?}",
                cluster.rank()
            )));
        }
        return Ok(format!("served {summary:?}"));
    }
    let outcome = client();
    let stopped = cluster.stop();
    let detail = outcome?;
    stopped?;
    Ok(detail)
}

fn expect_close(what: &str, got: &[f32], expected: &[f32], tolerance: f32) -> Result<()> {
    if got.len() != expected.len() {
        return Err(fail(format!(
            "{what}: {} values, expected {}",
            got.len(),
            expected.len()
        )));
    }
    for (i, (a, b)) in got.iter().zip(expected).enumerate() {
        if (a - b).abs() > tolerance * b.abs().max(1.0) || a.is_nan() {
            return Err(fail(format!(
                "{what}: value {i} is {a}, expected {b} (tolerance {tolerance})"
            )));
        }
    }
    Ok(())
}

fn expect_error<T>(
    what: &str,
    outcome: Result<T>,
    kind: ErrorKind,
    phrases: &[&str],
) -> Result<String> {
    let error = match outcome {
        Ok(_) => return Err(fail(format!("{what} succeeded, expected an error"))),
        Err(error) => error,
    };
    let message = error.to_string();
    if error.kind() != kind || phrases.iter().any(|p| !message.contains(p)) {
        return Err(fail(format!(
            "{what} failed with {:?} `{message}`, expected {kind:?} mentioning {phrases:?}",
            error.kind()
        )));
    }
    Ok(message)
}

/// A deterministic value in [-1, 1).
fn noise(state: &mut u64) -> f32 {
    *state = state
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    ((*state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
}

fn values(count: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut state = seed;
    (0..count).map(|_| noise(&mut state) * scale).collect()
}

/// Bounds a primary tier to `capacity` tiles and keeps the most staged tiles any progress
/// report saw.
#[derive(Debug, Default)]
struct Meter {
    capacity: Option<usize>,
    /// The most slots any report saw on the primary tier (resident plus held for the work).
    peak: AtomicUsize,
    /// The operation of that report.
    worst: std::sync::Mutex<String>,
}

impl ResidencyPolicy for Meter {
    fn plan(&self, _: &TileSet, _: ResidencyPurpose) -> Result<ResidencyPlan> {
        ResidencyPlan::new(TileSet::empty(), TileSet::empty(), TileSet::empty())
    }

    fn primary_capacity(&self) -> Option<usize> {
        self.capacity
    }

    fn on_progress(&self, progress: &TileProgress) {
        let held = progress.resident_slots() + progress.peak_slots();
        if self.peak.fetch_max(held, Ordering::SeqCst) < held {
            if let Ok(mut worst) = self.worst.lock() {
                *worst = progress.operation().to_owned();
            }
        }
    }
}

fn dense(values: &[f32], shape: Shape) -> Result<Tensor> {
    Tensor::compact(Cpu::from_f32(values, true)?, shape)
}

/// The values of a tensor on any class that computes (a TiledEvictable streams them through
/// its primary tier into a dense ClusterLocal result).
fn local_values(tensor: &Tensor) -> Result<Vec<f32>> {
    let _recording = strideweave::autograd::no_grad();
    let copy = ops::mul(tensor, 1.0)?;
    move_to(
        &copy,
        &Cpu::carrier(copy.carrier().size(), DType::FLOAT32, true, false)?,
    )?
    .to_f32_vec()
}

/// A reduce, a product and a few SGD steps on a tensor whose tiles live on the owners,
/// through a primary tier of at most `CAPACITY` tiles, against the same on the CPU.
fn tier(cluster: &Cluster) -> Result<String> {
    client_or_serve(cluster, || {
        const B: usize = 16;
        const D: usize = 512;
        const H: usize = 32;
        const C: usize = 4;
        const TD: usize = 64;
        const CAPACITY: usize = 4;
        let tiles = D / TD;
        let w1_values = values(H * D, 7, 0.05);
        // The weights, spread over the owners' memory.
        let far = cluster.memory_from_f32(&w1_values)?;
        let placement = ClusterMemory::placement(&far)?;
        let owners: Vec<usize> = placement.iter().map(|p| p.0).collect();
        if owners != cluster.owners() || placement.iter().map(|p| p.2).sum::<usize>() != H * D {
            return Err(fail(format!(
                "the weights are placed {placement:?}, expected spread over {:?}",
                cluster.owners()
            )));
        }
        let bound = Arc::new(Meter {
            capacity: Some(CAPACITY),
            ..Meter::default()
        });
        let w1_carrier = TiledEvictable::carrier(
            &ClusterLocal::carrier(0, DType::FLOAT32)?,
            &far,
            &[1, tiles],
            &[H, TD],
            Some(bound.clone()),
        )?;
        let w1 = Tensor::compact(w1_carrier.clone(), Shape::new((H, D))?)?;

        // reduce_sum streams the tiles through ClusterLocal.
        let cpu_w1 = dense(&w1_values, Shape::new((H, D))?)?;
        let sums = ops::reduce_sum(&w1)?;
        if sums.carrier().class() != ClusterLocal::class()? {
            return Err(fail(format!(
                "the tiled sum is on {}, expected ClusterLocal",
                sums.carrier().class()
            )));
        }
        expect_close(
            "tiled reduce_sum",
            &ClusterLocal::f32s(sums.carrier())?,
            &ops::reduce_sum(&cpu_w1)?.to_f32_vec()?,
            1e-5,
        )?;
        if !TiledEvictable::primary_tiles(&w1_carrier)?.is_empty() {
            return Err(fail("streaming promoted tiles".into()));
        }

        // The batch and the readout, resident on ClusterLocal.
        let x_values = values(B * D, 11, 1.0);
        let x = Tensor::compact(
            TiledEvictable::carrier(
                &ClusterLocal::from_f32(&x_values)?,
                &ClusterLocal::carrier(0, DType::FLOAT32)?,
                &[1, tiles],
                &[B, TD],
                None,
            )?,
            Shape::new((B, D))?,
        )?;
        let cpu_x = dense(&x_values, Shape::new((B, D))?)?;
        let product = ops::matmul(&x, &w1)?;
        expect_close(
            "tiled matmul",
            &local_values(&product)?,
            &ops::matmul(&cpu_x, &cpu_w1)?.to_f32_vec()?,
            1e-4,
        )?;

        // Training: W1 on the owners, everything else on ClusterLocal; the same steps on the
        // CPU.
        let w2_values = values(C * H, 13, 0.2);
        let target_values = values(B * C, 17, 1.0);
        w1.set_requires_grad(true)?;
        let w2 = ClusterLocal::tensor(&w2_values, Shape::new((C, H))?)?;
        let targets = ClusterLocal::tensor(&target_values, Shape::new((B, C))?)?;
        let ones = ClusterLocal::tensor(&[1.0; B], Shape::new(B)?)?;
        let (cpu_w2, cpu_targets) = (
            dense(&w2_values, Shape::new((C, H))?)?,
            dense(&target_values, Shape::new((B, C))?)?,
        );
        let cpu_ones = dense(&[1.0; B], Shape::new(B)?)?;
        let mut cpu_w1 = cpu_w1;
        let rate = 0.01;
        let mut losses = Vec::new();
        for _ in 0..3 {
            let hidden = ops::relu(&ops::matmul(&x, &w1)?)?;
            let diff = ops::sub(&ops::matmul(&hidden, &w2)?, &targets)?;
            let per_row = ops::reduce_sum(&ops::elementwise_mul(&diff, &diff)?)?;
            per_row.backward(Some(&ones), false)?;
            let g = w1.grad().ok_or_else(|| fail("W1 has no gradient".into()))?;
            TiledEvictable::add_scaled(&w1, &g, -rate)?;
            w1.set_grad(None)?;
            losses.push(ClusterLocal::f32s(per_row.carrier())?.iter().sum::<f32>());

            cpu_w1.set_requires_grad(true)?;
            let hidden = ops::relu(&ops::matmul(&cpu_x, &cpu_w1)?)?;
            let diff = ops::sub(&ops::matmul(&hidden, &cpu_w2)?, &cpu_targets)?;
            let per_row = ops::reduce_sum(&ops::elementwise_mul(&diff, &diff)?)?;
            per_row.backward(Some(&cpu_ones), false)?;
            let g = cpu_w1
                .grad()
                .ok_or_else(|| fail("the CPU W1 has no gradient".into()))?;
            let stepped = ops::add(&cpu_w1, &ops::mul(&g, -rate)?)?.to_f32_vec()?;
            cpu_w1 = dense(&stepped, Shape::new((H, D))?)?;
        }
        let peak = bound.peak.load(Ordering::SeqCst).div_ceil(H * TD);
        if peak > CAPACITY || TiledEvictable::primary_tiles(&w1_carrier)?.len() > CAPACITY {
            return Err(fail(format!(
                "the primary tier held {peak} tiles of W1 in {}, more than {CAPACITY}",
                bound.worst.lock().map(|w| w.clone()).unwrap_or_default()
            )));
        }
        expect_close(
            "trained W1",
            &local_values(&w1)?,
            &cpu_w1.to_f32_vec()?,
            1e-4,
        )?;
        if losses.windows(2).any(|w| w[1] >= w[0]) {
            return Err(fail(format!("the loss did not fall: {losses:?}")));
        }

        // Residency: promote two tiles (moves ClusterMemory → ClusterLocal), evict them back
        // (ClusterLocal → ClusterMemory); values unchanged, version unchanged.
        let before = local_values(&w1)?;
        let version = w1_carrier.version();
        let two = TileSet::new([vec![0, 1], vec![0, 5]])?;
        TiledEvictable::promote(&w1_carrier, &two)?;
        if TiledEvictable::tile_state(&w1_carrier, &[0, 5])?.location() != TileLocation::Primary {
            return Err(fail("tile (0, 5) was not promoted".into()));
        }
        TiledEvictable::evict(&w1_carrier, &two)?;
        if !TiledEvictable::primary_tiles(&w1_carrier)?.is_empty() {
            return Err(fail("evicted tiles are still primary".into()));
        }
        expect_close(
            "W1 after promote and evict",
            &local_values(&w1)?,
            &before,
            0.0,
        )?;
        if w1_carrier.version() != version {
            return Err(fail("residency moved the version".into()));
        }

        // move_async out of cluster memory overlaps with other work and lands on the CPU.
        let span = cluster.tensor(&x_values, Shape::new((B, D))?)?;
        let handle = move_async(&span, &Cpu::carrier(B * D, DType::FLOAT32, true, false)?)?;
        let busy = ops::reduce_sum(&cpu_x)?;
        let landed = handle.wait()?;
        expect_close(
            "move_async to the CPU",
            &landed.to_f32_vec()?,
            &x_values,
            0.0,
        )?;
        if !span.carrier().is_released() || busy.to_f32_vec()?.len() != B {
            return Err(fail(
                "the moved ClusterMemory source was not released".into(),
            ));
        }
        Ok(format!(
            "W1 spread over ranks {owners:?}; losses {losses:?}; peak {peak}/{CAPACITY} tiles"
        ))
    })
}

/// The observable state of a carrier: its values, version, and released and claimed flags.
fn snapshot(carrier: &Carrier) -> Result<(Vec<f32>, u64, bool, bool)> {
    let values = if carrier.class() == ClusterMemory::class()? {
        ClusterMemory::f32s(carrier)?
    } else {
        ClusterLocal::f32s(carrier)?
    };
    Ok((
        values,
        carrier.version(),
        carrier.is_released(),
        carrier.is_claimed(),
    ))
}

fn expect_unchanged(
    what: &str,
    carrier: &Carrier,
    before: &(Vec<f32>, u64, bool, bool),
) -> Result<()> {
    let after = snapshot(carrier)?;
    if &after != before {
        return Err(fail(format!(
            "{what} changed: (values, version, released, claimed) was {before:?}, is {after:?}"
        )));
    }
    Ok(())
}

/// Injected refusals: a read and a write that fail leave both carriers as they were, and a
/// failed eviction keeps the tiles where they were.
fn failed_transfer(cluster: &Cluster) -> Result<String> {
    client_or_serve(cluster, || {
        let n = 96;
        let far_values = values(n, 3, 1.0);
        let near_values = values(n, 5, 1.0);
        let far = cluster.memory_from_f32(&far_values)?;
        let near = ClusterLocal::from_f32(&near_values)?;
        let far_before = snapshot(&far)?;
        let near_before = snapshot(&near)?;

        // A read (ClusterMemory → ClusterLocal) refused by the second owner.
        let second = cluster.owners()[1 % cluster.owners().len()];
        cluster.inject_fault(second, ServerFault::Refuse(RequestKind::Get))?;
        let read = expect_error(
            "a refused read",
            move_to(&Tensor::compact(far.clone(), Shape::new(n)?)?, &near),
            ErrorKind::Runtime,
            &[
                &format!("rank {second} refused: injected failure"),
                "get of slots 0..96",
            ],
        )?;
        expect_unchanged("the source of a failed read", &far, &far_before)?;
        expect_unchanged("the destination of a failed read", &near, &near_before)?;

        // A write (ClusterLocal → ClusterMemory) refused by the last owner: the others had
        // staged their parts, which are dropped.
        let last = *cluster.owners().last().unwrap_or(&1);
        cluster.inject_fault(last, ServerFault::Refuse(RequestKind::Put))?;
        let write = expect_error(
            "a refused write",
            move_to(&Tensor::compact(near.clone(), Shape::new(n)?)?, &far),
            ErrorKind::Runtime,
            &[
                &format!("rank {last} refused: injected failure"),
                "put of slots 0..96",
            ],
        )?;
        expect_unchanged("the source of a failed write", &near, &near_before)?;
        expect_unchanged("the destination of a failed write", &far, &far_before)?;

        // The same transfers succeed afterwards.
        let moved = move_to(&Tensor::compact(near.clone(), Shape::new(n)?)?, &far)?;
        expect_close(
            "a write after the failures",
            &ClusterMemory::f32s(moved.carrier())?,
            &near_values,
            0.0,
        )?;

        // A tiled eviction whose write is refused: the tiles stay primary with their values.
        let tiled = TiledEvictable::carrier(
            &ClusterLocal::from_f32(&far_values)?,
            &cluster.memory(0)?,
            &[4],
            &[24],
            None,
        )?;
        let tensor = Tensor::compact(tiled.clone(), Shape::new(n)?)?;
        let all = TileSet::new([vec![0], vec![1], vec![2], vec![3]])?;
        cluster.inject_fault(last, ServerFault::Refuse(RequestKind::Put))?;
        let evict = expect_error(
            "a refused eviction",
            TiledEvictable::evict(&tiled, &all),
            ErrorKind::Runtime,
            &[&format!("rank {last} refused: injected failure")],
        )?;
        if TiledEvictable::primary_tiles(&tiled)?.len() != 4 || tiled.version() != 0 {
            return Err(fail("a failed eviction moved tiles or the version".into()));
        }
        expect_close(
            "tiles after a failed eviction",
            &local_values(&tensor)?,
            &far_values,
            0.0,
        )?;
        TiledEvictable::evict(&tiled, &all)?;
        expect_close(
            "tiles after an eviction",
            &local_values(&tensor)?,
            &far_values,
            0.0,
        )?;
        Ok(format!("read: {read}; write: {write}; eviction: {evict}"))
    })
}

/// The last rank exits when its next request of `kind` arrives: the client's transfer fails
/// within the timeout naming it; the other owners give up once the client is silent.
fn exit_mid_transfer(cluster: &Cluster, kind: RequestKind) -> Result<String> {
    let last = cluster.owners().last().copied().unwrap_or(1);
    if !cluster.is_client() {
        // The client makes no MPI call after the fault, so it cannot stop the owners.
        let idle = cluster.timeout() * 2;
        let outcome = cluster.serve_with_idle_timeout(idle);
        return expect_error(
            "serving a client that went silent",
            outcome,
            ErrorKind::Runtime,
            &["waiting for a request from rank 0", "did not answer"],
        );
    }
    let n = 4096;
    let far = cluster.memory_from_f32(&values(n, 9, 1.0))?;
    let near = ClusterLocal::from_f32(&values(n, 10, 1.0))?;
    cluster.inject_fault(last, ServerFault::Exit(kind, 5))?;
    let started = Instant::now();
    let (outcome, op) = match kind {
        RequestKind::Get => (
            move_to(&Tensor::compact(far, Shape::new(n)?)?, &near).map(|_| ()),
            "get of slots",
        ),
        RequestKind::Put => (
            move_to(&Tensor::compact(near, Shape::new(n)?)?, &far).map(|_| ()),
            "put of slots",
        ),
    };
    let elapsed = started.elapsed();
    let message = expect_error(
        "a transfer with an owner gone",
        outcome,
        ErrorKind::Runtime,
        &[
            op,
            &format!("rank {last} did not answer"),
            "timed out on rank 0",
        ],
    )?;
    let bound = cluster.timeout() + Duration::from_secs(2);
    if elapsed < cluster.timeout() || elapsed > bound {
        return Err(fail(format!(
            "the fault took {elapsed:?}, expected between {:?} and {bound:?}",
            cluster.timeout()
        )));
    }
    let again = Instant::now();
    expect_error(
        "a request after the fault",
        cluster.memory(4),
        ErrorKind::Runtime,
        &["MPI is unusable in this process"],
    )?;
    if again.elapsed() > Duration::from_millis(100) {
        return Err(fail("a request after a fault waited".into()));
    }
    Ok(format!("failed after {elapsed:?}: {message}"))
}
