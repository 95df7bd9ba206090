//! All-reduce of 16 Mi Float32 through `strideweave_mpi::all_reduce` against a raw
//! `MPI_Allreduce` of the same buffer, in the same run (docs/distributed.md, Performance).
//!
//! `cargo bench -p strideweave-mpi --bench all_reduce` launches this binary under
//! `mpirun -n 2` and `mpirun -n 4` (with `--oversubscribe` and `--allow-run-as-root`); each
//! rank alternates the candidates round by round, after a barrier, and rank 0 prints the
//! medians and the ratios (raw time / candidate time: 1.0 is as fast as raw MPI, the target
//! is at least 0.9 for an MpiHost tensor). `ROUNDS` and `ELEMENTS` in the environment
//! change the defaults (10 rounds, 16 Mi elements).

use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use mpi::collective::SystemOperation;
use mpi::traits::*;
use strideweave::{Result, Shape, Tensor};
use strideweave_mpi::{all_reduce, Mpi, MpiHost, Reduction};

/// Set in the ranks' environment by the launcher.
const WORKER: &str = "STRIDEWEAVE_MPI_BENCH_WORKER";

fn main() -> ExitCode {
    if std::env::var_os(WORKER).is_some() {
        return match worker() {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("benchmark rank failed: {error}");
                ExitCode::FAILURE
            }
        };
    }
    let Ok(exe) = std::env::current_exe() else {
        eprintln!("cannot find the benchmark binary");
        return ExitCode::FAILURE;
    };
    for ranks in [2, 4] {
        let status = Command::new("timeout")
            .args([
                "-k",
                "10",
                "600",
                "mpirun",
                "--allow-run-as-root",
                "--oversubscribe",
            ])
            .args(["-n", &ranks.to_string(), "-x", WORKER])
            .env(WORKER, "1")
            .arg(&exe)
            .status();
        match status {
            Ok(status) if status.success() => {}
            Ok(status) => {
                eprintln!("mpirun -n {ranks} failed: {status}");
                return ExitCode::FAILURE;
            }
            Err(error) => {
                eprintln!("cannot run mpirun (is Open MPI installed?): {error}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn milliseconds(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn worker() -> Result<()> {
    let elements = setting("ELEMENTS", 16 << 20).max(1);
    let rounds = setting("ROUNDS", 10).max(1);
    let mpi = Mpi::init()?;
    let world = mpi.world();
    let raw_world = mpi::topology::SimpleCommunicator::world();
    let rank = world.rank();
    let send: Vec<f32> = (0..elements)
        .map(|i| (i % 1024) as f32 * 0.5 + rank as f32)
        .collect();
    let mut receive = vec![0.0f32; elements];
    let shape = Shape::new(elements)?;
    let on_host = MpiHost::tensor(&send, shape.clone())?;
    let on_cpu = Tensor::from_f32(&send, shape)?;

    // Warm up, and check that the three agree.
    raw_world.all_reduce_into(&send[..], &mut receive[..], SystemOperation::sum());
    let host_result = all_reduce(&on_host, Reduction::Sum, world)?.to_f32_vec()?;
    let cpu_result = all_reduce(&on_cpu, Reduction::Sum, world)?.to_f32_vec()?;
    if host_result != receive || cpu_result != receive {
        return Err(strideweave::Error::Runtime(
            "all_reduce and MPI_Allreduce disagree".into(),
        ));
    }
    drop((host_result, cpu_result));

    let (mut raw, mut host, mut cpu) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        world.barrier()?;
        let t = Instant::now();
        raw_world.all_reduce_into(&send[..], &mut receive[..], SystemOperation::sum());
        raw.push(t.elapsed());

        world.barrier()?;
        let t = Instant::now();
        let y = all_reduce(&on_host, Reduction::Sum, world)?;
        host.push(t.elapsed());
        drop(y);

        world.barrier()?;
        let t = Instant::now();
        let y = all_reduce(&on_cpu, Reduction::Sum, world)?;
        cpu.push(t.elapsed());
        drop(y);
    }
    if rank == 0 {
        let (raw, host, cpu) = (median(raw), median(host), median(cpu));
        println!(
            "all-reduce (sum) of {elements} Float32 ({} MiB), {} ranks, median of {rounds} rounds:",
            (elements * 4) >> 20,
            world.size()
        );
        println!(
            "   raw MPI_Allreduce                  {:8.2} ms",
            milliseconds(raw)
        );
        println!(
            "   all_reduce of an MpiHost tensor    {:8.2} ms   ratio {:.2} (target >= 0.90)",
            milliseconds(host),
            raw.as_secs_f64() / host.as_secs_f64()
        );
        println!(
            "   all_reduce of a CPU tensor         {:8.2} ms   ratio {:.2} (two bulk copies more)",
            milliseconds(cpu),
            raw.as_secs_f64() / cpu.as_secs_f64()
        );
    }
    Ok(())
}
