//! Kernels completing while other threads poll the same device: wgpu runs a submission's
//! callbacks on whichever thread polls, so a waiter can see its submission retired before the
//! callback that raises its flag has run on another thread. Every call must still complete.

mod common;

use std::thread;

use strideweave::operation::call;
use strideweave::{Result, Shape};

#[test]
fn kernels_on_many_threads_all_complete() -> Result<()> {
    let Some(gpu) = common::shared_gpu("kernels_on_many_threads_all_complete") else {
        return Ok(());
    };
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let gpu = gpu.clone();
            thread::spawn(move || -> Result<()> {
                for i in 0..40 {
                    let x = gpu.from_f32(&[t as f32, i as f32, 2.0], Shape::new(3)?)?;
                    let y = gpu.from_f32(&[3.0, 0.5, -1.0], Shape::new(3)?)?;
                    let z = call("elementwise_mul", [x.into(), y.into()], &[])?.remove(0);
                    assert_eq!(
                        common::numbers(&common::download(&z)?)?,
                        [t as f64 * 3.0, i as f64 * 0.5, -2.0]
                    );
                }
                Ok(())
            })
        })
        .collect();
    for handle in threads {
        handle.join().expect("a thread panicked")?;
    }
    Ok(())
}
