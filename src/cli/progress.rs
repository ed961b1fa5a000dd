//! How a run's progress is shown ([`dplab::pipeline::progress::Reporter`]): a bar on a
//! terminal; otherwise a plain line every few seconds (and when a pipeline is through), which
//! a log file or a Slurm job's output can hold. The engine only counts.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use dplab::pipeline::progress::{Counts, Reporter};
use indicatif::{ProgressBar, ProgressStyle};

/// The progress of the pipeline running now (pipelines run one after another).
pub struct Shown {
    terminal: bool,
    bar: Mutex<Option<ProgressBar>>,
    last_line: Mutex<Instant>,
}

impl Shown {
    /// A bar when `terminal`, lines otherwise.
    pub fn new(terminal: bool) -> Self {
        Shown {
            terminal,
            bar: Mutex::new(None),
            last_line: Mutex::new(Instant::now()),
        }
    }
}

/// "3 from the store, 1 failed or not run".
fn message(c: Counts) -> String {
    let failures = if c.failed > 0 {
        format!(", {} failed or not run", c.failed)
    } else {
        String::new()
    };
    format!("{} from the store{failures}", c.from_store)
}

impl Reporter for Shown {
    fn started(&self, pipeline: &str, total: usize) {
        *self.last_line.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
        if !self.terminal {
            return;
        }
        let b = ProgressBar::new(total as u64);
        b.set_style(
            ProgressStyle::with_template(
                "{prefix} [{bar:30}] {pos}/{len} instances ({msg}), ETA {eta}",
            )
            .expect("static template")
            .progress_chars("=> "),
        );
        b.set_prefix(pipeline.to_string());
        b.set_message("0 from the store");
        *self.bar.lock().unwrap_or_else(|e| e.into_inner()) = Some(b);
    }

    fn progressed(&self, pipeline: &str, c: Counts) {
        if let Some(b) = self.bar.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            b.set_message(message(c));
            b.set_position((c.done + c.failed) as u64);
            return;
        }
        let mut last = self.last_line.lock().unwrap_or_else(|e| e.into_inner());
        if last.elapsed() >= Duration::from_secs(5) || c.done + c.failed == c.total {
            *last = Instant::now();
            tracing::info!(
                "{pipeline}: {}/{} instances ({} computed, {})",
                c.done + c.failed,
                c.total,
                c.done - c.from_store,
                message(c)
            );
        }
    }

    fn finished(&self, _: &str) {
        if let Some(b) = self.bar.lock().unwrap_or_else(|e| e.into_inner()).take() {
            b.finish_and_clear();
        }
    }
}
