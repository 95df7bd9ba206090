//! The smallest carrier shapes shipped as examples — the null carrier (storage, no routes),
//! the storage-only carrier with a route to the CPU, and the README's one-kernel carrier —
//! each keep every promise of the suite that applies to what they advertise, and the
//! promises that do not apply say so.

#[path = "../examples/null_carrier.rs"]
mod null_carrier;
#[path = "../examples/one_kernel_carrier.rs"]
mod one_kernel_carrier;
#[path = "../examples/storage_only_carrier.rs"]
mod storage_only_carrier;

use strideweave_conformance::{carrier_conformance, run, Promise, Verdict};

carrier_conformance!(
    null,
    null_carrier::null_factory().expect("the Null class registers")
);
carrier_conformance!(
    one_kernel,
    one_kernel_carrier::slots_factory().expect("the Slots class registers")
);
carrier_conformance!(
    storage_only,
    storage_only_carrier::shelf_factory().expect("the Shelf class registers")
);

fn verdicts(report: &strideweave_conformance::Report) -> Vec<(Promise, &'static str)> {
    report
        .outcomes
        .iter()
        .map(|o| {
            let verdict = match o.verdict {
                Verdict::Kept => "kept",
                Verdict::Broken(_) => "broken",
                Verdict::NotApplicable(_) => "not applicable",
            };
            (o.promise, verdict)
        })
        .collect()
}

#[test]
fn the_null_carrier_keeps_its_storage_promises_and_advertises_nothing() {
    let report = run(&null_carrier::null_factory().unwrap());
    assert_eq!(
        verdicts(&report),
        [
            (Promise::StorageReads, "kept"),
            (Promise::StorageWrites, "kept"),
            (Promise::StorageRelease, "kept"),
            (Promise::StorageFactories, "kept"),
            (Promise::DtypeAnswers, "kept"),
            (Promise::AdvertisedCapabilities, "not applicable"),
            (Promise::CustomOperations, "not applicable"),
            (Promise::UnadvertisedPlans, "kept"),
            (Promise::FailureAtomicity, "not applicable"),
            (Promise::CpuMoves, "not applicable"),
            (Promise::Gradients, "not applicable"),
            (Promise::Scatter, "kept"),
            (Promise::AsyncMoves, "not applicable"),
            (Promise::KernelPacks, "not applicable"),
            (Promise::Facets, "kept"),
        ]
    );
    match &report.outcome(Promise::KernelPacks).unwrap().verdict {
        Verdict::NotApplicable(why) => assert!(
            why.starts_with("Null is storage-only: its definition has no kernel provider"),
            "{why}"
        ),
        other => panic!("{other:?}"),
    }
    let refused = &report.outcome(Promise::UnadvertisedPlans).unwrap().notes[0];
    assert!(
        refused.starts_with("76 unadvertised plans refused"),
        "{refused}"
    );
}

#[test]
fn the_storage_only_carrier_moves_to_the_cpu_and_advertises_nothing() {
    let report = run(&storage_only_carrier::shelf_factory().unwrap());
    let kept: Vec<Promise> = verdicts(&report)
        .into_iter()
        .filter(|(_, v)| *v == "kept")
        .map(|(p, _)| p)
        .collect();
    assert_eq!(
        kept,
        [
            Promise::StorageReads,
            Promise::StorageWrites,
            Promise::StorageRelease,
            Promise::StorageFactories,
            Promise::DtypeAnswers,
            Promise::UnadvertisedPlans,
            Promise::CpuMoves,
            Promise::Scatter,
            Promise::AsyncMoves,
            Promise::Facets,
        ],
        "{report}"
    );
    let moves = &report.outcome(Promise::CpuMoves).unwrap().notes[0];
    assert_eq!(moves, "4 moves took a route");
}

#[test]
fn the_one_kernel_carrier_runs_neg_and_its_gradient() {
    let report = run(&one_kernel_carrier::slots_factory().unwrap());
    assert!(report.is_conformant(), "{report}");
    let ran = &report
        .outcome(Promise::AdvertisedCapabilities)
        .unwrap()
        .notes;
    assert_eq!(ran.len(), 1);
    assert!(
        ran[0].starts_with("ran neg with operands (tensor Float32->Float32)"),
        "{ran:?}"
    );
    assert!(ran[0].ends_with("on 9 geometries"), "{ran:?}");
    assert_eq!(
        report.outcome(Promise::Gradients).unwrap().verdict,
        Verdict::Kept
    );
    // Factory::defined defines a fresh class for the packs.
    assert_eq!(
        report.outcome(Promise::KernelPacks).unwrap().verdict,
        Verdict::Kept
    );
}
