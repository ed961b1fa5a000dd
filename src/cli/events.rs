//! `--message-format json`: what a program (the Python API, a notebook, a CI script) reads of a
//! command, as cargo and nextest hand it theirs — one JSON object per line on stdout, each with
//! `"format": 1` and its `"event"`. Human text goes to stderr meanwhile ([`crate::cli::out`]
//! sends `out!` there), and no progress bar is drawn. The events, their fields and when each
//! comes are listed in the book (docs/src/python.md) and pinned by a snapshot test
//! (`tests/it/events.rs`); a change to one is a change of `format`.
//!
//! Why a format of our own and not human text: a reader that parsed `1215 instances →
//! results/x` would break at the next change of wording, and could not tell a failure's message
//! from the line that names it.

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use dplab::pipeline::progress::{Counts, Reporter};
use serde_json::{json, Value};

/// The version of the events' format (`"format"` of every event).
pub(crate) const FORMAT: u32 = 1;

static ON: AtomicBool = AtomicBool::new(false);

/// Turns the events on for this command (`--message-format json`).
pub(crate) fn turn_on() {
    ON.store(true, Ordering::Relaxed);
}

/// Whether this command speaks in events.
pub(crate) fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Writes event `event` with the fields of `fields` (an object) as one line on stdout; nothing
/// when the events are off. A reader that went away ends nothing: its events are dropped.
pub(crate) fn emit(event: &str, fields: Value) {
    if !on() {
        return;
    }
    let mut obj = serde_json::Map::new();
    obj.insert("format".into(), json!(FORMAT));
    obj.insert("event".into(), json!(event));
    if let Value::Object(m) = fields {
        obj.extend(m);
    }
    let line = Value::Object(obj).to_string();
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}

/// The `error` events of a pipeline's located errors.
pub(crate) fn spec_errors(errs: &[dplab::pipeline::spec::SpecError]) {
    for e in errs {
        emit(
            "error",
            json!({
                "file": e.file.display().to_string(),
                "line": e.pos.map(|p| p.line),
                "col": e.pos.map(|p| p.col),
                "message": e.message,
                "hint": e.hint,
            }),
        );
    }
}

/// How often a `progress` event is sent at most (the last one of a pipeline always is).
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

/// The run's [`Reporter`] in events: each instance started, finished or failed, and the counts
/// every [`PROGRESS_EVERY`].
pub(crate) struct Events {
    /// Per pipeline (they run at once), when its last progress event went out.
    last: Mutex<std::collections::HashMap<String, Instant>>,
}

impl Events {
    pub(crate) fn new() -> Self {
        Events {
            last: Mutex::default(),
        }
    }
}

fn counts(pipeline: &str, c: Counts) -> Value {
    json!({
        "pipeline": pipeline,
        "total": c.total,
        "done": c.done,
        "from_store": c.from_store,
        "failed": c.failed,
    })
}

impl Reporter for Events {
    fn started(&self, pipeline: &str, _total: usize) {
        self.last
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(pipeline);
    }

    fn progressed(&self, pipeline: &str, c: Counts) {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let due = last
            .get(pipeline)
            .is_none_or(|t| t.elapsed() >= PROGRESS_EVERY);
        if due || c.done + c.failed == c.total {
            last.insert(pipeline.to_string(), Instant::now());
            emit("progress", counts(pipeline, c));
        }
    }

    fn finished(&self, _pipeline: &str) {}

    fn wants_instances(&self) -> bool {
        true
    }

    fn instance_started(&self, pipeline: &str, stage: &str, instance: &str) {
        emit(
            "instance_started",
            json!({"pipeline": pipeline, "stage": stage, "instance": instance}),
        );
    }

    fn instance_finished(
        &self,
        pipeline: &str,
        stage: &str,
        instance: &str,
        seconds: f64,
        from_store: bool,
    ) {
        emit(
            "instance_finished",
            json!({
                "pipeline": pipeline,
                "stage": stage,
                "instance": instance,
                "seconds": seconds,
                "from_store": from_store,
            }),
        );
    }

    fn instance_failed(&self, pipeline: &str, stage: &str, instance: &str, message: &str) {
        emit(
            "instance_failed",
            json!({
                "pipeline": pipeline,
                "stage": stage,
                "instance": instance,
                "message": message,
                "log": Value::Null,
            }),
        );
    }
}
