#![allow(missing_docs, dead_code)]
#[path = "device_carrier/mod.rs"]
mod device_carrier;
use strideweave::carriers::Cpu;
use strideweave::{ops, Shape, Tensor};
fn main() {
    let case = std::env::args().nth(1).unwrap();
    let n: usize = std::env::args().nth(2).unwrap().parse().unwrap();
    let a = Tensor::compact(
        Cpu::from_f32(&[1.0, 2.0, 3.0, 4.0], true).unwrap(),
        Shape::new(4).unwrap(),
    )
    .unwrap();
    let b = Tensor::compact(
        Cpu::from_f32(&[1.0, 2.0, 3.0, 4.0], true).unwrap(),
        Shape::new(4).unwrap(),
    )
    .unwrap();
    let m = Tensor::compact(
        Cpu::from_f32(&[1.0; 16], true).unwrap(),
        Shape::new((4, 4)).unwrap(),
    )
    .unwrap();
    let r14 = Tensor::compact(
        Cpu::from_f32(&[1.0, 2.0, 3.0, 4.0], true).unwrap(),
        Shape::new((1, 4)).unwrap(),
    )
    .unwrap();
    let ai = Tensor::compact(
        Cpu::from_i32(&[1, 2, 3, 4], true).unwrap(),
        Shape::new(4).unwrap(),
    )
    .unwrap();
    let ext = device_carrier::DeviceExtension::register().unwrap();
    let d = device_carrier::device_tensor(ext.device, &[1.0, 2.0, 3.0, 4.0]).unwrap();
    let mut keep = 0usize;
    for _ in 0..n {
        let r = match case.as_str() {
            "add" => ops::add(&a, &b).unwrap(),
            "call" => {
                strideweave::operation::call("add", [a.clone().into(), b.clone().into()], &[])
                    .unwrap()
                    .pop()
                    .unwrap()
            }
            "neg" => ops::neg(&a).unwrap(),
            "addi" => ops::add(&ai, &ai).unwrap(),
            "sum14" => ops::reduce_sum(&r14).unwrap(),
            "sum" => ops::reduce_sum(&m).unwrap(),
            "dev" => ops::neg(&d).unwrap(),
            "matmul" => ops::matmul(&m, &m).unwrap(),
            _ => panic!(),
        };
        keep += r.carrier().size();
    }
    println!("{keep}");
}
