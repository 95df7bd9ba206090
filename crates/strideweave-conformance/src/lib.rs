//! The carrier author's conformance suite: one suite, parametrized by a carrier factory, that
//! checks what the carrier-extension contract and the design promise of **any** carrier.
//!
//! A carrier author writes a [`CarrierFactory`] (usually a [`Factory`] over a closure that
//! builds a carrier of their class holding some values) and either
//!
//! - generates one named `#[test]` per [`Promise`] with [`carrier_conformance!`], or
//! - calls [`run`] (every promise) or [`check`] (one) and reads the structured [`Report`].
//!
//! What is checked ([`Promise`] has the details and, for each, how to read its failure):
//! storage sizes, reads, writes, versions, release and factories; dtype answers by identity;
//! every advertised capability executes and matches the Generic reference on edge sizes and
//! random strides; every advertised custom operation matches its declared reference; unadvertised plans are refused before anything is allocated; failures
//! injected through the carrier's own callbacks (a [`FaultInjector`]) publish nothing; moves
//! to and from the CPU; gradients of the advertised differentiable operations against
//! finite differences; carrier scatter and TiledEvictable projections; `move_async`'s
//! completion handle; kernel packs selected in order on a fresh class; and typed facets
//! found by exact type.
//!
//! ```
//! use strideweave::carriers::Generic;
//! use strideweave_conformance::{check, Factory, Promise, Verdict};
//!
//! let generic = Factory::new("Generic", |dtype, values| Generic::carrier(values, dtype, true));
//! let outcome = check(&generic, Promise::StorageWrites);
//! assert_eq!(outcome.verdict, Verdict::Kept);
//! ```

mod async_moves;
mod atomicity;
mod cases;
mod custom;
mod differences;
mod facets;
mod factory;
mod faults;
mod gradients;
mod movement;
mod operations;
mod packs;
mod report;
mod scatter;
mod storage;
mod support;
mod tiled;
mod tripwire;

pub use custom::OperationCase;
pub use facets::FacetProbe;
pub use factory::{default_tolerance, CarrierFactory, Factory};
pub use faults::{FaultHook, FaultInjector};
pub use report::{Broken, Outcome, Promise, Report, Verdict};

use support::Context;

/// Checks one promise of the class `factory` builds.
pub fn check(factory: &dyn CarrierFactory, promise: Promise) -> Outcome {
    let mut cx = Context::new(factory, promise);
    let result = match promise {
        Promise::StorageReads => storage::reads(&mut cx),
        Promise::StorageWrites => storage::writes(&mut cx),
        Promise::StorageRelease => storage::release(&mut cx),
        Promise::StorageFactories => storage::factories(&mut cx),
        Promise::DtypeAnswers => storage::dtype_answers(&mut cx),
        Promise::AdvertisedCapabilities => operations::advertised(&mut cx),
        Promise::CustomOperations => custom::custom_operations(&mut cx),
        Promise::UnadvertisedPlans => operations::unadvertised(&mut cx),
        Promise::FailureAtomicity => atomicity::failures(&mut cx),
        Promise::CpuMoves => movement::cpu_moves(&mut cx),
        Promise::Gradients => gradients::gradients(&mut cx),
        Promise::Scatter => scatter::scatter(&mut cx),
        Promise::AsyncMoves => async_moves::async_moves(&mut cx),
        Promise::KernelPacks => packs::kernel_packs(&mut cx),
        Promise::Facets => facets::facets(&mut cx),
    };
    let verdict = match (result, cx.not_applicable.take()) {
        (Err(broken), _) => Verdict::Broken(broken),
        (Ok(()), Some(reason)) => Verdict::NotApplicable(reason),
        (Ok(()), None) => Verdict::Kept,
    };
    Outcome {
        promise,
        verdict,
        notes: cx.notes,
    }
}

/// Checks every promise of the class `factory` builds: the function form for harnesses of
/// their own.
pub fn run(factory: &dyn CarrierFactory) -> Report {
    Report {
        carrier: factory.name().to_string(),
        outcomes: Promise::ALL
            .into_iter()
            .map(|p| check(factory, p))
            .collect(),
    }
}

/// Checks one promise and panics with the broken promise's message (what broke, how to read
/// it) when it does not hold: the body of each test [`carrier_conformance!`] generates. A
/// promise that does not apply passes and prints why.
pub fn assert_promise(factory: &dyn CarrierFactory, promise: Promise) {
    let outcome = check(factory, promise);
    for note in &outcome.notes {
        println!("{}: {promise}: {note}", factory.name());
    }
    match outcome.verdict {
        Verdict::Kept => {}
        Verdict::NotApplicable(reason) => {
            println!("{}: {promise}: not applicable: {reason}", factory.name())
        }
        Verdict::Broken(broken) => panic!("{broken}"),
    }
}

/// Generates a module `$name` with one `#[test]` per [`Promise`], each building its factory
/// with `$factory` (an expression of a type implementing [`CarrierFactory`]) and calling
/// [`assert_promise`].
///
/// ```no_run
/// use strideweave::carriers::Generic;
/// use strideweave_conformance::{carrier_conformance, Factory};
///
/// carrier_conformance!(generic, Factory::new("Generic", |dtype, values| {
///     Generic::carrier(values, dtype, true)
/// }));
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! carrier_conformance {
    ($name:ident, $factory:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            fn factory() -> impl $crate::CarrierFactory {
                $factory
            }

            #[test]
            fn storage_reads() {
                $crate::assert_promise(&factory(), $crate::Promise::StorageReads);
            }

            #[test]
            fn storage_writes_and_versions() {
                $crate::assert_promise(&factory(), $crate::Promise::StorageWrites);
            }

            #[test]
            fn storage_release() {
                $crate::assert_promise(&factory(), $crate::Promise::StorageRelease);
            }

            #[test]
            fn storage_factories() {
                $crate::assert_promise(&factory(), $crate::Promise::StorageFactories);
            }

            #[test]
            fn dtype_answers_by_identity() {
                $crate::assert_promise(&factory(), $crate::Promise::DtypeAnswers);
            }

            #[test]
            fn advertised_capabilities_execute() {
                $crate::assert_promise(&factory(), $crate::Promise::AdvertisedCapabilities);
            }

            #[test]
            fn custom_operations_match_their_reference() {
                $crate::assert_promise(&factory(), $crate::Promise::CustomOperations);
            }

            #[test]
            fn unadvertised_plans_are_refused() {
                $crate::assert_promise(&factory(), $crate::Promise::UnadvertisedPlans);
            }

            #[test]
            fn failures_publish_nothing() {
                $crate::assert_promise(&factory(), $crate::Promise::FailureAtomicity);
            }

            #[test]
            fn moves_to_and_from_the_cpu() {
                $crate::assert_promise(&factory(), $crate::Promise::CpuMoves);
            }

            #[test]
            fn gradients_match_finite_differences() {
                $crate::assert_promise(&factory(), $crate::Promise::Gradients);
            }

            #[test]
            fn scatter_writes_exactly_its_slots() {
                $crate::assert_promise(&factory(), $crate::Promise::Scatter);
            }

            #[test]
            fn asynchronous_moves_complete_once() {
                $crate::assert_promise(&factory(), $crate::Promise::AsyncMoves);
            }

            #[test]
            fn kernel_packs_are_selected_in_order() {
                $crate::assert_promise(&factory(), $crate::Promise::KernelPacks);
            }

            #[test]
            fn facets_are_found_by_exact_type() {
                $crate::assert_promise(&factory(), $crate::Promise::Facets);
            }
        }
    };
}
