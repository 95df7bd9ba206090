//! The suite's own tests of the extension promises — scatter, asynchronous moves, kernel
//! packs and typed facets: a correct carrier keeps each, and a carrier broken in one way
//! breaks exactly the promise that names it, with the message asserted.

mod common;

use std::sync::Arc;

use common::one_kernel_carrier::Slots;
use common::{
    broken_message, define_ring, ring_carrier, ring_faults, ring_running, Bag, BagFlaw, Flaw,
};
use strideweave::carrier::{Carrier, CarrierClass, ClassKind};
use strideweave::carriers::extension::{
    CarrierFacet, CompletionCell, PreparedTransfer, ProviderCompletion, Submitted,
    TransferPreparation, TransferProvider, TransferRequest,
};
use strideweave::carriers::Cpu;
use strideweave::movement::move_async;
use strideweave::{
    register_carrier_definition, CarrierDefinition, DType, Result, Shape, StorageProvider, Tensor,
    TransferRoute, Value,
};
use strideweave_conformance::{
    check, run, CarrierFactory, Factory, FaultHook, FaultInjector, Promise, Verdict,
};

/// A factory of carriers of the definition-backed `class` over [`Slots`], named `name`.
fn slots_factory(name: &str, class: CarrierClass) -> Factory {
    Factory::new(name, move |dtype, values| {
        let carrier = Carrier::create(class, Slots::default(), values.len(), dtype, true)?;
        for (i, value) in values.iter().enumerate() {
            carrier.set(i, *value)?;
        }
        Ok(carrier)
    })
}

// Scatter.

#[test]
fn a_bulk_write_that_drops_pairs_breaks_the_scatter_promise() {
    let factory = Bag::factory("Bag (DropsBulkPairs)", BagFlaw::DropsBulkPairs);
    let message = broken_message(&factory, Promise::Scatter);
    assert!(
        message.starts_with(
            "broken promise 'scatter writes exactly its slots': Bag (DropsBulkPairs): after \
             scattering 4 Float32 values from a Bag tensor through 4:2 at mapping offset 1 into a 9-slot \
             carrier, slot 3 is"
        ),
        "{message}"
    );
    assert!(
        message.contains("how to read this: a scatter wrote other slots or values"),
        "{message}"
    );
}

#[test]
fn the_correct_ring_scatters_atomically_under_injected_faults() {
    let report = run(&ring_running(Flaw::None, &["neg"]));
    assert!(report.is_conformant(), "{report}");
    let scatter = report.outcome(Promise::Scatter).unwrap();
    assert_eq!(
        scatter.notes,
        [
            "6 scatters through 2 mappings wrote exactly their slots; non-injective, out-of-range \
          and immutable scatters refused with nothing changed"
        ]
    );
    let atomicity = report.outcome(Promise::FailureAtomicity).unwrap();
    assert!(
        atomicity.notes[0].contains("around 5 actions"),
        "{:?}",
        atomicity.notes
    );
}

// Asynchronous moves.

/// How the Courier's route to the CPU completes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Completion {
    /// On a thread of its own, completing a `CompletionCell` when the copy is done.
    Threaded,
    /// A completion whose `wait` reports success at once and whose copy runs only when
    /// `done` is polled: the framework waits, so the copy never runs.
    CopiesOnPoll,
}

/// The Courier's lazy completion.
struct OnPoll {
    request: TransferRequest,
}

impl ProviderCompletion<()> for OnPoll {
    fn done(&self) -> bool {
        let _ = copy(&self.request);
        true
    }

    fn wait(&self) -> Result<()> {
        Ok(())
    }
}

fn copy(request: &TransferRequest) -> Result<()> {
    let source = request.tensor();
    for slot in 0..request.physical_span() {
        request.write(slot, source.carrier().get(source.offset() + slot)?)?;
    }
    Ok(())
}

/// A storage-only Courier class whose route to the CPU is pending (completes later).
fn courier(completion: Completion) -> Factory {
    let class = CarrierClass::mint("Courier", ClassKind::Independent);
    let provider = TransferProvider::new(move |request| {
        let request = request.clone();
        Ok(TransferPreparation::Transfer(PreparedTransfer::new(
            move || match completion {
                Completion::Threaded => {
                    let cell = CompletionCell::new();
                    let (worker, request) = (cell.clone(), request.clone());
                    std::thread::spawn(move || worker.complete(copy(&request)));
                    Ok(Submitted::Pending(Arc::new(cell)))
                }
                Completion::CopiesOnPoll => Ok(Submitted::Pending(Arc::new(OnPoll {
                    request: request.clone(),
                }))),
            },
        )))
    });
    let route =
        TransferRoute::new(class, CarrierClass::of::<Cpu>(), "courier-to-cpu", provider).unwrap();
    let definition = CarrierDefinition::new(StorageProvider::from_slots::<Slots>())
        .with_transfers(vec![route])
        .unwrap();
    register_carrier_definition(class, definition).unwrap();
    slots_factory(&format!("Courier ({completion:?})"), class)
}

#[test]
fn a_pending_route_that_completes_on_its_own_thread_keeps_the_async_promise() {
    let report = run(&courier(Completion::Threaded));
    assert!(report.is_conformant(), "{report}");
    assert_eq!(
        report.outcome(Promise::AsyncMoves).unwrap().notes,
        ["2 asynchronous moves completed; 0 failing ones published nothing"]
    );
}

#[test]
fn a_completion_that_reports_success_before_copying_breaks_the_async_promise() {
    let factory = courier(Completion::CopiesOnPoll);
    let message = broken_message(&factory, Promise::AsyncMoves);
    assert!(
        message.starts_with(
            "broken promise 'asynchronous moves complete once': Courier (CopiesOnPoll): \
             move_async of 1 Float32 values to the CPU: the handle's tensor reads 0.0 at 0, not"
        ),
        "{message}"
    );
    assert!(
        message.contains("a transfer provider's completion must report success only once"),
        "{message}"
    );
}

#[test]
fn a_ring_fails_its_asynchronous_moves_at_every_fault_point_atomically() {
    // The Ring has no route to the CPU; it moves to another Ring class by the elementwise
    // fallback both permit.
    let other = define_ring(Flaw::None, &ring_faults(), &["neg"]);
    let factory = ring_running(Flaw::None, &["neg"]).with_destination("Ring2", move |dtype, n| {
        ring_carrier(other, dtype, &vec![Value::Float(0.0); n])
    });
    let outcome = check(&factory, Promise::AsyncMoves);
    assert_eq!(outcome.verdict, Verdict::Kept, "{outcome:?}");
    let note = &outcome.notes[0];
    assert!(
        note.starts_with("2 asynchronous moves completed; "),
        "{note}"
    );
    let failed: usize = note
        .split("; ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(failed >= 2, "{note}");
}

/// A fault hook whose one point every action passes without end: it reports each armed
/// pass as fired although nothing fails.
struct Endless;

impl FaultHook for Endless {
    fn points(&self) -> Vec<&'static str> {
        vec!["spin"]
    }

    fn arm(&self, _point: &str, _skip: u64) -> Result<bool> {
        Ok(true)
    }

    fn disarm(&self) -> bool {
        true
    }
}

/// A storage-only class of Float32 values read as two half-words, each through the fault
/// point "read" (so a move of 5 values passes it 10 times), moving to other classes of its
/// kind by the elementwise fallback; it and its injector.
fn halves() -> (CarrierClass, FaultInjector) {
    let faults = FaultInjector::new(["read", "write", "release"]);
    let (read, write, release) = (faults.clone(), faults.clone(), faults.clone());
    let storage = StorageProvider::new(
        |_: &Vec<Value>, dtype| dtype == DType::FLOAT32,
        |values: &Vec<Value>| values.len() as i64,
        |values: &mut Vec<Value>, slots, _| {
            *values = vec![Value::Float(0.0); slots];
            Ok(())
        },
        move |values: &mut Vec<Value>| {
            release.check("release")?;
            values.clear();
            Ok(())
        },
        move |values: &Vec<Value>, index| {
            read.check("read")?;
            read.check("read")?;
            Ok(values[index])
        },
        move |values: &mut Vec<Value>, index, value| {
            write.check("write")?;
            values[index] = value;
            Ok(())
        },
    )
    .with_elementwise_fallback(true);
    let class = CarrierClass::mint("Halves", ClassKind::Independent);
    register_carrier_definition(class, CarrierDefinition::new(storage)).unwrap();
    (class, faults)
}

/// A carrier of a [`halves`] class holding `values`.
fn halves_carrier(class: CarrierClass, values: &[Value]) -> Result<Carrier> {
    let carrier = Carrier::create(
        class,
        Vec::<Value>::new(),
        values.len(),
        DType::FLOAT32,
        true,
    )?;
    for (i, value) in values.iter().enumerate() {
        carrier.set(i, *value)?;
    }
    Ok(carrier)
}

#[test]
fn every_pass_of_an_asynchronous_move_is_failed_until_one_completes() {
    // One unarmed move of 5 values from a Halves carrier to another Halves class, counted:
    // the failures the suite fires are exactly those passes, summed over the points.
    // (Only the source's injector is armed: the destination class has its own.)
    let (counted, faults) = halves();
    let (other, _) = halves();
    let source = halves_carrier(counted, &[Value::Float(0.5); 5]).unwrap();
    let tensor = Tensor::compact(source, Shape::new(5).unwrap()).unwrap();
    let destination = halves_carrier(other, &[Value::Float(0.0); 5]).unwrap();
    let before: Vec<u64> = faults.points().iter().map(|p| faults.reached(p)).collect();
    move_async(&tensor, &destination).unwrap().wait().unwrap();
    let passes: Vec<u64> = faults
        .points()
        .iter()
        .zip(&before)
        .map(|(p, b)| faults.reached(p) - b)
        .collect();
    assert_eq!(passes, [10, 0, 1], "read, write, release");

    let (class, faults) = halves();
    let factory = Factory::new("Halves", move |_, values| halves_carrier(class, values))
        .with_destination("Halves2", move |_, n| {
            halves_carrier(other, &vec![Value::Float(0.0); n])
        });
    let unarmed = check(&factory, Promise::AsyncMoves);
    let factory = factory.with_faults(faults);
    let outcome = check(&factory, Promise::AsyncMoves);
    assert_eq!(outcome.verdict, Verdict::Kept, "{outcome:?}");
    // Without fault points nothing fails (the Tripwire move has no route from Halves, and
    // neither has the CPU); with them, every one of the 11 passes fails once, 10 of them past
    // the 8 passes the suite used to stop at.
    assert_eq!(
        unarmed.notes,
        ["2 asynchronous moves completed; 0 failing ones published nothing"]
    );
    let fired: u64 = passes.iter().sum();
    assert_eq!(
        outcome.notes,
        [format!(
            "2 asynchronous moves completed; {fired} failing ones published nothing"
        )]
    );
}

#[test]
fn a_fault_point_passed_without_end_breaks_the_promises_at_the_bound() {
    let factory = Bag::factory("Bag (endless point)", BagFlaw::None).with_faults(Endless);
    let message = broken_message(&factory, Promise::AsyncMoves);
    assert!(
        message.starts_with(
            "broken promise 'asynchronous moves complete once': Bag (endless point): \
             move_async to the CPU reached the fault point 'spin' on each of its first 1024 \
             passes, every one failed in turn; a move of 5 values passing one point more than \
             1024 times is taken not to finish"
        ),
        "{message}"
    );
    let message = broken_message(&factory, Promise::FailureAtomicity);
    assert!(
        message.starts_with(
            "broken promise 'failures publish nothing': Bag (endless point): writing slot 1 of \
             a carrier of Float32 reached the fault point 'spin' on each of its first 1024 \
             passes"
        ),
        "{message}"
    );
}

// Kernel packs.

#[test]
fn a_fresh_ring_class_selects_its_packs_in_order() {
    let outcome = check(&ring_running(Flaw::None, &["neg"]), Promise::KernelPacks);
    assert_eq!(outcome.verdict, Verdict::Kept, "{outcome:?}");
    assert!(
        outcome.notes[0].starts_with("three packs on the fresh Ring"),
        "{:?}",
        outcome.notes
    );
}

#[test]
fn a_fresh_class_observed_before_its_packs_attach_breaks_the_pack_promise() {
    let factory = ring_running(Flaw::None, &["neg"]).with_fresh_class(|| {
        let faults = ring_faults();
        let class = define_ring(Flaw::None, &faults, &["neg"]);
        // A warm-up that constructs a carrier: the class is observed, its kernel set sealed.
        ring_carrier(class, DType::FLOAT32, &[Value::Float(1.0)])?;
        let factory = Factory::new("Ring (warmed up)", move |dtype, values| {
            ring_carrier(class, dtype, values)
        });
        Ok((class, factory))
    });
    let message = broken_message(&factory, Promise::KernelPacks);
    assert!(
        message.contains(
            "registering the kernel pack conformance.a for the fresh Ring (the factory's \
             with_fresh_class must give a class nothing has constructed or queried) failed"
        ),
        "{message}"
    );
    assert!(message.contains("its kernel set is sealed"), "{message}");
}

/// The reason the kernel-pack promise of `factory` gives for not applying.
fn packs_not_applicable(factory: &Factory) -> String {
    match check(factory, Promise::KernelPacks).verdict {
        Verdict::NotApplicable(reason) => reason,
        other => panic!("the kernel-pack promise should not apply, got {other:?}"),
    }
}

#[test]
fn a_shipped_class_refuses_packs_and_the_promise_does_not_apply() {
    let generic = Factory::new("Generic", |dtype, values| {
        strideweave::carriers::Generic::carrier(values, dtype, true)
    });
    assert_eq!(
        packs_not_applicable(&generic),
        "Generic is a definition-free shipped class, which public kernel-pack registration \
         rejects (seed: \"Definition-free carriers retain the existing extension path\": \
         Generic, CPU, FileBacked, Evictable, BlockDeviceCarrier and Metal stay \
         definition-free); a pack for the observed class was refused with nothing changed"
    );
}

#[test]
fn a_dependent_class_refuses_packs_and_the_reason_cites_the_seed() {
    let tiled = Factory::new("TiledEvictable", |dtype, values| {
        let primary = Cpu::from_values(values, dtype, true)?;
        let secondary = Cpu::carrier(0, dtype, true, false)?;
        strideweave::carriers::TiledEvictable::carrier(
            &primary,
            &secondary,
            &[values.len()],
            &[1],
            None,
        )
    })
    .with_min_slots(1);
    let reason = packs_not_applicable(&tiled);
    assert!(
        reason.starts_with(
            "TiledEvictable is a dependent carrier: it derives execution through its \
             dependencies and never owns kernel packs (seed: \"A DependentCarrier definition \
             SHALL supply a CompositeProvider and SHALL supply no KernelProvider\""
        ),
        "{reason}"
    );
}

#[test]
fn definition_free_and_storage_only_custom_classes_refuse_packs_with_their_reasons() {
    let bag = Bag::factory("Bag", BagFlaw::None);
    assert_eq!(
        packs_not_applicable(&bag),
        "Bag is definition-free: a kernel pack's class must have a registered definition and \
         kernel provider (seed: \"A kernel pack belongs to one exact independent carrier\"); a \
         pack for the observed class was refused with nothing changed"
    );
    let shelf = faceted("Shelf", Arc::new(Labels));
    let reason = packs_not_applicable(&shelf);
    assert!(
        reason.starts_with(
            "Shelf is storage-only: its definition has no kernel provider, and a kernel pack's \
             class must have one (seed: \"An independent definition with no kernel provider \
             SHALL be storage-only\""
        ),
        "{reason}"
    );
}

#[test]
fn a_class_that_could_take_packs_without_a_fresh_class_says_how_to_give_one() {
    let (_, factory) = common::ring_parts(Flaw::None, &["neg"]);
    let reason = packs_not_applicable(&factory);
    assert!(
        reason.starts_with("Ring is definition-backed with a kernel provider, so it takes kernel packs, but only until it is first observed (seed: \"Definition and extension registration seal on first observation\")"),
        "{reason}"
    );
    assert!(
        reason.contains("(Factory::defined, or Factory::with_fresh_class)"),
        "{reason}"
    );
}

#[test]
fn a_factory_defined_from_its_class_definition_selects_packs_on_a_fresh_class() {
    let factory = Factory::defined(
        "Ring (defined)",
        || Ok(define_ring(Flaw::None, &ring_faults(), &["neg"])),
        ring_carrier,
    )
    .unwrap();
    let outcome = check(&factory, Promise::KernelPacks);
    assert_eq!(outcome.verdict, Verdict::Kept, "{outcome:?}");
    assert!(
        outcome.notes[0].starts_with("three packs on the fresh Ring"),
        "{:?}",
        outcome.notes
    );
}

#[test]
fn a_fresh_class_that_cannot_take_packs_breaks_the_pack_promise() {
    let factory = ring_running(Flaw::None, &["neg"]).with_fresh_class(|| {
        let shelf = faceted("Shelf", Arc::new(Labels));
        let class = shelf.carrier(DType::FLOAT32, &[]).map(|c| c.class());
        Ok((class?, shelf))
    });
    let message = broken_message(&factory, Promise::KernelPacks);
    assert!(
        message.contains(
            "the factory's fresh class cannot take packs although the class under test can: \
             Shelf is storage-only"
        ),
        "{message}"
    );
}

// Typed facets.

/// A facet naming itself by its type.
struct Labels;

impl CarrierFacet for Labels {}

/// A facet whose `facet_name` does not name its type.
struct Misnamed;

impl CarrierFacet for Misnamed {
    fn facet_name(&self) -> &'static str {
        "labels"
    }
}

/// A facet type the class below never registers.
struct Residency;

impl CarrierFacet for Residency {}

/// A storage-only class registering `facet`.
fn faceted(name: &str, facet: Arc<dyn CarrierFacet>) -> Factory {
    let class = CarrierClass::mint(name, ClassKind::Independent);
    let definition = CarrierDefinition::new(StorageProvider::from_slots::<Slots>())
        .with_facets([facet])
        .unwrap();
    register_carrier_definition(class, definition).unwrap();
    slots_factory(name, class)
}

#[test]
fn a_registered_facet_is_found_by_its_exact_type_in_every_state() {
    let factory = faceted("Labelled", Arc::new(Labels)).with_facet::<Labels>();
    let outcome = check(&factory, Promise::Facets);
    assert_eq!(outcome.verdict, Verdict::Kept, "{outcome:?}");
    assert_eq!(
        outcome.notes,
        [
            "1 declared facets found by exact type in 5 states; an unregistered facet type \
          answered none"
        ]
    );
}

#[test]
fn a_declared_facet_the_definition_does_not_register_breaks_the_facet_promise() {
    let factory = faceted("Unlabelled", Arc::new(Labels)).with_facet::<Residency>();
    let message = broken_message(&factory, Promise::Facets);
    assert!(
        message.starts_with(
            "broken promise 'facets are found by exact type': Unlabelled: the factory declares \
             the facet broken_extensions::Residency but facet::<broken_extensions::Residency>() \
             on a fresh carrier is none"
        ),
        "{message}"
    );
}

#[test]
fn a_facet_name_that_is_not_its_type_breaks_the_facet_promise() {
    let factory = faceted("Misnamed", Arc::new(Misnamed)).with_facet::<Misnamed>();
    let message = broken_message(&factory, Promise::Facets);
    assert!(
        message.contains(
            "facet_name() of the broken_extensions::Misnamed facet found by \
             facet::<broken_extensions::Misnamed>() on a fresh carrier is 'labels', not its \
             type name"
        ),
        "{message}"
    );
}
