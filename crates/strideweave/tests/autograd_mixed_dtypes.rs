//! Gradients of built-ins whose operands mix Float32 with Int32: the Float32 operand gets its
//! gradient and the Int32 operand, which is not differentiable, gets none (design: a rule
//! returns one entry per differentiable operand).

use strideweave::carriers::Cpu;
use strideweave::operation::call;
use strideweave::{Result, Shape, Tensor, Value};

fn floats(xs: &[f32]) -> Result<Tensor> {
    let tensor = Tensor::compact(Cpu::from_f32(xs, true)?, Shape::new(xs.len())?)?;
    tensor.set_requires_grad(true)?;
    Ok(tensor)
}

fn ints(xs: &[i32]) -> Result<Tensor> {
    Tensor::compact(Cpu::from_i32(xs, true)?, Shape::new(xs.len())?)
}

fn grad_values(t: &Tensor) -> Vec<Value> {
    t.grad().expect("a gradient").to_values().expect("readable")
}

#[test]
fn add_of_float32_and_int32_gives_the_float32_operand_its_gradient() -> Result<()> {
    let x = floats(&[1.0, 2.0, 3.0])?;
    let n = ints(&[4, 5, 6])?;
    let y = call("add", [x.clone().into(), n.clone().into()], &[])?.remove(0);
    let g = Tensor::compact(Cpu::from_f32(&[1.0, -2.0, 0.5], true)?, Shape::new(3)?)?;
    y.backward(Some(&g), false)?;
    assert_eq!(grad_values(&x), [1.0, -2.0, 0.5].map(Value::Float));
    assert!(n.grad().is_none());
    Ok(())
}

#[test]
fn elementwise_mul_of_int32_and_float32_gives_the_float32_operand_its_gradient() -> Result<()> {
    let n = ints(&[2, -3, 4])?;
    let x = floats(&[1.0, 2.0, 3.0])?;
    let y = call("elementwise_mul", [n.clone().into(), x.clone().into()], &[])?.remove(0);
    let g = Tensor::compact(Cpu::from_f32(&[1.0, 1.0, 0.5], true)?, Shape::new(3)?)?;
    y.backward(Some(&g), false)?;
    assert_eq!(grad_values(&x), [2.0, -3.0, 2.0].map(Value::Float));
    assert!(n.grad().is_none());
    Ok(())
}
