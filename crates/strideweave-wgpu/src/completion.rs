//! [`GpuCompletion`]: a [`ProviderCompletion`] built on a queue submission.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use strideweave::carriers::extension::{CompletionCell, ProviderCompletion};
use strideweave::Result;

use crate::device::GpuDevice;

type Finish<T> = Box<dyn FnOnce() -> Result<T> + Send>;

/// How long a waiter whose work the device retired waits for another thread to finish
/// running the work's callback before it reports that the work never signalled.
const CALLBACK_GRACE: Duration = Duration::from_secs(2);

/// The pending outcome of GPU work: the queue submission it waits on, a flag the device
/// raises when the work is finished (a submitted-work-done or buffer-map callback), and the
/// step that turns the finished work into the value (building the result carrier, copying
/// mapped bytes out).
///
/// Seed rule: `ProviderCompletion[T]` "SHALL be thread-safe and idempotent: repeated or
/// concurrent waits SHALL observe the same terminal value identity or the same terminal
/// exception, and done SHALL become true exactly at that terminal outcome". wgpu runs its
/// callbacks only when something polls the device, so [`done`](ProviderCompletion::done)
/// polls once without blocking (`PollType::Poll`) and [`wait`](ProviderCompletion::wait)
/// blocks on the submission index; whichever first sees the work finished runs the final step
/// once, and its outcome, value or error, is stored in a [`CompletionCell`] every caller
/// reads.
pub struct GpuCompletion<T> {
    device: Arc<GpuDevice>,
    index: wgpu::SubmissionIndex,
    what: String,
    finished: Arc<AtomicBool>,
    finish: Mutex<Option<Finish<T>>>,
    outcome: CompletionCell<T>,
}

impl<T: Clone + Send + Sync> GpuCompletion<T> {
    /// The completion of the work submitted as `index` (described by `what`), finished when
    /// `finished` is raised, whose value `finish` produces.
    pub fn new(
        device: Arc<GpuDevice>,
        index: wgpu::SubmissionIndex,
        what: String,
        finished: Arc<AtomicBool>,
        finish: impl FnOnce() -> Result<T> + Send + 'static,
    ) -> GpuCompletion<T> {
        GpuCompletion {
            device,
            index,
            what,
            finished,
            finish: Mutex::new(Some(Box::new(finish))),
            outcome: CompletionCell::new(),
        }
    }

    /// Waits, up to [`CALLBACK_GRACE`], for the flag of work the device already retired:
    /// wgpu runs a submission's callbacks on whichever thread polls, so another thread's poll
    /// may have retired this work and still be running the callback that raises the flag.
    fn await_callback_elsewhere(&self) -> Result<()> {
        let start = Instant::now();
        while !self.finished.load(Ordering::Acquire) && start.elapsed() < CALLBACK_GRACE {
            thread::sleep(Duration::from_micros(50));
            self.device.poll(&self.what)?;
        }
        Ok(())
    }

    /// Runs the final step once and stores its outcome (or `failure`, when the device failed
    /// first).
    fn settle(&self, failure: Option<strideweave::Error>) {
        let Some(finish) = self.finish.lock().take() else {
            return;
        };
        self.outcome.complete(match failure {
            Some(error) => Err(error),
            None => finish(),
        });
    }
}

impl<T: Clone + Send + Sync> ProviderCompletion<T> for GpuCompletion<T> {
    fn done(&self) -> bool {
        if self.outcome.done() {
            return true;
        }
        match self.device.poll(&self.what) {
            Err(error) => self.settle(Some(error)),
            Ok(()) if self.finished.load(Ordering::Acquire) => self.settle(None),
            Ok(()) => return false,
        }
        self.outcome.done()
    }

    fn wait(&self) -> Result<T> {
        if !self.outcome.done() {
            let mut waited = self.device.wait_for(&self.index, &self.what);
            if waited.is_ok() && !self.finished.load(Ordering::Acquire) {
                // A map callback may run on the poll after the one that retired the
                // submission.
                waited = self.device.wait_idle(&self.what);
            }
            if waited.is_ok() && !self.finished.load(Ordering::Acquire) {
                waited = self.await_callback_elsewhere();
            }
            let failure = match waited {
                Err(error) => Some(error),
                Ok(()) if self.finished.load(Ordering::Acquire) => None,
                Ok(()) => Some(strideweave::Error::Runtime(format!(
                    "GPU {}: the work to {} finished without signalling its completion",
                    self.device.adapter().name,
                    self.what
                ))),
            };
            self.settle(failure);
        }
        self.outcome.wait()
    }
}

impl<T> fmt::Debug for GpuCompletion<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuCompletion")
            .field("what", &self.what)
            .field("outcome", &self.outcome)
            .finish_non_exhaustive()
    }
}
