//! The core's shipped `Metal` class over Gpu carriers (`strideweave_wgpu::metal`).
//!
//! No machine these tests run on has an Apple GPU, so the mechanism is checked over a Gpu
//! carrier on whatever adapter exists (Mesa's llvmpipe in CI): `Metal::over` stores in the
//! device carrier, lowers operations to the Gpu class's kernels and wraps the results. The
//! Metal adapter itself is checked where there is one, and its absence everywhere else.

mod common;

use common::{numbers, shared_gpu};
use strideweave::carriers::{Cpu, Metal};
use strideweave::movement::move_to;
use strideweave::{ops, CarrierClass, DType, ErrorKind, Result, Shape, Tensor, Value};
use strideweave_wgpu::metal::{metal_carrier, metal_gpu};

/// Without a Metal adapter, a Metal carrier is a NotImplemented error naming what is missing;
/// with one, it stores and computes on it.
#[test]
fn metal_carriers_need_a_metal_adapter() -> Result<()> {
    match metal_gpu() {
        Err(error) => {
            assert_eq!(error.kind(), ErrorKind::NotImplemented, "{error}");
            let message = error.to_string();
            assert!(
                message.contains(
                    "Metal needs an Apple GPU with the Metal API; none was found (wgpu found \
                     no Metal adapter: "
                ),
                "{message}"
            );
            let refused = metal_carrier(4, DType::FLOAT32, true).unwrap_err();
            assert_eq!(refused.to_string(), message);
            println!(
                "SKIPPED: metal_carriers_need_a_metal_adapter (on a Metal adapter): {message}"
            );
        }
        Ok(gpu) => {
            assert_eq!(gpu.device().adapter().backend, "Metal");
            let carrier = metal_carrier(4, DType::FLOAT32, true)?;
            assert_eq!(carrier.class(), CarrierClass::of::<Metal>());
            for (i, v) in [1.0, -2.0, 3.5, 4.0].into_iter().enumerate() {
                carrier.set(i, Value::Float(v))?;
            }
            let x = Tensor::compact(carrier, Shape::new(4)?)?;
            let y = ops::add(&x, &x)?;
            assert_eq!(y.carrier().class(), CarrierClass::of::<Metal>());
            assert_eq!(numbers(&y)?, vec![2.0, -4.0, 7.0, 8.0]);
        }
    }
    Ok(())
}

/// `Metal::over` a Gpu carrier (here on a non-Metal adapter): the slots are the device
/// carrier's, which the Metal carrier owns; operations run on the Gpu class's kernels and
/// give Metal results; moves to and from the CPU go along the elementwise default route.
#[test]
fn metal_over_a_gpu_carrier_stores_and_computes_on_the_device() -> Result<()> {
    let Some(gpu) = shared_gpu("metal_over_a_gpu_carrier_stores_and_computes_on_the_device") else {
        return Ok(());
    };
    let metal = CarrierClass::of::<Metal>();
    let values = [1.0f32, -2.0, 3.0, -4.0, 5.0, 6.5];
    let device = gpu.from_f32(&values, Shape::new(6)?)?.carrier().clone();
    let carrier = Metal::over(&device)?;
    assert_eq!(carrier.class(), metal);
    assert!(device.is_owned() && !device.is_mutable());
    assert_eq!((carrier.size(), carrier.dtype()), (6, DType::FLOAT32));
    assert!(Metal::device(&carrier)?.same_as(&device));
    assert_eq!(carrier.capabilities(), device.capabilities());
    assert!(!carrier.capabilities().is_empty());

    // Storage forwards to the device carrier; aliases of it cannot write.
    carrier.set(1, Value::Float(-2.5))?;
    assert_eq!((carrier.version(), device.get(1)?), (1, Value::Float(-2.5)));
    assert_eq!(
        device.set(0, Value::Float(9.0)).unwrap_err().kind(),
        ErrorKind::Runtime
    );
    assert_eq!(carrier.get(0)?, Value::Float(1.0));

    // Operations run on the Gpu class and give Metal carriers over fresh Gpu carriers.
    let x = Tensor::compact(carrier.clone(), Shape::new((2, 3))?)?;
    let sum = ops::add(&x, &x)?;
    assert_eq!(sum.carrier().class(), metal);
    assert_eq!(Metal::device(sum.carrier())?.class(), gpu.class());
    assert_eq!(numbers(&sum)?, vec![2.0, -5.0, 6.0, -8.0, 10.0, 13.0]);
    let negated = ops::neg(&x)?;
    assert_eq!(numbers(&negated)?, vec![-1.0, 2.5, -3.0, 4.0, -5.0, -6.5]);
    let rows = ops::reduce_sum(&x)?;
    assert_eq!(rows.carrier().class(), metal);
    assert_eq!(numbers(&rows)?, vec![1.0 + 3.0 + 5.0, -2.5 - 4.0 + 6.5]);
    let product = ops::matmul(&x, &x)?;
    assert_eq!(product.carrier().class(), metal);
    let dense = Tensor::compact(
        Cpu::from_f32(&[1.0, -2.5, 3.0, -4.0, 5.0, 6.5], true)?,
        Shape::new((2, 3))?,
    )?;
    let expected = numbers(&ops::matmul(&dense, &dense)?)?;
    assert_eq!(numbers(&product)?, expected);

    // A CPU operand is another class: refused before anything runs.
    let error = ops::add(&x, &dense).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Type, "{error}");

    // Moves (which release their source): Metal → CPU and CPU → Metal, both definition-free,
    // go along the elementwise default route.
    let sums = numbers(&sum)?;
    let back = move_to(&sum, &Cpu::carrier(6, DType::FLOAT32, true, false)?)?;
    assert_eq!(numbers(&back)?, sums);
    assert!(sum.carrier().is_released());
    let target = Metal::over(&gpu.carrier(6, DType::FLOAT32)?)?;
    let dense_values = numbers(&dense)?;
    let there = move_to(&dense, &target)?;
    assert!(there.carrier().same_as(&target));
    assert_eq!(numbers(&there)?, dense_values);
    let on_device = Tensor::compact(Metal::device(&target)?, Shape::new(6)?)?;
    assert_eq!(numbers(&on_device)?, dense_values);

    // Releasing the Metal carrier releases the device carrier.
    carrier.release()?;
    assert!(device.is_released() && carrier.is_released());
    Ok(())
}

/// The device carrier must be a live, unowned carrier of an independent definition-backed
/// class storing Float32, Int32 or Bool; a refusal leaves it as it was.
#[test]
fn metal_refuses_device_carriers_it_cannot_own() -> Result<()> {
    let Some(gpu) = shared_gpu("metal_refuses_device_carriers_it_cannot_own") else {
        return Ok(());
    };
    let device = gpu.carrier(2, DType::INT32)?;
    let first = Metal::over(&device)?;
    let error = Metal::over(&device).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Runtime, "{error}");
    assert_eq!(first.dtype(), DType::INT32);
    let error = Metal::over(&first).unwrap_err();
    assert_eq!(
        error.to_string(),
        "type error: a Metal carrier cannot keep its slots in another Metal carrier"
    );
    let released = gpu.carrier(2, DType::FLOAT32)?;
    released.release()?;
    assert_eq!(
        Metal::over(&released).unwrap_err().kind(),
        ErrorKind::Runtime
    );
    Ok(())
}
