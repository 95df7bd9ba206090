//! A guided tour of StrideWeave, printing what each step shows.
//!
//! Run it with `cargo run --release --example tour`. It grows with each capability of the
//! runtime: the layout algebra every tensor is built on, then carriers, tensors, views and
//! moves between carriers, operations, autograd, a third-party carrier added through the
//! carrier extension (`crates/strideweave/examples/device_carrier/mod.rs`, also run by
//! `examples/custom_carrier.rs`), and
//! out-of-core work through TiledEvictable, and a GPU carrier from another crate
//! (`strideweave-wgpu`) running a small model's forward pass when an adapter exists.

#[path = "../../strideweave/examples/device_carrier/mod.rs"]
mod device_carrier;

use strideweave::carriers::{Cpu, FileBacked};
use strideweave::layout::{IndexMap, Layout, Shape, SliceKey};
use strideweave::movement::move_to;
use strideweave::operation::call;
use strideweave::{ops, DType, ErrorKind, Result, Tensor, Value};
use strideweave_wgpu::Gpu;

fn main() -> Result<()> {
    println!("StrideWeave tour\n================\n");
    layouts()?;
    algebra()?;
    views()?;
    tensors()?;
    operations()?;
    training()?;
    extension()?;
    out_of_core()?;
    gpu()?;
    out_of_core_training()?;
    Ok(())
}

/// A deterministic pseudo-random number in [-1, 1).
fn noise(state: &mut u64) -> f32 {
    *state = state
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    ((*state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
}

/// A fresh leaf that requires gradients.
fn parameter(values: &[f32], shape: Shape) -> Result<Tensor> {
    let t = Tensor::compact(Cpu::from_f32(values, true)?, shape)?;
    t.set_requires_grad(true)?;
    Ok(t)
}

/// One gradient-descent step: `p - rate·p.grad`, as a new leaf.
fn step(p: &Tensor, rate: f64) -> Result<Tensor> {
    let updated = {
        let _off = strideweave::autograd::no_grad();
        let g = p
            .grad()
            .ok_or_else(|| strideweave::Error::Runtime("no gradient".into()))?;
        ops::sub(p, &ops::mul(&g, rate)?)?
    };
    updated.set_requires_grad(true)?;
    Ok(updated)
}

fn training() -> Result<()> {
    println!("6. Autograd: a two-layer perceptron learns which quadrants share a sign.");
    const N: usize = 256;
    const H: usize = 16;
    let mut state = 7u64;
    let mut points = vec![0.0f32; N * 2];
    let mut labels = vec![0.0f32; N];
    for i in 0..N {
        let (a, b) = (noise(&mut state), noise(&mut state));
        points[i] = a; // column-major (N, 2): x0 of every point, then x1
        points[N + i] = b;
        labels[i] = if a * b > 0.0 { 1.0 } else { 0.0 };
    }
    let x = Tensor::compact(Cpu::from_f32(&points, true)?, Shape::new((N, 2))?)?;
    let y = Tensor::compact(Cpu::from_f32(&labels, true)?, Shape::new((N, 1))?)?;
    let init: Vec<f32> = (0..H * 2).map(|_| noise(&mut state) * 1.5).collect();
    let mut w1 = parameter(&init, Shape::new((H, 2))?)?;
    let mut b1 = parameter(&[0.0; H], Shape::new((1, H))?)?;
    let init: Vec<f32> = (0..H).map(|_| noise(&mut state)).collect();
    let mut w2 = parameter(&init, Shape::new((1, H))?)?;
    let mut b2 = parameter(&[0.0], Shape::new((1, 1))?)?;
    let forward = |w1: &Tensor, b1: &Tensor, w2: &Tensor, b2: &Tensor| -> Result<Tensor> {
        // (N,2)·(H,2) -> (N,H): mode 1 of both operands is contracted.
        let hidden = ops::relu(&ops::add(&ops::matmul(&x, w1)?, b1)?)?;
        ops::sigmoid(&ops::add(&ops::matmul(&hidden, w2)?, b2)?)
    };
    for epoch in 0..=600 {
        let p = forward(&w1, &b1, &w2, &b2)?;
        let diff = ops::sub(&p, &y)?;
        let squared = ops::elementwise_mul(&diff, &diff)?;
        let loss = ops::mul(
            &ops::reduce_sum(&squared.permute(&[1, 0])?)?,
            1.0 / N as f64,
        )?;
        if epoch % 100 == 0 {
            let value = loss.get(&0.into())?.as_f64().unwrap_or(f64::NAN);
            println!("   epoch {epoch:>3}: mean squared error {value:.4}");
        }
        loss.backward(None, false)?;
        w1 = step(&w1, 2.0)?;
        b1 = step(&b1, 2.0)?;
        w2 = step(&w2, 2.0)?;
        b2 = step(&b2, 2.0)?;
    }
    let p = {
        let _off = strideweave::autograd::no_grad();
        forward(&w1, &b1, &w2, &b2)?
    };
    let correct = p
        .to_values()?
        .iter()
        .zip(&labels)
        .filter(|(p, label)| (p.as_f64().unwrap_or(0.0) > 0.5) == (**label > 0.5))
        .count();
    println!(
        "   accuracy after training: {correct}/{N} = {:.1}%\n",
        100.0 * correct as f64 / N as f64
    );
    Ok(())
}

fn extension() -> Result<()> {
    use device_carrier::{device_carrier, device_tensor, floats, neg, tiles_tensor, upload};
    println!(
        "7. The carrier extension: a third-party Device carrier defined through the public API."
    );
    let ext = device_carrier::DeviceExtension::register()?;
    let runs = |counter| device_carrier::Counters::get(counter);
    let x = device_tensor(ext.device, &[1.0, -2.0, 3.5, -4.0])?;
    for capability in x.carrier().capabilities().iter() {
        println!("   Device capability (the union of its kernel patterns' plans): {capability}");
    }
    println!(
        "   neg of 4 elements = {:?}, by the pack's optimized kernel (runs: {})",
        floats(&neg(&x)?)?,
        runs(&ext.counters.fast_ran)
    );
    let y = device_tensor(ext.device, &[5.0, -6.0, 7.0])?;
    println!(
        "   neg of 3 elements = {:?}: the optimized kernel declined the misaligned size, the \
         general one ran asynchronously on a worker thread (runs: {})",
        floats(&neg(&y)?)?,
        runs(&ext.counters.general_ran)
    );
    let on_cpu = Tensor::compact(Cpu::from_f32(&[0.25, 0.5, 0.75], true)?, Shape::new(3)?)?;
    if let Err(error) = move_to(&on_cpu, &device_carrier(ext.device, &[0.0; 3])?) {
        println!(
            "   move CPU -> Device: refused ({:?}); routes start at the defining class, so only \
             Device -> CPU has one",
            error.kind()
        );
    }
    let on_device = upload(ext.device, &on_cpu)?;
    let back = move_to(&on_device, &Cpu::carrier(3, DType::FLOAT32, true, false)?)?;
    println!(
        "   CPU -> Device by upload, Device -> CPU by the Device's route: {:?} (Device source \
         released: {})",
        floats(&back)?,
        on_device.carrier().is_released()
    );
    let info = on_device
        .carrier()
        .require_facet::<device_carrier::DeviceInfo>()?;
    println!("   the DeviceInfo facet names the device: {}", info.name);
    let z = tiles_tensor(ext.tiles, ext.device, &[0.5, 1.5, -2.5, 3.0])?;
    let result = neg(&z)?;
    println!(
        "   DeviceTiles, a dependent carrier over a Device, forwards neg to it: {:?} on {}\n",
        floats(&result)?,
        result.carrier().class().name()
    );
    Ok(())
}

fn operations() -> Result<()> {
    println!("5. Operations: the first tensor's carrier decides, its capabilities gate the plan.");
    let x = Tensor::compact(
        Cpu::from_f32(&[1.0, -2.0, 3.0, -4.0, 5.0, -6.0], true)?,
        Shape::new((2, 3))?,
    )?;
    let bias = Tensor::compact(Cpu::from_f32(&[10.0, 20.0], true)?, Shape::new((2, 1))?)?;
    show("x", &x)?;
    let shifted = &call("add", [x.clone().into(), bias.clone().into()], &[])?[0];
    show("x + bias (broadcast over mode 1)", shifted)?;
    let rectified = &call("relu", [x.clone().into()], &[])?[0];
    show("relu(x)", rectified)?;
    let sums = &call("reduce_sum", [x.clone().into()], &[])?[0];
    println!("   reduce_sum(x) over mode 1 = {:?}", sums.to_values()?);
    let w = Tensor::compact(
        Cpu::from_f32(&[1.0, 0.0, 0.5, 0.0, 1.0, 0.5], true)?,
        Shape::new((2, 3))?,
    )?;
    let product = &call("matmul", [x.clone().into(), w.into()], &[])?[0];
    show(
        "matmul(x, w): (2,3)·(2,3) contracts mode 1 -> (2,2)",
        product,
    )?;
    let ints = Tensor::compact(Cpu::from_i32(&[i32::MAX], true)?, Shape::new(1)?)?;
    if let Err(error) = call("add", [ints.clone().into(), ints.into()], &[]) {
        println!("   Int32 arithmetic is checked: {error}");
    }
    let cpu = x.carrier();
    let capabilities = cpu.capabilities();
    println!(
        "   the CPU carrier declares {} capabilities; a few of them:",
        capabilities.len()
    );
    for capability in capabilities
        .iter()
        .filter(|c| ["relu", "reduce_sum", "matmul"].contains(&c.operation()))
    {
        println!("     {capability}");
    }
    println!();
    Ok(())
}

/// Prints a rank-2 tensor as a grid (rows: mode 0).
fn show(name: &str, tensor: &Tensor) -> Result<()> {
    println!("   {name} = {tensor:?}, version {}", tensor.version());
    let rows = tensor.layout().mode(0)?.size();
    let columns = tensor.size() / rows.max(1);
    for i in 0..rows {
        let cells: Vec<String> = (0..columns)
            .map(|j| {
                tensor
                    .get(&(i, j).into())
                    .map(|v| format!("{:>5}", v.to_string()))
            })
            .collect::<Result<_>>()?;
        println!("      {}", cells.join(" "));
    }
    Ok(())
}

fn tensors() -> Result<()> {
    println!("4. Carriers hold the slots; tensors are (carrier, offset, layout, dtype).");
    let values: Vec<Value> = (0..12).map(|i| Value::Float(i as f64)).collect();
    let cpu = Cpu::from_values(&values, DType::FLOAT32, true)?;
    let matrix = Tensor::compact(cpu.clone(), Shape::new((4, 3))?)?;
    show("matrix", &matrix)?;
    let transposed = matrix.permute(&[1, 0])?;
    let column = matrix.slice(&[SliceKey::all(), SliceKey::Index(1)])?;
    println!("   views share the carrier: transposed {transposed:?}, column {column:?}");
    column.set(&2.into(), Value::Float(-1.0))?;
    println!(
        "   after writing -1 through the column view: matrix[2,1] = {}, every view at version {} (carrier {})",
        matrix.get(&(2, 1).into())?,
        transposed.version(),
        cpu.version()
    );
    let file = FileBacked::carrier(None, DType::FLOAT32, true)?;
    let on_disk = move_to(&transposed, &file)?;
    let path = file
        .downcast_ref::<FileBacked>()
        .and_then(FileBacked::path)
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    println!(
        "   moved the transposed view to FileBacked: {} slots in {path}; the CPU source is released: {}",
        file.size(),
        cpu.is_released()
    );
    let back = move_to(
        &on_disk,
        &Cpu::carrier(file.size(), DType::FLOAT32, true, false)?,
    )?;
    show("back on CPU", &back)?;
    let frozen = Cpu::from_values(&values, DType::FLOAT32, false)?;
    if let Err(error) = frozen.set(0, Value::Float(1.0)) {
        println!("   an immutable carrier refuses writes: {error}");
    }
    if let Err(error) = back.get(&(3, 0).into()) {
        println!("   coordinates outside the shape are refused: {error}");
    }
    println!();
    Ok(())
}

/// Prints the indices of a rank-2 layout as a grid (rows: mode 0, columns: mode 1).
fn grid(layout: &Layout) -> Result<()> {
    let rows = layout.mode(0)?.size();
    let columns = layout.size() / rows;
    for i in 0..rows {
        let cells: Vec<String> = (0..columns)
            .map(|j| layout.index_of(i + rows * j).map(|x| format!("{x:>3}")))
            .collect::<std::result::Result<_, _>>()?;
        println!("    {}", cells.join(" "));
    }
    Ok(())
}

fn layouts() -> Result<()> {
    println!("1. Layouts map coordinates to indices, first mode fastest.");
    let column_major = Layout::column_major(Shape::new((4, 3))?);
    println!(
        "   column-major {column_major}: size {}, cosize {}",
        column_major.size(),
        column_major.cosize()
    );
    grid(&column_major)?;
    let row_major: Layout = "(4,3):(3,1)".parse()?;
    println!("   row-major {row_major}:");
    grid(&row_major)?;
    let nested: Layout = "(4,(2,3)):(1,(4,8))".parse()?;
    println!(
        "   nested {nested}: rank {}, depth {}, profile {}",
        nested.rank(),
        nested.depth(),
        nested.profile()
    );
    println!(
        "   index of (3,(1,2)) = {}; an integer may stand for a subtree: (3,5) = {}",
        nested.index(&(3, (1, 2)).into())?,
        nested.index(&(3, 5).into())?
    );
    let broadcast: Layout = "(4,3):(0,1)".parse()?;
    println!(
        "   broadcast {broadcast}: injective {}, each index reached {} times\n",
        broadcast.is_injective(),
        broadcast
            .uniform_preimage_extent(&Shape::new(3)?)
            .unwrap_or(0)
    );
    Ok(())
}

fn algebra() -> Result<()> {
    println!("2. The algebra: coalesce, compose, complement, divide, product, inverse.");
    let scattered: Layout = "(2,(3,2)):(2,(4,12))".parse()?;
    println!("   coalesce({scattered}) = {}", scattered.coalesce());
    let outer: Layout = "(6,2):(8,2)".parse()?;
    let inner: Layout = "(4,3):(3,1)".parse()?;
    println!("   {outer} o {inner} = {}", outer.compose(&inner)?);
    let general = "(2,2):(1,3)".parse::<Layout>()?.compose(&"4:1".parse()?)?;
    let values: Vec<usize> = (0..general.size())
        .map(|i| general.apply(i))
        .collect::<std::result::Result<_, _>>()?;
    println!("   (2,2):(1,3) o 4:1 is no layout; as a map it gives {values:?}");
    let tile: Layout = "(2,2):(1,6)".parse()?;
    println!("   complement({tile}, 24) = {}", tile.complement(24)?);
    let matrix: Layout = "(8,6):(1,8)".parse()?;
    let tiles = [
        Layout::column_major(Shape::new(2)?),
        Layout::column_major(Shape::new(3)?),
    ];
    println!(
        "   zipped_divide({matrix}, [2:1, 3:1]) = {}",
        matrix.zipped_divide(&tiles)?
    );
    let block: Layout = "(2,2):(1,2)".parse()?;
    let arrangement: Layout = "(3,4):(1,3)".parse()?;
    let product = block.blocked_product(&arrangement)?;
    println!("   blocked_product({block}, {arrangement}) = {product}");
    let transposed: Layout = "(4,2):(2,1)".parse()?;
    println!(
        "   right_inverse({transposed}) = {}\n",
        transposed.right_inverse()
    );
    Ok(())
}

fn views() -> Result<()> {
    println!("3. Views are layout arithmetic: slicing, reshaping, broadcasting.");
    let matrix: Layout = "(5,10):(1,5)".parse()?;
    let (offset, row) = matrix.slice(&[SliceKey::Index(2), SliceKey::stepped(1, 9, 2)])?;
    println!("   {matrix}[2, 1:9:2] = offset {offset} + {row}");
    let reshaped = "(2,3):(2,4)"
        .parse::<Layout>()?
        .reshape(&Shape::new((3, (2,)))?)?;
    println!("   (2,3):(2,4) reshaped to (3,(2)) = {reshaped}");
    let vector: Layout = "2:1".parse()?;
    println!(
        "   {vector} broadcast into (3,2) along dim 1 = {}",
        vector.broadcast_in_dim(&Shape::new((3, 2))?, &[1])?
    );
    let malformed = "(4,2):(1".parse::<Layout>();
    if let Err(error) = malformed {
        println!("   bad input is an error, never a panic: {error}");
    }
    println!();
    Ok(())
}

/// A primary-tier bound for the out-of-core section, printing progress at the halfway mark.
#[derive(Debug)]
struct FourTiles;

impl strideweave::carriers::ResidencyPolicy for FourTiles {
    fn plan(
        &self,
        _: &strideweave::carriers::TileSet,
        _: strideweave::carriers::ResidencyPurpose,
    ) -> Result<strideweave::carriers::ResidencyPlan> {
        use strideweave::carriers::{ResidencyPlan, TileSet};
        // Suggest nothing: the operation streams its tiles within the capacity.
        ResidencyPlan::new(TileSet::empty(), TileSet::empty(), TileSet::empty())
    }

    fn primary_capacity(&self) -> Option<usize> {
        Some(4)
    }

    fn on_progress(&self, progress: &strideweave::carriers::TileProgress) {
        if progress.completed() * 2 == progress.total() {
            println!(
                "     progress of {}: {}/{} items, {} tiles staged, {} in flight at most",
                progress.operation(),
                progress.completed(),
                progress.total(),
                progress.staged_tiles(),
                progress.prefetch_depth()
            );
        }
    }
}

/// One letter per tile, in tile order: P primary, S secondary, I implicit, X invalid.
fn residency_map(carrier: &strideweave::Carrier) -> Result<String> {
    use strideweave::carriers::{TileLocation, TiledEvictable};
    let grid = TiledEvictable::grid_shape(carrier)?;
    (0..grid[1])
        .map(|j| {
            let state = TiledEvictable::tile_state(carrier, &[0, j])?;
            Ok(match state.location() {
                TileLocation::Primary => 'P',
                TileLocation::Secondary => 'S',
                TileLocation::Implicit => 'I',
                TileLocation::Invalid => 'X',
            })
        })
        .collect()
}

fn out_of_core() -> Result<()> {
    use std::sync::Arc;
    use strideweave::carriers::{TileSet, TiledEvictable};
    println!("8. Out of core: a TiledEvictable four times larger than its CPU tier.");
    let (n, k, tile) = (1024, 1024, 64);
    let values: Vec<f32> = (0..n * k).map(|i| ((i % 17) as f32 - 8.0) / 8.0).collect();
    let file = FileBacked::carrier(None, DType::FLOAT32, true)?;
    move_to(
        &Tensor::compact(Cpu::from_f32(&values, true)?, Shape::new(n * k)?)?,
        &file,
    )?;
    let carrier = TiledEvictable::carrier(
        &Cpu::from_f32(&[], true)?,
        &file,
        &[1, k / tile],
        &[n, tile],
        Some(Arc::new(FourTiles)),
    )?;
    let x = Tensor::compact(carrier.clone(), Shape::new((n, k))?)?;
    println!(
        "   a {n}x{k} Float32 tensor (4 MiB) in {} tiles of {n}x{tile} on a FileBacked \
         secondary tier; the CPU primary holds at most 4 tiles",
        k / tile
    );
    println!("   tile residency: {}", residency_map(&carrier)?);
    let sums = ops::reduce_sum(&x)?;
    let dense = Tensor::compact(Cpu::from_f32(&values, true)?, Shape::new((n, k))?)?;
    let agree = sums.to_values()? == ops::reduce_sum(&dense)?.to_values()?;
    println!(
        "   reduce_sum over mode 1 streams the tiles through the CPU tier: sums[0..3] = {:?} \
         on {} (same as the dense sum: {agree})",
        &sums.to_values()?[..3],
        sums.carrier().class().name()
    );
    let weights: Vec<f32> = (0..4 * k)
        .map(|i| if i % 4 == i / 4 % 4 { 1.0 } else { 0.0 })
        .collect();
    let w_carrier = TiledEvictable::carrier(
        &Cpu::from_f32(&weights, true)?,
        &Cpu::from_f32(&[], true)?,
        &[1, k / tile],
        &[4, tile],
        None,
    )?;
    let w = Tensor::compact(w_carrier, Shape::new((4, k))?)?;
    let product = ops::matmul(&x, &w)?;
    println!(
        "   matmul with a small resident 4x{k} operand: Shape {} on {}",
        product.shape(),
        product.carrier().class().name()
    );
    println!(
        "   tile residency afterwards: {} (streaming copies tiles, it never moves them; \
         version {})",
        residency_map(&carrier)?,
        carrier.version()
    );
    TiledEvictable::promote(&carrier, &TileSet::new([vec![0, 0], vec![0, 1]])?)?;
    println!(
        "   after promoting two tiles: {} (resident tiles count against the 4-tile bound)\n",
        residency_map(&carrier)?
    );
    Ok(())
}

/// Part 9: a GPU carrier from another crate (`strideweave-wgpu`), defined only through the
/// public carrier extension: the adapter wgpu found, and a small model's forward pass run by
/// the Gpu class's JIT kernels next to the same pass on the CPU.
fn gpu() -> Result<()> {
    println!("9. A GPU carrier from another crate: strideweave-wgpu.");
    let gpu = match Gpu::shared() {
        Ok(gpu) => gpu,
        Err(error) if error.kind() == ErrorKind::NotImplemented => {
            println!("   no GPU adapter on this machine ({error}); part skipped\n");
            return Ok(());
        }
        Err(error) => return Err(error),
    };
    println!("   adapter: {}", gpu.device().adapter());
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut matrix = |rows: usize, columns: usize| -> Result<Tensor> {
        let values: Vec<f32> = (0..rows * columns).map(|_| noise(&mut state)).collect();
        Tensor::compact(Cpu::from_f32(&values, true)?, Shape::new((rows, columns))?)
    };
    // logits = relu(x·w1ᵀ + b1)·w2ᵀ: 8 samples, 4 features, 16 hidden units, 3 classes.
    let (x, w1, b1, w2) = (
        matrix(8, 4)?,
        matrix(16, 4)?,
        matrix(1, 16)?,
        matrix(3, 16)?,
    );
    let forward = |x: &Tensor, w1: &Tensor, b1: &Tensor, w2: &Tensor| -> Result<Tensor> {
        ops::matmul(&ops::relu(&ops::add(&ops::matmul(x, w1)?, b1)?)?, w2)
    };
    let on_cpu = forward(&x, &w1, &b1, &w2)?;
    let uploaded = [&x, &w1, &b1, &w2].map(|t| gpu.upload(t));
    let [gx, gw1, gb1, gw2] = uploaded;
    let on_gpu = forward(&gx?, &gw1?, &gb1?, &gw2?)?;
    println!(
        "   forward pass of a 4-16-3 perceptron on {} ({} kernels compiled)",
        on_gpu.carrier().class(),
        gpu.device().pipeline_counts().0
    );
    let back = move_to(
        &on_gpu,
        &Cpu::carrier(on_gpu.carrier().size(), DType::FLOAT32, true, false)?,
    )?;
    let (gpu_values, cpu_values) = (back.to_values()?, on_cpu.to_values()?);
    let mut largest = 0.0f64;
    for (g, c) in gpu_values.iter().zip(&cpu_values) {
        if let (Value::Float(g), Value::Float(c)) = (g, c) {
            largest = largest.max((g - c).abs());
        }
    }
    let first: Vec<String> = (0..3)
        .map(|j| back.get(&(0, j).into()).map(|v| format!("{v}")))
        .collect::<Result<_>>()?;
    println!(
        "   logits of sample 0, moved back to the CPU: [{}]",
        first.join(", ")
    );
    println!("   largest difference from the CPU's forward pass: {largest:.2e}\n");
    Ok(())
}

/// Bounds a primary tier (or only observes) and keeps the most staged tiles any progress
/// report saw.
#[derive(Debug, Default)]
struct Meter {
    capacity: Option<usize>,
    peak: std::sync::atomic::AtomicUsize,
}

impl strideweave::carriers::ResidencyPolicy for Meter {
    fn plan(
        &self,
        _: &strideweave::carriers::TileSet,
        _: strideweave::carriers::ResidencyPurpose,
    ) -> Result<strideweave::carriers::ResidencyPlan> {
        use strideweave::carriers::{ResidencyPlan, TileSet};
        ResidencyPlan::new(TileSet::empty(), TileSet::empty(), TileSet::empty())
    }

    fn primary_capacity(&self) -> Option<usize> {
        self.capacity
    }

    fn on_progress(&self, progress: &strideweave::carriers::TileProgress) {
        self.peak
            .fetch_max(progress.staged_peak(), std::sync::atomic::Ordering::SeqCst);
    }
}

fn out_of_core_training() -> Result<()> {
    use std::sync::atomic::Ordering;
    use std::sync::Arc;
    use strideweave::carriers::TiledEvictable;
    println!("10. Out-of-core training: the first layer lives in a file four times its CPU tier.");
    const B: usize = 64;
    const D: usize = 4096;
    const H: usize = 256;
    const C: usize = 8;
    const TD: usize = 256;
    const CAPACITY: usize = 4;
    let mut state = 11u64;
    let scale = 1.0 / (D as f32).sqrt();
    let inputs: Vec<f32> = (0..B * D).map(|_| noise(&mut state)).collect();
    let teacher: Vec<f32> = (0..H * D)
        .map(|_| noise(&mut state) * 2.0 * scale)
        .collect();
    let student: Vec<f32> = teacher
        .iter()
        .map(|&w| w + noise(&mut state) * scale)
        .collect();
    let readout: Vec<f32> = (0..C * H)
        .map(|_| noise(&mut state) / (H as f32).sqrt())
        .collect();
    let dense = |values: &[f32], shape: Shape| -> Result<Tensor> {
        Tensor::compact(Cpu::from_f32(values, true)?, shape)
    };
    let w2 = dense(&readout, Shape::new((C, H))?)?;
    let targets = {
        let teacher = dense(&teacher, Shape::new((H, D))?)?;
        let x = dense(&inputs, Shape::new((B, D))?)?;
        ops::matmul(&ops::relu(&ops::matmul(&x, &teacher)?)?, &w2)?
    };
    // The batch: a small TiledEvictable resident on its CPU tier (its policy only observes).
    let observer = Arc::new(Meter::default());
    let x = Tensor::compact(
        TiledEvictable::carrier(
            &Cpu::from_f32(&inputs, true)?,
            &Cpu::from_f32(&[], true)?,
            &[1, D / TD],
            &[B, TD],
            Some(observer.clone()),
        )?,
        Shape::new((B, D))?,
    )?;
    // The first layer: 256x4096 Float32 (4 MiB) in a FileBacked file, 16 tiles of 256x256,
    // through a CPU tier of 4 tiles.
    let file = FileBacked::carrier(None, DType::FLOAT32, true)?;
    move_to(&dense(&student, Shape::new(H * D)?)?, &file)?;
    let bound = Arc::new(Meter {
        capacity: Some(CAPACITY),
        ..Meter::default()
    });
    let w1_carrier = TiledEvictable::carrier(
        &Cpu::from_f32(&[], true)?,
        &file,
        &[1, D / TD],
        &[H, TD],
        Some(bound.clone()),
    )?;
    let w1 = Tensor::compact(w1_carrier.clone(), Shape::new((H, D))?)?;
    w1.set_requires_grad(true)?;
    println!(
        "   W1 is {H}x{D} in {} tiles of {H}x{TD} on a FileBacked secondary; the CPU primary \
         holds at most {CAPACITY} tiles",
        D / TD
    );
    let ones = dense(&[1.0; B], Shape::new(B)?)?;
    let rate = 0.002;
    let mut first = None;
    for epoch in 0..8 {
        let hidden = ops::relu(&ops::matmul(&x, &w1)?)?;
        let diff = ops::sub(&ops::matmul(&hidden, &w2)?, &targets)?;
        let per_row = ops::reduce_sum(&ops::elementwise_mul(&diff, &diff)?)?;
        let loss: f64 = per_row
            .to_values()?
            .iter()
            .map(|v| v.as_f64().unwrap_or(f64::NAN))
            .sum();
        per_row.backward(Some(&ones), false)?;
        let g = w1
            .grad()
            .ok_or_else(|| strideweave::Error::Runtime("W1 has no gradient".into()))?;
        // The SGD step, written back tile by tile where each tile lives.
        TiledEvictable::add_scaled(&w1, &g, -rate)?;
        w1.set_grad(None)?;
        let resident = TiledEvictable::primary_tiles(&w1_carrier)?.len();
        let peak = resident
            + observer
                .peak
                .load(Ordering::SeqCst)
                .max(bound.peak.load(Ordering::SeqCst));
        assert!(peak <= CAPACITY, "the primary tier held {peak} tiles");
        println!(
            "   epoch {epoch}: loss {loss:>9.4}, W1 tiles resident {resident}, peak on the \
             primary tier {peak}/{CAPACITY} tiles"
        );
        first.get_or_insert(loss);
    }
    println!(
        "   forward, streamed backward and update never held more than {CAPACITY} tiles of W1 \
         on the CPU tier (loss started at {:.4})\n",
        first.unwrap_or(f64::NAN)
    );
    Ok(())
}
