//! [`FaultHook`]: how the suite arms a failure inside a carrier's own callbacks, and
//! [`FaultInjector`], the named failure points an author's callbacks consult.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;
use strideweave::{Error, Result};

/// The most passes through one fault point a single action (a move, a write, a call) may
/// make: the suite fails every pass in turn until the action completes without reaching the
/// armed one, and an action still reaching it at this pass is reported broken rather than
/// tried for ever.
pub(crate) const PASS_BOUND: u64 = 1024;

#[derive(Default)]
struct Points {
    /// Every point's name, in declaration order, with how often it was reached.
    reached: BTreeMap<&'static str, u64>,
    order: Vec<&'static str>,
    /// The armed point and how many more passes it lets through before failing.
    armed: Option<(&'static str, u64)>,
}

/// What the suite needs of a carrier's fault mechanism: named points it can arm to fail once
/// and disarm, learning whether the failure fired.
///
/// [`FaultInjector`] is the suite's own (an author's callbacks call
/// [`check`](FaultInjector::check)); a carrier with a fault mechanism of its own (a GPU
/// device's injected wgpu errors) bridges it by implementing this trait, and hands it to
/// [`Factory::with_faults`](crate::Factory::with_faults).
pub trait FaultHook: Send + Sync {
    /// The point names, in the order the suite arms them.
    fn points(&self) -> Vec<&'static str>;

    /// Arms `point` to fail once, at its pass number `skip + 1` from now. `Ok(false)` when
    /// the mechanism cannot let passes through first (one that fails only "the next call"
    /// answers false for every `skip > 0`); the suite then stops at the passes it reached.
    /// An unknown point is a Value error.
    fn arm(&self, point: &str, skip: u64) -> Result<bool>;

    /// Disarms the armed point and says whether its failure fired (false: the action never
    /// reached it, and nothing stays armed).
    fn disarm(&self) -> bool;
}

/// A set of named failure points shared by a carrier's callbacks and the suite.
///
/// The author calls [`check`](FaultInjector::check) at the start of each callback it wants
/// tested (`faults.check("write")?`): it counts the pass and, when the suite has armed that
/// point, fails once with a Runtime error naming it. The suite arms every declared point in
/// turn around each action (a write, each advertised operation, a move) and checks the seed's
/// promise that provider failures publish nothing: no value and no version changes.
///
/// Cloning shares the points.
#[derive(Clone, Default)]
pub struct FaultInjector {
    points: Arc<Mutex<Points>>,
}

impl FaultInjector {
    /// The conventional name of the point a storage `allocate` callback checks (its passes
    /// are the class's allocations, [`reached`](FaultInjector::reached)).
    pub const ALLOCATE: &'static str = "allocate";

    /// An injector with the failure points `points` (their order is the order the suite
    /// arms them in).
    pub fn new(points: impl IntoIterator<Item = &'static str>) -> FaultInjector {
        let injector = FaultInjector::default();
        {
            let mut state = injector.points.lock();
            for point in points {
                if state.reached.insert(point, 0).is_none() {
                    state.order.push(point);
                }
            }
        }
        injector
    }

    /// The declared points, in order.
    pub fn points(&self) -> Vec<&'static str> {
        self.points.lock().order.clone()
    }

    /// Counts a pass through `point` and fails when it is armed and its passes are used up.
    /// An undeclared point is a Value error, so a misspelled name cannot go untested.
    pub fn check(&self, point: &str) -> Result<()> {
        let mut state = self.points.lock();
        let Some(name) = state.order.iter().find(|p| **p == point).copied() else {
            return Err(Error::Value(format!(
                "the fault point '{point}' was never declared to the FaultInjector"
            )));
        };
        *state.reached.entry(name).or_insert(0) += 1;
        match &mut state.armed {
            Some((armed, 0)) if *armed == name => {
                state.armed = None;
                Err(Error::Runtime(format!(
                    "injected fault at the carrier's '{name}' callback"
                )))
            }
            Some((armed, passes)) if *armed == name => {
                *passes -= 1;
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Arms `point` to fail on its pass number `skip + 1` from now, once. Value error for an
    /// undeclared point.
    pub fn arm(&self, point: &str, skip: u64) -> Result<()> {
        let mut state = self.points.lock();
        let Some(&name) = state.order.iter().find(|p| **p == point) else {
            return Err(Error::Value(format!(
                "cannot arm the undeclared fault point '{point}'"
            )));
        };
        state.armed = Some((name, skip));
        Ok(())
    }

    /// Disarms the armed point, and says whether it had fired (false: the action never
    /// reached it).
    pub fn disarm(&self) -> bool {
        self.points.lock().armed.take().is_none()
    }

    /// How often `point` was passed (0 for an undeclared point).
    pub fn reached(&self, point: &str) -> u64 {
        self.points.lock().reached.get(point).copied().unwrap_or(0)
    }
}

impl FaultHook for FaultInjector {
    fn points(&self) -> Vec<&'static str> {
        FaultInjector::points(self)
    }

    fn arm(&self, point: &str, skip: u64) -> Result<bool> {
        FaultInjector::arm(self, point, skip).map(|()| true)
    }

    fn disarm(&self) -> bool {
        FaultInjector::disarm(self)
    }
}
