//! The carrier author's conformance suite (`strideweave-conformance`) over the GpuHost
//! staging class: a storage-only, definition-backed class, so its storage, dtype and factory
//! promises apply, it advertises no capability, and its moves to the CPU go along its own
//! route GpuHost → CPU (a move from the CPU has no route, reported not applicable). Prints
//! `SKIPPED:` with the reason where the machine has no adapter.

mod common;

use strideweave::{Carrier, DType, Value};
use strideweave_conformance::{assert_promise, check, Factory, Promise, Verdict};

/// Every promise of the suite over GpuHost carriers holding the given values, written slot by
/// slot through the class's storage provider.
#[test]
fn gpuhost_keeps_every_promise_of_the_conformance_suite() {
    let Some(gpu) = common::shared_gpu("gpuhost_keeps_every_promise_of_the_conformance_suite")
    else {
        return;
    };
    let host = gpu.host();
    let factory = Factory::new(
        "GpuHost",
        move |dtype: DType, values: &[Value]| -> strideweave::Result<Carrier> {
            let carrier = host.carrier(values.len(), dtype)?;
            for (i, value) in values.iter().enumerate() {
                carrier.set(i, *value)?;
            }
            Ok(carrier)
        },
    );
    for promise in Promise::ALL {
        assert_promise(&factory, promise);
    }
    // The moves to the CPU ran along GpuHost → CPU rather than being reported not applicable.
    let moves = check(&factory, Promise::CpuMoves);
    assert_eq!(moves.verdict, Verdict::Kept, "{:?}", moves.notes);
}
