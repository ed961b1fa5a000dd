//! Progress of a run: the engine counts instances computed, taken from the store, and failed
//! or not run, and tells a [`Reporter`] after each — the command line draws it (a bar on a
//! terminal, a line every few seconds otherwise), as cargo-nextest's runner hands events to
//! its reporter. Also the line an interrupt prints ([`interrupted`]). Apart from the
//! executor, which only ticks it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// A pipeline's counts, as a [`Reporter`] is told them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Instances the run goes through.
    pub total: usize,
    /// Done: computed, or taken from the store.
    pub done: usize,
    /// How many of `done` came from the instance store.
    pub from_store: usize,
    /// Failed, or not run (an input failed, or their stage stopped).
    pub failed: usize,
}

/// Whoever shows a run's progress. Called from the worker threads, after every instance.
pub trait Reporter: Send + Sync {
    /// A pipeline starts, with `total` instances to go through.
    fn started(&self, pipeline: &str, total: usize);
    /// The counts after one more instance.
    fn progressed(&self, pipeline: &str, counts: Counts);
    /// The pipeline's instances are all through.
    fn finished(&self, pipeline: &str);
    /// Whether it is told of each instance (the `instance_*` calls; an instance's label is a
    /// string made for each, so the engine makes none for a reporter that does not ask).
    fn wants_instances(&self) -> bool {
        false
    }
    /// An instance starts computing (one taken from the store does not start).
    fn instance_started(&self, _pipeline: &str, _stage: &str, _instance: &str) {}
    /// An instance is done: computed in `seconds`, or taken from the store.
    fn instance_finished(
        &self,
        _pipeline: &str,
        _stage: &str,
        _instance: &str,
        _seconds: f64,
        _from_store: bool,
    ) {
    }
    /// An instance failed with `message`.
    fn instance_failed(&self, _pipeline: &str, _stage: &str, _instance: &str, _message: &str) {}
    /// An instance of a checking kind is done, computed or taken from the store, with its
    /// verdict ([`crate::kind::KindInfo::verdict`]); told whatever `wants_instances` says.
    fn verdict(
        &self,
        _pipeline: &str,
        _stage: &str,
        _instance: &str,
        _verdict: &crate::kind::Verdict,
    ) {
    }
}

/// A run's counters, each instance told to the [`Reporter`]. Failures count too, so a stage
/// that fails on everything is seen while it runs.
pub struct Progress {
    reporter: Arc<dyn Reporter>,
    label: String,
    total: usize,
    pub(super) done: AtomicUsize,
    cached: AtomicUsize,
    failed: AtomicUsize,
}

/// This process's counts over every pipeline it ran, for the line an interrupt prints
/// ([`interrupted`]): the signal handler has no run to ask.
static COMPUTED: AtomicUsize = AtomicUsize::new(0);
pub(super) static RUNNING: AtomicUsize = AtomicUsize::new(0);
pub(super) static STORING: AtomicBool = AtomicBool::new(false);
/// Set by [`interrupted`]: workers take no more instances, and the failures of those the
/// signal ended are not reported as the programs' (they were stopped, not broken).
pub(super) static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// What an interrupt leaves, for the signal handler to print before the process dies: how
/// many instances this run computed (and whether the store has them) and how many were
/// running (those are lost).
///
/// Called by the signal handler before it stops the programs: from then on, no instance
/// starts and no failure is reported.
pub fn interrupted() -> String {
    INTERRUPTED.store(true, Ordering::SeqCst);
    let computed = COMPUTED.load(Ordering::Relaxed);
    let running = RUNNING.load(Ordering::Relaxed);
    let kept = if STORING.load(Ordering::Relaxed) {
        "in the store: a run again computes only the rest"
    } else {
        "not kept (--no-store)"
    };
    format!(
        "interrupted: {computed} instance(s) computed by this run, {kept}; {running} running were stopped"
    )
}

impl Progress {
    pub fn new(label: &str, total: usize, reporter: Arc<dyn Reporter>) -> Self {
        reporter.started(label, total);
        Progress {
            reporter,
            label: label.to_string(),
            total,
            done: AtomicUsize::new(0),
            cached: AtomicUsize::new(0),
            failed: AtomicUsize::new(0),
        }
    }

    /// One more instance done: computed, or taken from the store (`cached`).
    pub(super) fn tick(&self, cached: bool) {
        if !cached {
            COMPUTED.fetch_add(1, Ordering::Relaxed);
        }
        self.cached
            .fetch_add(usize::from(cached), Ordering::Relaxed);
        self.done.fetch_add(1, Ordering::Relaxed);
        self.tell();
    }

    /// One more instance failed, or was not run (an input failed, its stage stopped).
    pub(super) fn tick_failed(&self) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        self.tell();
    }

    fn tell(&self) {
        self.reporter.progressed(
            &self.label,
            Counts {
                total: self.total,
                done: self.done.load(Ordering::Relaxed),
                from_store: self.cached.load(Ordering::Relaxed),
                failed: self.failed.load(Ordering::Relaxed),
            },
        );
    }

    pub fn finish(&self) {
        self.reporter.finished(&self.label);
    }

    /// Whether the reporter is told of each instance.
    pub(super) fn per_instance(&self) -> bool {
        self.reporter.wants_instances()
    }

    pub(super) fn instance_started(&self, stage: &str, instance: &str) {
        self.reporter.instance_started(&self.label, stage, instance);
    }

    pub(super) fn instance_finished(
        &self,
        stage: &str,
        instance: &str,
        seconds: f64,
        from_store: bool,
    ) {
        self.reporter
            .instance_finished(&self.label, stage, instance, seconds, from_store);
    }

    pub(super) fn verdict(&self, stage: &str, instance: &str, verdict: &crate::kind::Verdict) {
        self.reporter.verdict(&self.label, stage, instance, verdict);
    }

    pub(super) fn instance_failed(&self, stage: &str, instance: &str, message: &str) {
        self.reporter
            .instance_failed(&self.label, stage, instance, message);
    }
}
