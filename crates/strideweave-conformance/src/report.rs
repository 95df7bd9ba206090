//! What the suite promises to check ([`Promise`]) and what it found ([`Report`]).

use std::fmt;

/// One promise the seed and the design make of every carrier; the suite checks each one
/// separately, and [`carrier_conformance!`](crate::carrier_conformance) makes one `#[test]`
/// of each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Promise {
    /// Storage: a carrier holding n values has size n and the carrier's dtype, reads them
    /// back normalized, and refuses an out-of-range read with an Index error.
    StorageReads,
    /// Storage: a write stores the normalized value and bumps the version by exactly one;
    /// a refused write (out of range, a value the dtype refuses, an immutable carrier)
    /// changes no value and no version.
    StorageWrites,
    /// Storage: `release` is idempotent, leaves size 0 and the version as it was, makes
    /// reads and writes Runtime errors, and keeps `dtype`, `supports_storage_dtype` and the
    /// factories working.
    StorageRelease,
    /// Storage: `new_like` and `allocate_like` make fresh carriers of the same exact class
    /// (size, values, zeros, version 0, independent of the prototype), also at size 0.
    StorageFactories,
    /// Storage: `supports_storage_dtype` answers by dtype identity, the same in every state,
    /// true for the carrier's own dtype and false for dtypes no carrier stores.
    DtypeAnswers,
    /// Every advertised capability executes and matches the Generic reference on random
    /// strides and edge sizes, without touching its operands.
    AdvertisedCapabilities,
    /// Every advertised custom (non-built-in) operation runs, through the calls the factory
    /// declares ([`OperationCase`](crate::OperationCase)), on dense, gapped, offset and
    /// permuted operands, and matches the case's or the definition's reference.
    CustomOperations,
    /// A plan the carrier does not advertise is refused with `UnsupportedOperationPlan`
    /// before any carrier is constructed or anything changed; so is an advertised plan its
    /// kernels decline at run time for some layout.
    UnadvertisedPlans,
    /// A failure injected through the carrier's own callbacks (its fault points), or
    /// provoked from outside (an overflowing checked Int32 kernel, a failing move endpoint),
    /// publishes nothing: every operand keeps its values and version, and the next attempt
    /// succeeds.
    FailureAtomicity,
    /// Moves to and from the CPU carry every value where a route exists and change nothing
    /// where none does.
    CpuMoves,
    /// The gradient of every advertised differentiable operation matches central finite
    /// differences of the carrier's own forward.
    Gradients,
    /// Where the class supports carrier scatter, a scatter writes exactly the slots its
    /// mapping names and bumps the version once, and a refused one (not injective, out of
    /// range, immutable) changes nothing; for TiledEvictable tensors (on grids of one to three
    /// axes with a tiling hook), `project` gathers the selected tiles in order and
    /// `TiledEvictable::scatter` writes them into a fresh carrier whose other tiles are
    /// invalid, the source and template unchanged.
    Scatter,
    /// `move_async` to the CPU and to every named destination gives a handle that is done
    /// once waited, returns the same tensor on every wait, carries the values, bumps the
    /// destination's version once and releases the source; a failing one publishes nothing.
    AsyncMoves,
    /// On a fresh class of the kind under test, kernel packs are selected deterministically:
    /// a declining kernel passes to the next, the first accepting one in preference and
    /// `(namespace, version)` order runs, a pack for another class never does, and a pack
    /// registered once the class is observed is refused.
    KernelPacks,
    /// Every facet the factory declares is found by its exact type on every carrier of the
    /// class and names itself by that type; an unregistered facet type answers none.
    Facets,
}

impl Promise {
    /// Every promise, in the order the suite checks them.
    pub const ALL: [Promise; 15] = [
        Promise::StorageReads,
        Promise::StorageWrites,
        Promise::StorageRelease,
        Promise::StorageFactories,
        Promise::DtypeAnswers,
        Promise::AdvertisedCapabilities,
        Promise::CustomOperations,
        Promise::UnadvertisedPlans,
        Promise::FailureAtomicity,
        Promise::CpuMoves,
        Promise::Gradients,
        Promise::Scatter,
        Promise::AsyncMoves,
        Promise::KernelPacks,
        Promise::Facets,
    ];

    /// The promise's name, as failure messages and reports print it.
    pub fn name(self) -> &'static str {
        match self {
            Promise::StorageReads => "storage reads",
            Promise::StorageWrites => "storage writes and versions",
            Promise::StorageRelease => "storage release",
            Promise::StorageFactories => "storage factories",
            Promise::DtypeAnswers => "dtype answers by identity",
            Promise::AdvertisedCapabilities => "advertised capabilities execute",
            Promise::CustomOperations => "custom operations match their reference",
            Promise::UnadvertisedPlans => "unadvertised plans are refused",
            Promise::FailureAtomicity => "failures publish nothing",
            Promise::CpuMoves => "moves to and from the CPU",
            Promise::Gradients => "gradients match finite differences",
            Promise::Scatter => "scatter writes exactly its slots",
            Promise::AsyncMoves => "asynchronous moves complete once",
            Promise::KernelPacks => "kernel packs are selected in order",
            Promise::Facets => "facets are found by exact type",
        }
    }

    /// How to read a failure of this promise: where the fault usually is.
    pub fn how_to_read(self) -> &'static str {
        match self {
            Promise::StorageReads => {
                "the storage provider's physical_size or read callback disagrees with what was \
                 written; check that allocate establishes exactly the requested slots"
            }
            Promise::StorageWrites => {
                "a write either did not land, landed normalized differently, or moved the \
                 version by other than one; versions belong to the framework, so a carrier that \
                 bumps or writes through a second path is at fault"
            }
            Promise::StorageRelease => {
                "the release callback or a factory misbehaves on a released carrier; a released \
                 carrier must still answer dtype questions and serve as a prototype"
            }
            Promise::StorageFactories => {
                "new_like/allocate_like copied the prototype's state, built another class, or \
                 did not zero; fresh state must take only the prototype's configuration"
            }
            Promise::DtypeAnswers => {
                "supports_dtype must compare DType identities and ignore the carrier's state \
                 (size, contents, release); answering by name, category or size is the usual \
                 fault"
            }
            Promise::AdvertisedCapabilities => {
                "a kernel behind an advertised plan failed or computed other values than the \
                 Generic reference; the message names the plan, the operand layouts and the \
                 first differing element"
            }
            Promise::CustomOperations => {
                "a kernel behind an advertised custom operation failed or computed other values \
                 than the reference (the case's, else the definition's), or the factory declares \
                 no OperationCase whose call resolves to the advertised plan; the message names \
                 the call, its operand layouts and the first differing element"
            }
            Promise::UnadvertisedPlans => {
                "a call whose plan the carrier does not advertise was not refused by the \
                 capability gate, or a refusal (the gate's, or every kernel declining at run \
                 time) came after a carrier was constructed or an operand changed; a kernel \
                 pattern must decide to decline before it allocates"
            }
            Promise::FailureAtomicity => {
                "after a failure injected at the named callback (or provoked: an Int32 overflow \
                 in the carrier's own kernel, a move endpoint failing half way), an operand's \
                 values or version changed, or the carrier stayed unusable; a callback must \
                 fail before it changes anything, or undo its change"
            }
            Promise::CpuMoves => {
                "a move along a route lost or changed values, kept its source live, or a refused \
                 move changed a carrier"
            }
            Promise::Gradients => {
                "the backward of an advertised operation disagrees with finite differences of \
                 its forward on this carrier, or could not run; the message names the operand \
                 and element"
            }
            Promise::Scatter => {
                "a scatter wrote other slots or values than its mapping names, moved the version \
                 by other than one, or a refused scatter changed the carrier; a class's bulk \
                 write (write_all) must write every pair it is given, all or nothing; for a \
                 projection or a TiledEvictable scatter, the tiers' factories (new_like, \
                 allocate_like) must give independent carriers holding exactly what they are \
                 asked for"
            }
            Promise::AsyncMoves => {
                "an asynchronous move's handle was not done after its wait, gave two outcomes, \
                 or its tensor lacked values; a transfer provider's completion must report \
                 success only once its writes are done, and a failure must leave both ends as \
                 they were"
            }
            Promise::KernelPacks => {
                "a pack could not be attached to the fresh class (something constructed or \
                 queried it first: with_fresh_class must return a class nothing has observed), \
                 or a call ran another kernel than the first accepting one in order"
            }
            Promise::Facets => {
                "a facet the factory declares is not registered under exactly that type by the \
                 class's definition (CarrierDefinition::with_facets), or its facet_name does \
                 not name its type, or an unregistered facet type was found"
            }
        }
    }
}

impl fmt::Display for Promise {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A broken promise: which one, what was observed, and how to read it.
#[derive(Debug, Clone, PartialEq)]
pub struct Broken {
    /// The promise that broke.
    pub promise: Promise,
    /// What the suite observed, naming the carrier, the operation, the slot or the element.
    pub observed: String,
}

impl fmt::Display for Broken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "broken promise '{}': {}\n  how to read this: {}",
            self.promise,
            self.observed,
            self.promise.how_to_read()
        )
    }
}

impl std::error::Error for Broken {}

/// The verdict on one promise.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The promise held on everything the suite tried.
    Kept,
    /// The promise broke.
    Broken(Broken),
    /// The promise does not apply to this carrier (for example failure injection without a
    /// fault injector), with the reason.
    NotApplicable(String),
}

/// The outcome of one promise: the verdict and what the suite tried (the plans run, the
/// routes found, the points armed), so a report shows coverage, not only a pass.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The promise checked.
    pub promise: Promise,
    /// Its verdict.
    pub verdict: Verdict,
    /// What was tried, one line each.
    pub notes: Vec<String>,
}

/// Every promise's outcome for one carrier class: the function form's answer, for harnesses
/// that want a structured result rather than test failures.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The factory's name for the class under test.
    pub carrier: String,
    /// One outcome per promise, in [`Promise::ALL`] order.
    pub outcomes: Vec<Outcome>,
}

impl Report {
    /// The broken promises.
    pub fn broken(&self) -> Vec<&Broken> {
        self.outcomes
            .iter()
            .filter_map(|o| match &o.verdict {
                Verdict::Broken(b) => Some(b),
                _ => None,
            })
            .collect()
    }

    /// Whether no promise broke.
    pub fn is_conformant(&self) -> bool {
        self.broken().is_empty()
    }

    /// The outcome of `promise`.
    pub fn outcome(&self, promise: Promise) -> Option<&Outcome> {
        self.outcomes.iter().find(|o| o.promise == promise)
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "conformance of {}:", self.carrier)?;
        for outcome in &self.outcomes {
            match &outcome.verdict {
                Verdict::Kept => writeln!(f, "  kept           {}", outcome.promise)?,
                Verdict::Broken(b) => writeln!(f, "  BROKEN         {b}")?,
                Verdict::NotApplicable(why) => {
                    writeln!(f, "  not applicable {}: {why}", outcome.promise)?
                }
            }
            for note in &outcome.notes {
                writeln!(f, "                   {note}")?;
            }
        }
        Ok(())
    }
}
