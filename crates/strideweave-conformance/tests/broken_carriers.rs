//! The suite's own tests: a correct definition-backed carrier keeps every promise, and a
//! carrier broken in one way breaks exactly the promise that names it, with a message that
//! says what happened. The suite has to be able to fail.

mod common;

use common::one_kernel_carrier::Slots;
use common::{broken_message, broken_promises, ring, ring_running, Bag, BagFlaw, Flaw};
use strideweave::carrier::{Carrier, CarrierClass, ClassKind};
use strideweave::carriers::extension::{
    PreparedTransfer, Submitted, TransferPreparation, TransferProvider,
};
use strideweave::{
    register_carrier_definition, CarrierDefinition, StorageProvider, TransferRoute, Value,
};
use strideweave_conformance::{carrier_conformance, check, run, Factory, Promise, Verdict};

carrier_conformance!(correct_ring, ring(Flaw::None));

#[test]
fn the_correct_ring_injects_failures_at_every_point_and_keeps_every_promise() {
    let report = run(&ring(Flaw::None));
    assert!(report.is_conformant(), "{report}");
    let atomicity = report.outcome(Promise::FailureAtomicity).unwrap();
    assert_eq!(atomicity.verdict, Verdict::Kept);
    let fired: u64 = atomicity.notes[0]
        .split(": ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(fired >= 6, "{}", atomicity.notes[0]);
    let gradients = report.outcome(Promise::Gradients).unwrap();
    assert_eq!(gradients.verdict, Verdict::Kept);
    assert!(
        gradients
            .notes
            .iter()
            .any(|n| n.starts_with("gradient of neg")),
        "{gradients:?}"
    );
}

#[test]
fn an_advertised_kernel_that_fails_breaks_the_capability_promise() {
    let factory = ring(Flaw::FailingKernel);
    let message = broken_message(&factory, Promise::AdvertisedCapabilities);
    assert!(
        message.contains("broken promise 'advertised capabilities execute'"),
        "{message}"
    );
    assert!(message.contains("Ring (FailingKernel): neg(Float32 1:1@0), advertised as neg with operands (tensor Float32->Float32)"), "{message}");
    assert!(
        message.contains("the Ring's neg is not written yet"),
        "{message}"
    );
    assert!(
        message.contains("how to read this: a kernel behind an advertised plan failed"),
        "{message}"
    );
    assert_eq!(
        broken_promises(&factory),
        [
            Promise::AdvertisedCapabilities,
            Promise::FailureAtomicity,
            Promise::Gradients
        ]
    );
}

#[test]
fn an_advertised_kernel_with_wrong_values_breaks_the_capability_promise() {
    let factory = ring(Flaw::WrongKernel);
    let message = broken_message(&factory, Promise::AdvertisedCapabilities);
    assert!(
        message.contains("neg(Float32 1:1@0) result 0 element 0 (colexicographic) is"),
        "{message}"
    );
    assert!(message.contains("the Generic reference"), "{message}");
    // The gradient check differentiates the carrier's own forward: a kernel that is wrong
    // the same way in the backward (neg's rule is neg) is consistent there, and only the
    // comparison with the reference catches it.
    assert_eq!(check(&factory, Promise::Gradients).verdict, Verdict::Kept);
}

#[test]
fn a_dtype_answer_by_bit_width_breaks_the_identity_promise() {
    let factory = ring(Flaw::DtypeByBits);
    let message = broken_message(&factory, Promise::DtypeAnswers);
    assert!(
        message.contains("broken promise 'dtype answers by identity'"),
        "{message}"
    );
    assert!(
        message.contains("a freshly registered 32-bit floating dtype"),
        "{message}"
    );
    assert!(message.contains("= true"), "{message}");
    assert_eq!(
        check(&factory, Promise::StorageWrites).verdict,
        Verdict::Kept
    );
}

#[test]
fn a_dtype_answer_that_depends_on_the_state_breaks_the_identity_promise() {
    let factory = ring(Flaw::DtypeByState);
    let message = broken_message(&factory, Promise::DtypeAnswers);
    assert!(
        message.contains(
            "supports_storage_dtype(Float32) answered true before release and false after"
        ),
        "{message}"
    );
    assert!(message.contains("must not depend on release"), "{message}");
}

#[test]
fn a_write_that_lands_before_failing_breaks_the_atomicity_promise() {
    let factory = ring(Flaw::WriteLandsOnFailure);
    let message = broken_message(&factory, Promise::FailureAtomicity);
    assert!(message.contains("writing slot 1 of a carrier of Float32 with a fault injected at pass 1 through 'write' failed but changed state: operand carrier 0: slot 1 changed"), "{message}");
    assert!(
        message.contains("how to read this: after a failure injected at the named callback"),
        "{message}"
    );
    assert_eq!(broken_promises(&factory), [Promise::FailureAtomicity]);
}

#[test]
fn a_write_that_bumps_the_version_twice_breaks_the_version_promise() {
    let factory = Bag::factory("Mirror", BagFlaw::WritesTwice);
    let message = broken_message(&factory, Promise::StorageWrites);
    assert!(message.contains("broken promise 'storage writes and versions': Mirror: after 1 writes to a carrier of Float32 its version is 2, expected 1 (each write bumps exactly once)"), "{message}");
    assert!(
        message.contains("how to read this: a write either did not land"),
        "{message}"
    );
}

#[test]
fn a_read_that_answers_another_slot_breaks_the_read_promise() {
    let factory = Bag::factory("Bag (ReadsNextSlot)", BagFlaw::ReadsNextSlot);
    let message = broken_message(&factory, Promise::StorageReads);
    assert!(
        message.starts_with(
            "broken promise 'storage reads': Bag (ReadsNextSlot): a carrier of Float32 made \
             with 7 values reads"
        ),
        "{message}"
    );
    assert!(message.contains("at slot 0 where"), "{message}");
    assert!(
        message.contains("how to read this: the storage provider's physical_size or read"),
        "{message}"
    );
}

#[test]
fn factories_that_fail_on_a_released_prototype_break_the_release_promise() {
    let factory = Bag::factory(
        "Bag (FactoriesNeedLiveStorage)",
        BagFlaw::FactoriesNeedLiveStorage,
    );
    let message = broken_message(&factory, Promise::StorageRelease);
    assert!(
        message.starts_with(
            "broken promise 'storage release': Bag (FactoriesNeedLiveStorage): new_like of a \
             released prototype failed: runtime error: the Bag's factories read their \
             configuration from the prototype's storage, which release freed"
        ),
        "{message}"
    );
    assert_eq!(
        check(&factory, Promise::StorageFactories).verdict,
        Verdict::Kept
    );
}

#[test]
fn an_allocate_like_that_does_not_zero_breaks_the_factory_promise() {
    let factory = Bag::factory("Bag (AllocateKeepsValues)", BagFlaw::AllocateKeepsValues);
    let message = broken_message(&factory, Promise::StorageFactories);
    assert!(
        message.starts_with(
            "broken promise 'storage factories': Bag (AllocateKeepsValues): allocate_like"
        ),
        "{message}"
    );
    assert!(
        message.contains("how to read this: new_like/allocate_like copied the prototype's state"),
        "{message}"
    );
}

#[test]
fn a_kernel_that_allocates_before_declining_breaks_the_refusal_promise() {
    let factory = ring(Flaw::AllocatesThenDeclines);
    let message = broken_message(&factory, Promise::UnadvertisedPlans);
    assert!(
        message.contains("broken promise 'unadvertised plans are refused'"),
        "{message}"
    );
    assert!(
        message.contains("declining neg(Float32 7:2@1) at run time (its plan neg with operands (tensor Float32->Float32)"),
        "{message}"
    );
    assert!(
        message.contains("constructed 1 carrier first; a refusal must come before any allocation"),
        "{message}"
    );
    // The capability promise accepts the run-time decline of a gapped operand and says so.
    let advertised = check(&factory, Promise::AdvertisedCapabilities);
    assert_eq!(advertised.verdict, Verdict::Kept);
    assert!(
        advertised.notes[0].contains("declined at run time: neg(Float32 7:2@1)"),
        "{:?}",
        advertised.notes
    );
    assert_eq!(broken_promises(&factory), [Promise::UnadvertisedPlans]);
}

#[test]
fn the_correct_ring_declines_nothing_and_its_checked_add_overflows_atomically() {
    let factory = ring_running(Flaw::None, &["neg", "add"]);
    let report = run(&factory);
    assert!(report.is_conformant(), "{report}");
    let atomicity = report.outcome(Promise::FailureAtomicity).unwrap();
    assert!(
        atomicity.notes.iter().any(|n| n
            == "1 checked Int32 plans failed in the carrier's own kernel (overflow) and published nothing"),
        "{atomicity:?}"
    );
}

#[test]
fn an_int32_add_that_wraps_breaks_the_atomicity_promise() {
    let factory = ring_running(Flaw::WrappingAdd, &["neg", "add"]);
    let message = broken_message(&factory, Promise::FailureAtomicity);
    assert!(message.contains("Ring (WrappingAdd): add(Int32 (3,4):(1,3)@0, Int32 (3,4):(1,3)@0) on Int32 values whose last results leave the Int32 range returned a result (last element -2) instead of failing with Overflow"), "{message}");
    assert_eq!(broken_promises(&factory), [Promise::FailureAtomicity]);
}

#[test]
fn a_kernel_that_takes_a_broadcast_operand_for_a_scalar_breaks_the_capability_promise() {
    let factory = ring(Flaw::BroadcastAsScalar);
    let message = broken_message(&factory, Promise::AdvertisedCapabilities);
    assert!(
        message.contains(
            "Ring (BroadcastAsScalar): neg(Float32 (3,4):(1,0)@0) result 0 element 1 \
             (colexicographic) is"
        ),
        "{message}"
    );
    assert!(message.contains("the Generic reference"), "{message}");
    // Every dense, gapped, offset and permuted geometry still matches: only the broadcast
    // operands find the fault.
    assert_eq!(broken_promises(&factory), [Promise::AdvertisedCapabilities]);
}

#[test]
fn a_grown_destination_that_does_not_shrink_back_breaks_the_atomicity_promise() {
    let factory = Bag::factory("Bag (NeverShrinks)", BagFlaw::NeverShrinks);
    let message = broken_message(&factory, Promise::FailureAtomicity);
    assert!(message.contains("broken promise 'failures publish nothing': Bag (NeverShrinks): a move from a definition-free carrier whose third read fails into an empty carrier of the class (which grows as a move destination) failed but changed its destination: size changed from 0 to 5; a grown destination must shrink back to empty (set_extent(0))"), "{message}");
    assert_eq!(broken_promises(&factory), [Promise::FailureAtomicity]);
}

#[test]
fn a_shrinking_growable_destination_keeps_the_atomicity_promise_through_the_tripwire() {
    let factory = Bag::factory("Bag", BagFlaw::None);
    let outcome = check(&factory, Promise::FailureAtomicity);
    assert_eq!(outcome.verdict, Verdict::Kept, "{outcome:?}");
    assert_eq!(
        outcome.notes[0],
        "3 moves with a definition-free end failing half way left both ends unchanged"
    );
}

/// A storage-only Sender class with a route to a Bin class that the factory names as a move
/// destination; with `short` the route copies one slot too few.
fn sender_to_bin(short: bool) -> Factory {
    let sender = CarrierClass::mint("Sender", ClassKind::Independent);
    let bin = CarrierClass::mint("Bin", ClassKind::Independent);
    let provider = TransferProvider::new(move |request| {
        let request = request.clone();
        Ok(TransferPreparation::Transfer(PreparedTransfer::new(
            move || {
                let source = request.tensor();
                let span = request.physical_span() - usize::from(short);
                for slot in 0..span {
                    request.write(slot, source.carrier().get(source.offset() + slot)?)?;
                }
                Ok(Submitted::Ready(()))
            },
        )))
    });
    let route = TransferRoute::new(sender, bin, "sender-to-bin", provider).unwrap();
    let storage = || StorageProvider::from_slots::<Slots>();
    let definition = CarrierDefinition::new(storage())
        .with_transfers(vec![route])
        .unwrap();
    register_carrier_definition(sender, definition).unwrap();
    register_carrier_definition(bin, CarrierDefinition::new(storage())).unwrap();
    let make = |class| {
        move |dtype, values: &[Value]| {
            let carrier = Carrier::create(class, Slots::default(), values.len(), dtype, true)?;
            for (i, value) in values.iter().enumerate() {
                carrier.set(i, *value)?;
            }
            Ok(carrier)
        }
    };
    let to_bin = make(bin);
    Factory::new(
        if short {
            "Sender (short route)"
        } else {
            "Sender"
        },
        make(sender),
    )
    .with_destination("Bin", move |dtype, slots| {
        to_bin(dtype, &vec![Value::Float(0.0); slots])
    })
}

#[test]
fn a_route_to_a_named_destination_that_drops_a_slot_breaks_the_move_promise() {
    let message = broken_message(&sender_to_bin(true), Promise::CpuMoves);
    assert!(
        message.starts_with(
            "broken promise 'moves to and from the CPU': Sender (short route): moving 1 \
             Float32 values to Bin gave 0.0 at 0, not 0.5"
        ),
        "{message}"
    );
    assert!(
        message.contains("how to read this: a move along a route lost or changed values"),
        "{message}"
    );
    let report = run(&sender_to_bin(false));
    assert!(report.is_conformant(), "{report}");
    assert_eq!(
        report.outcome(Promise::CpuMoves).unwrap().notes,
        ["moves to Bin carried their values", "0 moves took a route"]
    );
}
