//! A tiled `reduce_sum` over a cluster-memory tier against the same over a FileBacked tier,
//! in the same run (docs/distributed.md, Cluster memory: measured).
//!
//! `cargo bench -p strideweave-mpi --bench cluster_tier` launches this binary under
//! `mpirun -n 2` and `mpirun -n 4` (with `--oversubscribe` and `--allow-run-as-root`). Rank 0
//! holds a 4096 × 4096 Float32 tensor (64 MiB) twice as the secondary tier of a
//! TiledEvictable in 16 tiles of 4096 × 256 (4 MiB) whose primary tier is bounded to 4 tiles:
//! once in a FileBacked file (over a CPU primary), once in the other ranks' memory (over a
//! ClusterLocal primary). It checks that both sums agree, then alternates the two round by
//! round and prints the medians and the ratio FileBacked time / cluster time (1.0: as fast
//! as the file, which is in the page cache). `ROUNDS` and `COLUMNS` in the environment change
//! the defaults (10 rounds, 4096 columns).

use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::time::{Duration, Instant};

use strideweave::carriers::{CapacityPolicy, Cpu, FileBacked, ResidencyPolicy, TiledEvictable};
use strideweave::movement::move_to;
use strideweave::{ops, DType, Error, Result, Shape, Tensor};
use strideweave_mpi::{Cluster, ClusterLocal, Mpi};

/// Set in the ranks' environment by the launcher.
const WORKER: &str = "STRIDEWEAVE_MPI_BENCH_WORKER";
/// Rows of the tensor.
const ROWS: usize = 4096;
/// Columns per tile.
const TILE_COLUMNS: usize = 256;
/// Tiles the primary tier may hold.
const CAPACITY: usize = 4;

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
    let mpi = Mpi::init()?;
    let cluster = Cluster::join(mpi.world(), 0)?;
    if !cluster.is_client() {
        cluster.serve()?;
        return Ok(());
    }
    let outcome = client(&cluster);
    let stopped = cluster.stop();
    outcome.and(stopped)
}

fn client(cluster: &Cluster) -> Result<()> {
    let rounds = setting("ROUNDS", 10).max(1);
    let columns = setting("COLUMNS", 4096).max(TILE_COLUMNS) / TILE_COLUMNS * TILE_COLUMNS;
    let tiles = columns / TILE_COLUMNS;
    let size = ROWS * columns;
    let values: Vec<f32> = (0..size).map(|i| ((i % 13) as f32 - 6.0) / 8.0).collect();
    let shape = Shape::new((ROWS, columns))?;
    let policy = || Some(Arc::new(CapacityPolicy::new(CAPACITY)) as Arc<dyn ResidencyPolicy>);

    let file = FileBacked::carrier(None, DType::FLOAT32, true)?;
    move_to(
        &Tensor::compact(Cpu::from_f32(&values, true)?, Shape::new(size)?)?,
        &file,
    )?;
    let on_file = Tensor::compact(
        TiledEvictable::carrier(
            &Cpu::from_f32(&[], true)?,
            &file,
            &[1, tiles],
            &[ROWS, TILE_COLUMNS],
            policy(),
        )?,
        shape.clone(),
    )?;
    let on_cluster = Tensor::compact(
        TiledEvictable::carrier(
            &ClusterLocal::carrier(0, DType::FLOAT32)?,
            &cluster.memory_from_f32(&values)?,
            &[1, tiles],
            &[ROWS, TILE_COLUMNS],
            policy(),
        )?,
        shape,
    )?;
    let file_sums = ops::reduce_sum(&on_file)?.to_f32_vec()?;
    let cluster_sums = ops::reduce_sum(&on_cluster)?;
    let cluster_sums = ClusterLocal::f32s(cluster_sums.carrier())?;
    if file_sums != cluster_sums {
        return Err(Error::Runtime(
            "the sums over the FileBacked and the cluster tiers differ".into(),
        ));
    }
    let (mut file_times, mut cluster_times) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let start = Instant::now();
        std::hint::black_box(ops::reduce_sum(&on_file)?);
        file_times.push(start.elapsed());
        let start = Instant::now();
        std::hint::black_box(ops::reduce_sum(&on_cluster)?);
        cluster_times.push(start.elapsed());
    }
    let (file, far) = (median(file_times), median(cluster_times));
    println!(
        "cluster_tier/{} ranks: tiled reduce_sum of {ROWS}x{columns} Float32 ({} MiB) in {tiles} \
         tiles, primary bound {CAPACITY} tiles, {rounds} rounds: FileBacked tier {:.2} ms, \
         cluster tier (owners {:?}) {:.2} ms, ratio FileBacked/cluster {:.2}",
        cluster.owners().len() + 1,
        (size * 4) >> 20,
        milliseconds(file),
        cluster.owners(),
        milliseconds(far),
        file.as_secs_f64() / far.as_secs_f64()
    );
    Ok(())
}
