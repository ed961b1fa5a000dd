//! How a run's progress is shown ([`dplab::pipeline::progress::Reporter`]): a bar on a
//! terminal; otherwise a plain line every few seconds (and when a pipeline is through), which
//! a log file or a Slurm job's output can hold. The engine only counts.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use dplab::pipeline::progress::{Counts, Reporter};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

/// The progress of the pipelines running now (they run at once: a bar, or a line, each).
pub struct Shown {
    terminal: bool,
    bars: MultiProgress,
    bar: Mutex<HashMap<String, ProgressBar>>,
    last_line: Mutex<HashMap<String, Instant>>,
}

impl Shown {
    /// A bar when `terminal`, lines otherwise.
    pub fn new(terminal: bool) -> Self {
        Shown {
            terminal,
            bars: MultiProgress::new(),
            bar: Mutex::default(),
            last_line: Mutex::default(),
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
        self.last_line
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(pipeline.to_string(), Instant::now());
        if !self.terminal {
            return;
        }
        let b = self.bars.add(ProgressBar::new(total as u64));
        b.set_style(
            ProgressStyle::with_template(
                "{prefix} [{bar:30}] {pos}/{len} instances ({msg}), ETA {eta}",
            )
            .expect("static template")
            .progress_chars("=> "),
        );
        b.set_prefix(pipeline.to_string());
        b.set_message("0 from the store");
        self.bar
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(pipeline.to_string(), b);
    }

    fn progressed(&self, pipeline: &str, c: Counts) {
        if let Some(b) = self
            .bar
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(pipeline)
        {
            b.set_message(message(c));
            b.set_position((c.done + c.failed) as u64);
            return;
        }
        let mut lines = self.last_line.lock().unwrap_or_else(|e| e.into_inner());
        let last = lines
            .entry(pipeline.to_string())
            .or_insert_with(Instant::now);
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

    fn finished(&self, pipeline: &str) {
        if let Some(b) = self
            .bar
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(pipeline)
        {
            b.finish_and_clear();
            self.bars.remove(&b);
        }
    }
}
