//! The conformance suite's failure-atomicity promise over the Gpu carrier and the GpuHost
//! staging class, with failures injected inside the Gpu's own work: `GpuDevice::inject_fault`
//! is bridged to the suite's `FaultHook` (out of memory at allocation, wgpu validation errors
//! at compilation, submission and mapping), so every device call the suite's actions make —
//! writes, factories, moves to the CPU and to the Gpu, every advertised kernel — is failed at
//! its first pass through each point. Each test runs on a device of its own, so the faults
//! reach no other test; each prints `SKIPPED:` where the machine has no adapter.

mod common;

use std::sync::Arc;

use parking_lot::Mutex;
use strideweave::{Carrier, Error, Result, Value};
use strideweave_conformance::{check, CarrierFactory, Factory, FaultHook, Promise, Verdict};
use strideweave_wgpu::{Fault, FaultPoint, Gpu, GpuDevice};

/// The Gpu device's injected faults as the suite's fault points.
///
/// The device fails "the next call" at a point, so only the first pass can be armed
/// (`arm(point, skip > 0)` answers false and the suite stops there); whether the fault fired
/// is whether it is still pending when the action is over (`GpuDevice::clear_fault`).
struct DeviceFaults {
    device: Arc<GpuDevice>,
    armed: Mutex<Option<FaultPoint>>,
}

const POINTS: [(&str, FaultPoint, Fault); 4] = [
    ("allocate", FaultPoint::Allocate, Fault::OutOfMemory),
    ("compile", FaultPoint::Compile, Fault::Validation),
    ("submit", FaultPoint::Submit, Fault::Validation),
    ("map", FaultPoint::Map, Fault::Validation),
];

impl FaultHook for DeviceFaults {
    fn points(&self) -> Vec<&'static str> {
        POINTS.iter().map(|(name, _, _)| *name).collect()
    }

    fn arm(&self, point: &str, skip: u64) -> Result<bool> {
        let Some((_, point, fault)) = POINTS.iter().find(|(name, _, _)| *name == point) else {
            return Err(Error::Value(format!(
                "the Gpu has no fault point '{point}'"
            )));
        };
        if skip > 0 {
            return Ok(false);
        }
        self.device.inject_fault(*point, *fault);
        *self.armed.lock() = Some(*point);
        Ok(true)
    }

    fn disarm(&self) -> bool {
        match self.armed.lock().take() {
            Some(point) => !self.device.clear_fault(point),
            None => false,
        }
    }
}

fn faults(gpu: &Gpu) -> DeviceFaults {
    DeviceFaults {
        device: Arc::clone(gpu.device()),
        armed: Mutex::new(None),
    }
}

/// Writes `values` slot by slot into `carrier`.
fn filled(carrier: Carrier, values: &[Value]) -> Result<Carrier> {
    for (i, value) in values.iter().enumerate() {
        carrier.set(i, *value)?;
    }
    Ok(carrier)
}

/// The number of injected failures the outcome's notes report.
fn injected(notes: &[String]) -> u64 {
    notes
        .iter()
        .find_map(|n| {
            n.split(": ")
                .nth(1)?
                .strip_suffix(" injected failures")?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no injected failures in {notes:?}"))
}

#[test]
fn gpu_failures_injected_at_every_device_point_publish_nothing() {
    let Some(gpu) = common::own_gpu("gpu_failures_injected_at_every_device_point_publish_nothing")
    else {
        return;
    };
    let hook = faults(&gpu);
    let factory = Factory::new("Gpu (device faults)", move |dtype, values| {
        filled(gpu.carrier(values.len(), dtype)?, values)
    })
    .with_faults(hook);
    let outcome = check(&factory, Promise::FailureAtomicity);
    for note in &outcome.notes {
        println!("{}: {note}", factory.name());
    }
    assert_eq!(outcome.verdict, Verdict::Kept, "{outcome:?}");
    let fired = injected(&outcome.notes);
    // Every action reaches at least one device point: the write and the factory submit, the
    // move maps, every kernel allocates its result and submits.
    assert!(fired >= 4, "{:?}", outcome.notes);
    assert!(
        outcome
            .notes
            .iter()
            .any(|n| n.starts_with("4 fault points armed around")),
        "{:?}",
        outcome.notes
    );
}

#[test]
fn gpuhost_failures_injected_into_its_upload_route_publish_nothing() {
    let Some(gpu) =
        common::own_gpu("gpuhost_failures_injected_into_its_upload_route_publish_nothing")
    else {
        return;
    };
    let hook = faults(&gpu);
    let host = gpu.host();
    let factory = Factory::new("GpuHost (device faults)", move |dtype, values| {
        filled(host.carrier(values.len(), dtype)?, values)
    })
    .with_destination("the Gpu", move |dtype, slots| gpu.carrier(slots, dtype))
    .with_faults(hook);
    let outcome = check(&factory, Promise::FailureAtomicity);
    for note in &outcome.notes {
        println!("{}: {note}", factory.name());
    }
    assert_eq!(outcome.verdict, Verdict::Kept, "{outcome:?}");
    // The host class's own storage is host memory: only the upload to the Gpu reaches the
    // device (allocating the destination's buffer, submitting the copy).
    let fired = injected(&outcome.notes);
    assert!(fired >= 1, "{:?}", outcome.notes);
    let moves = check(&factory, Promise::CpuMoves);
    assert_eq!(moves.verdict, Verdict::Kept, "{moves:?}");
    assert!(
        moves
            .notes
            .iter()
            .any(|n| n == "moves to the Gpu carried their values"),
        "{:?}",
        moves.notes
    );
}
