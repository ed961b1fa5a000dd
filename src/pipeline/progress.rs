//! Progress of a run as a person sees it: a bar on a terminal, a plain line every few seconds
//! otherwise, counting instances computed, taken from the store, and failed or not run; and the
//! line an interrupt prints ([`interrupted`]). Apart from the executor, which only ticks it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// Progress over all instances: a bar on a terminal, a plain line every few seconds otherwise.
/// Failures count too, so a stage that fails on everything is seen while it runs.
pub struct Progress {
    bar: Option<ProgressBar>,
    total: usize,
    pub(super) done: AtomicUsize,
    /// How many of `done` came from the instance store.
    cached: AtomicUsize,
    /// Instances that failed, or were not run (an input failed, or their stage stopped).
    failed: AtomicUsize,
    last_line: Mutex<Instant>,
    label: String,
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
    pub fn new(label: &str, total: usize, terminal: bool) -> Self {
        let bar = terminal.then(|| {
            let b = ProgressBar::new(total as u64);
            b.set_style(
                ProgressStyle::with_template(
                    "{prefix} [{bar:30}] {pos}/{len} instances ({msg}), ETA {eta}",
                )
                .expect("static template")
                .progress_chars("=> "),
            );
            b.set_prefix(label.to_string());
            b.set_message("0 from the store");
            b
        });
        Progress {
            bar,
            total,
            done: AtomicUsize::new(0),
            cached: AtomicUsize::new(0),
            failed: AtomicUsize::new(0),
            last_line: Mutex::new(Instant::now()),
            label: label.to_string(),
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
        self.show();
    }

    /// One more instance failed, or was not run (an input failed, its stage stopped).
    pub(super) fn tick_failed(&self) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        self.show();
    }

    fn show(&self) {
        let done = self.done.load(Ordering::Relaxed);
        let hits = self.cached.load(Ordering::Relaxed);
        let failed = self.failed.load(Ordering::Relaxed);
        let failures = if failed > 0 {
            format!(", {failed} failed or not run")
        } else {
            String::new()
        };
        match &self.bar {
            Some(b) => {
                b.set_message(format!("{hits} from the store{failures}"));
                b.set_position((done + failed) as u64);
            }
            None => {
                let mut last = self.last_line.lock().unwrap_or_else(|e| e.into_inner());
                if last.elapsed() >= Duration::from_secs(5) || done + failed == self.total {
                    *last = Instant::now();
                    tracing::info!(
                        "{}: {}/{} instances ({} computed, {hits} from the store{failures})",
                        self.label,
                        done + failed,
                        self.total,
                        done - hits
                    );
                }
            }
        }
    }

    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
