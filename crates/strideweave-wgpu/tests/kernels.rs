//! The Gpu JIT kernels against the CPU carrier (carrier-extension spec: "Kernel execution
//! interfaces cover JIT and precompiled execution", "Kernel patterns are authoritative and
//! deterministically selected"): every kernel on random strides, broadcasts and offsets, at
//! sizes around the 256-invocation workgroup edge.

mod common;

use common::{download, numbers, own_gpu, same_f32, shared_gpu, upload_operands, Rng};
use strideweave::carriers::Cpu;
use strideweave::operation::{call, Operand};
use strideweave::{DType, ErrorKind, Layout, Result, Shape, Tensor, Value};
use strideweave_wgpu::Gpu;

/// How closely a Gpu result must match the CPU's.
#[derive(Clone, Copy, Debug)]
enum Tolerance {
    /// Bitwise (NaN equals NaN).
    Exact,
    /// `|gpu − cpu| ≤ abs + rel·|cpu|`.
    Close(f64, f64),
}

fn check(what: &str, gpu: &[f64], cpu: &[f64], tolerance: Tolerance) {
    assert_eq!(gpu.len(), cpu.len(), "{what}: lengths");
    for (i, (g, c)) in gpu.iter().zip(cpu).enumerate() {
        let ok = match tolerance {
            Tolerance::Exact => same_f32(*g, *c),
            Tolerance::Close(abs, rel) => (g - c).abs() <= abs + rel * c.abs(),
        };
        assert!(
            ok,
            "{what}: element {i}: gpu {g} vs cpu {c} ({tolerance:?})"
        );
    }
}

/// A random layout of `shape` (rank 2): column-major, row-major, padded, or (when
/// `broadcast`) a stride-0 mode, over a CPU carrier with a random offset.
fn random_tensor(
    rng: &mut Rng,
    shape: (usize, usize),
    lo: f32,
    hi: f32,
    broadcast: bool,
) -> Result<Tensor> {
    let (r, c) = shape;
    let kinds = if broadcast { 4 } else { 3 };
    let strides = match rng.below(kinds) {
        0 => [1, r],
        1 => [c, 1],
        2 => [2, 2 * r + 1],
        _ => [1, 0],
    };
    let layout = Layout::from_flat(&[r, c], &strides)?;
    let offset = rng.below(5);
    let slots = offset + layout.cosize();
    let values: Vec<f32> = (0..slots).map(|_| rng.float(lo, hi)).collect();
    Tensor::new(Cpu::from_f32(&values, true)?, offset, layout)
}

/// Runs `name` on the CPU operands and on their Gpu uploads, and compares.
fn differential(gpu: &Gpu, name: &str, operands: &[Operand], tolerance: Tolerance) -> Result<()> {
    let expected = call(name, operands.to_vec(), &[])?.remove(0);
    let uploaded = upload_operands(gpu, operands)?;
    let result = call(name, uploaded, &[])?.remove(0);
    assert_eq!(
        result.carrier().class(),
        gpu.class(),
        "{name}: result class"
    );
    assert_eq!(result.layout(), expected.layout(), "{name}: result layout");
    assert_eq!(result.dtype(), expected.dtype(), "{name}: result dtype");
    assert_eq!(result.version(), 0);
    let what = format!(
        "{name} on {}",
        operands
            .iter()
            .map(|o| o.as_tensor().map_or("scalar".to_string(), |t| format!(
                "{}+{}",
                t.layout(),
                t.offset()
            )))
            .collect::<Vec<_>>()
            .join(", ")
    );
    check(
        &what,
        &numbers(&download(&result)?)?,
        &numbers(&expected)?,
        tolerance,
    );
    Ok(())
}

/// Shapes around the workgroup edge (255, 256, 257 elements and friends).
const SHAPES: [(usize, usize); 7] = [
    (1, 1),
    (3, 5),
    (255, 1),
    (16, 16),
    (257, 1),
    (19, 27),
    (64, 9),
];

const UNARY: [(&str, f32, f32, Tolerance); 8] = [
    ("neg", -8.0, 8.0, Tolerance::Exact),
    ("abs", -8.0, 8.0, Tolerance::Exact),
    ("relu", -8.0, 8.0, Tolerance::Exact),
    ("exp", -4.0, 4.0, Tolerance::Close(1e-6, 1e-5)),
    ("log", 0.1, 8.0, Tolerance::Close(1e-6, 1e-5)),
    ("sqrt", 0.0, 8.0, Tolerance::Close(1e-6, 1e-5)),
    ("tanh", -4.0, 4.0, Tolerance::Close(1e-6, 1e-5)),
    ("sigmoid", -6.0, 6.0, Tolerance::Close(1e-6, 1e-5)),
];

const BINARY: [(&str, Tolerance); 7] = [
    ("add", Tolerance::Exact),
    ("sub", Tolerance::Exact),
    ("mul", Tolerance::Exact),
    ("elementwise_mul", Tolerance::Exact),
    ("div", Tolerance::Close(0.0, 2.5e-7)),
    ("maximum", Tolerance::Exact),
    ("minimum", Tolerance::Exact),
];

#[test]
fn unary_kernels_match_the_cpu_on_random_layouts() -> Result<()> {
    let Some(gpu) = shared_gpu("unary_kernels_match_the_cpu_on_random_layouts") else {
        return Ok(());
    };
    let mut rng = Rng(0x5eed_0001);
    for (name, lo, hi, tolerance) in UNARY {
        for shape in SHAPES {
            let x = random_tensor(&mut rng, shape, lo, hi, false)?;
            differential(&gpu, name, &[x.into()], tolerance)?;
        }
    }
    Ok(())
}

#[test]
fn binary_kernels_match_the_cpu_on_random_layouts_broadcasts_and_scalars() -> Result<()> {
    let Some(gpu) = shared_gpu("binary_kernels_match_the_cpu") else {
        return Ok(());
    };
    let mut rng = Rng(0x5eed_0002);
    let mut with_scalars = Vec::new();
    for (name, tolerance) in BINARY {
        for shape in SHAPES {
            let a = random_tensor(&mut rng, shape, -8.0, 8.0, false)?;
            let b = random_tensor(&mut rng, shape, 0.5, 4.0, true)?;
            differential(&gpu, name, &[a.clone().into(), b.into()], tolerance)?;
            let row = random_tensor(&mut rng, (1, shape.1), 0.5, 4.0, false)?;
            differential(&gpu, name, &[a.clone().into(), row.into()], tolerance)?;
        }
        let a = random_tensor(&mut rng, (7, 3), -8.0, 8.0, false)?;
        let scalar = Operand::Scalar(Value::Float(1.5));
        // Only the operations whose schema takes a weak scalar (the CPU decides).
        if call(name, [a.clone().into(), scalar.clone()], &[]).is_ok() {
            with_scalars.push(name);
            differential(&gpu, name, &[a.clone().into(), scalar.clone()], tolerance)?;
        }
        let left = Operand::Scalar(Value::Float(-2.0));
        if call(name, [left.clone(), a.clone().into()], &[]).is_ok() {
            differential(&gpu, name, &[left, a.into()], tolerance)?;
        }
    }
    assert!(with_scalars.contains(&"mul"), "{with_scalars:?}");
    Ok(())
}

#[test]
fn extrema_and_relu_keep_nan_and_signed_zeros_like_the_cpu() -> Result<()> {
    let Some(gpu) = shared_gpu("extrema_and_relu_keep_nan_and_signed_zeros") else {
        return Ok(());
    };
    let xs = [
        f32::NAN,
        0.0,
        -0.0,
        1.0,
        -0.0,
        f32::NAN,
        f32::INFINITY,
        -1.0,
    ];
    let ys = [
        1.0,
        -0.0,
        0.0,
        f32::NAN,
        -0.0,
        f32::NAN,
        2.0,
        f32::NEG_INFINITY,
    ];
    let x = Tensor::compact(Cpu::from_f32(&xs, true)?, Shape::new(8)?)?;
    let y = Tensor::compact(Cpu::from_f32(&ys, true)?, Shape::new(8)?)?;
    for name in ["maximum", "minimum"] {
        differential(
            &gpu,
            name,
            &[x.clone().into(), y.clone().into()],
            Tolerance::Exact,
        )?;
    }
    differential(&gpu, "relu", &[x.clone().into()], Tolerance::Exact)?;
    differential(&gpu, "abs", &[x.into()], Tolerance::Exact)?;
    Ok(())
}

#[test]
fn int32_kernels_match_the_cpu() -> Result<()> {
    let Some(gpu) = shared_gpu("int32_kernels_match_the_cpu") else {
        return Ok(());
    };
    let xs = [i32::MIN, -3, 0, 5, i32::MAX, 7, -7, 1];
    let ys = [0, 4, -1, 5, i32::MIN, 8, -9, 1];
    let x = Tensor::compact(Cpu::from_i32(&xs, true)?, Shape::new((4, 2))?)?;
    let y = Tensor::compact(Cpu::from_i32(&ys, true)?, Shape::new((4, 2))?)?;
    for name in ["maximum", "minimum"] {
        differential(
            &gpu,
            name,
            &[x.clone().into(), y.clone().into()],
            Tolerance::Exact,
        )?;
    }
    differential(&gpu, "relu", &[x.clone().into()], Tolerance::Exact)?;
    differential(&gpu, "reduce_max", &[x.clone().into()], Tolerance::Exact)?;
    let transposed = x.permute(&[1, 0])?;
    differential(&gpu, "reduce_max", &[transposed.into()], Tolerance::Exact)?;
    Ok(())
}

#[test]
fn reductions_match_the_cpu_on_random_layouts() -> Result<()> {
    let Some(gpu) = shared_gpu("reductions_match_the_cpu_on_random_layouts") else {
        return Ok(());
    };
    let mut rng = Rng(0x5eed_0003);
    for shape in SHAPES.into_iter().chain([(3, 300), (300, 3)]) {
        let x = random_tensor(&mut rng, shape, -4.0, 4.0, false)?;
        let bound = 1e-5 * shape.1 as f64 * 4.0 + 1e-6;
        differential(
            &gpu,
            "reduce_sum",
            &[x.clone().into()],
            Tolerance::Close(bound, 0.0),
        )?;
        differential(&gpu, "reduce_max", &[x.into()], Tolerance::Exact)?;
    }
    Ok(())
}

#[test]
fn matmul_matches_the_cpu_on_random_layouts() -> Result<()> {
    let Some(gpu) = shared_gpu("matmul_matches_the_cpu_on_random_layouts") else {
        return Ok(());
    };
    let mut rng = Rng(0x5eed_0004);
    for (n, m, k) in [
        (1, 1, 1),
        (3, 4, 5),
        (16, 16, 16),
        (17, 15, 33),
        (256, 1, 3),
        (1, 257, 2),
    ] {
        let lhs = random_tensor(&mut rng, (n, k), -2.0, 2.0, false)?;
        let rhs = random_tensor(&mut rng, (m, k), -2.0, 2.0, false)?;
        let bound = 1e-5 * k as f64 * 4.0 + 1e-6;
        differential(
            &gpu,
            "matmul",
            &[lhs.into(), rhs.into()],
            Tolerance::Close(bound, 0.0),
        )?;
    }
    Ok(())
}

#[test]
fn a_dispatch_beyond_65535_workgroups_uses_the_second_grid_dimension() -> Result<()> {
    let Some(gpu) = shared_gpu("a_dispatch_beyond_65535_workgroups") else {
        return Ok(());
    };
    let n = 65535 * 256 + 300;
    let xs: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
    let x = gpu.from_f32(&xs, Shape::new(n)?)?;
    let y = call("add", [x.clone().into(), x.into()], &[])?.remove(0);
    let back = download(&y)?;
    let values = strideweave::carriers::extension::read_f32s(back.carrier(), 0, n)?;
    for i in [0, 255, 256, 65535 * 256 - 1, 65535 * 256, n - 1] {
        assert_eq!(values[i], 2.0 * (i % 1000) as f32, "element {i}");
    }
    assert!(values
        .iter()
        .enumerate()
        .all(|(i, v)| *v == 2.0 * (i % 1000) as f32));
    Ok(())
}

#[test]
fn compact_pipelines_serve_every_shape_and_strided_ones_compile_once_per_layout() -> Result<()> {
    let Some(gpu) = own_gpu("compact_pipelines_serve_every_shape") else {
        return Ok(());
    };
    let a = gpu.from_f32(&[1.0; 6], Shape::new((2, 3))?)?;
    let b = gpu.from_f32(&[2.0; 10], Shape::new(10)?)?;
    let (compiled, _) = gpu.device().pipeline_counts();
    call("add", [a.clone().into(), a.clone().into()], &[])?;
    call("add", [b.clone().into(), b.clone().into()], &[])?;
    let (after, reused) = gpu.device().pipeline_counts();
    assert_eq!(
        after - compiled,
        1,
        "one compact add pipeline for both shapes"
    );
    assert_eq!(reused, 1);
    assert_eq!(gpu.device().pipeline_keys(), ["ew|add|f32|x1u|x1u|rx1u"]);

    let t = a.permute(&[1, 0])?;
    let first = call("add", [t.clone().into(), t.clone().into()], &[])?.remove(0);
    let second = call("add", [t.clone().into(), t.into()], &[])?.remove(0);
    let (strided, reused) = gpu.device().pipeline_counts();
    assert_eq!(
        strided - after,
        1,
        "the strided add compiled once for its layout"
    );
    assert_eq!(reused, 2, "the second strided call reused it");
    assert!(gpu
        .device()
        .pipeline_keys()
        .contains(&"ew|add|f32|3:2,2:1|3:2,2:1|rx1u".to_string()));
    assert_eq!(numbers(&first)?, numbers(&second)?);
    assert_eq!(numbers(&first)?, [2.0; 6]);
    Ok(())
}

#[test]
fn the_gpu_advertises_exactly_its_pattern_plans_and_refuses_others() -> Result<()> {
    let Some(gpu) = shared_gpu("the_gpu_advertises_exactly_its_pattern_plans") else {
        return Ok(());
    };
    let carrier = gpu.carrier(1, DType::FLOAT32)?;
    let names: Vec<String> = carrier
        .capabilities()
        .iter()
        .map(|c| c.operation().to_string())
        .collect();
    for name in [
        "add",
        "neg",
        "relu",
        "exp",
        "reduce_sum",
        "reduce_max",
        "matmul",
    ] {
        assert!(names.iter().any(|n| n == name), "{name} in {names:?}");
    }
    // A product of mixed dtypes is a Float32 plan the product shaders convert for
    // (tests/select.rs has the CPU comparisons); an unadvertised plan is refused in
    // tests/conformance.rs (`gpu_unadvertised_plans_are_refused`).
    let ints = gpu.from_i32(&[1, 2], Shape::new((1, 2))?)?;
    let floats = gpu.from_f32(&[1.0, 2.5], Shape::new((1, 2))?)?;
    let product = call("matmul", [ints.into(), floats.into()], &[])?.remove(0);
    assert_eq!(product.dtype(), DType::FLOAT32);
    assert_eq!(numbers(&product)?, [6.0]);
    Ok(())
}

#[test]
fn checked_int32_arithmetic_matches_the_cpu_and_an_overflow_publishes_nothing() -> Result<()> {
    let Some(gpu) = shared_gpu("checked_int32_arithmetic") else {
        return Ok(());
    };
    let xs = [3, -4, 0, 46340, -46341, 7, i32::MAX - 5, i32::MIN + 5];
    let ys = [5, 9, -1, 46340, 46340, -7, 5, -5];
    let x = Tensor::compact(Cpu::from_i32(&xs, true)?, Shape::new((4, 2))?)?;
    let y = Tensor::compact(Cpu::from_i32(&ys, true)?, Shape::new((4, 2))?)?;
    let products = [
        Tensor::compact(
            Cpu::from_i32(&[3, -4, 0, 46340, -46341, 7, -1, 1], true)?,
            Shape::new((4, 2))?,
        )?,
        Tensor::compact(
            Cpu::from_i32(&[5, 9, -1, 46340, 46340, -7, i32::MIN + 1, i32::MIN], true)?,
            Shape::new((4, 2))?,
        )?,
    ];
    for name in ["add", "sub", "mul", "elementwise_mul"] {
        let (x, y) = if name.contains("mul") {
            (&products[0], &products[1])
        } else {
            (&x, &y)
        };
        differential(
            &gpu,
            name,
            &[x.clone().into(), y.clone().into()],
            Tolerance::Exact,
        )?;
        differential(
            &gpu,
            name,
            &[x.permute(&[1, 0])?.into(), y.permute(&[1, 0])?.into()],
            Tolerance::Exact,
        )?;
    }
    for name in ["neg", "abs"] {
        differential(&gpu, name, &[x.clone().into()], Tolerance::Exact)?;
    }
    differential(
        &gpu,
        "mul",
        &[products[0].clone().into(), Value::Int(3).into()],
        Tolerance::Exact,
    )?;
    let cases: [(&str, &[i32], &[i32]); 6] = [
        ("add", &[1, i32::MAX], &[0, 1]),
        ("sub", &[0, i32::MIN], &[0, 1]),
        ("mul", &[2, 65536], &[3, 65536]),
        ("mul", &[i32::MIN, 1], &[-1, 1]),
        ("neg", &[5, i32::MIN], &[0, 0]),
        ("abs", &[i32::MIN, 1], &[0, 0]),
    ];
    for (name, a, b) in cases {
        let a = gpu.from_i32(a, Shape::new(2)?)?;
        let b = gpu.from_i32(b, Shape::new(2)?)?;
        let operands: Vec<Operand> = if matches!(name, "neg" | "abs") {
            vec![a.clone().into()]
        } else {
            vec![a.clone().into(), b.into()]
        };
        let error = call(name, operands, &[]).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Overflow, "{name}: {error}");
        assert!(
            error
                .to_string()
                .contains(&format!("'{name}' overflows Int32")),
            "{error}"
        );
        assert_eq!(a.version(), 0);
    }
    Ok(())
}
