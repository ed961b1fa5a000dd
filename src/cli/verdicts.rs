//! Verdicts that speak up: a checking kind's instance (an audit) that flags what it checks,
//! or finds other than its stage expected, says so on stderr the moment it finishes, and the
//! run ends with its own exit status ([`super::exit::Failure::Unexpected`]) when any verdict
//! differs from its expectation. A flag that was expected (`expect: violation`: a
//! known-broken variant) is said, and counts as expected.

use std::sync::{Arc, Mutex};

use dplab::kind::Verdict;
use dplab::pipeline::progress::{Counts, Reporter};

/// Shows verdicts (a line, or a `verdict` event) and counts them, around the reporter that
/// shows the progress.
pub(crate) struct Verdicts {
    inner: Arc<dyn Reporter>,
    json: bool,
    seen: Mutex<Tally>,
}

/// What a run's verdicts came to.
#[derive(Default, Clone, Debug)]
pub(crate) struct Tally {
    pub checks: usize,
    pub flagged: usize,
    /// `pipeline: stage {instance}: line` of each verdict that differs from its expectation.
    pub unexpected: Vec<String>,
}

impl Verdicts {
    pub(crate) fn new(inner: Arc<dyn Reporter>, json: bool) -> Self {
        Verdicts {
            inner,
            json,
            seen: Mutex::new(Tally::default()),
        }
    }

    pub(crate) fn tally(&self) -> Tally {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Reporter for Verdicts {
    fn started(&self, pipeline: &str, total: usize) {
        self.inner.started(pipeline, total);
    }
    fn progressed(&self, pipeline: &str, counts: Counts) {
        self.inner.progressed(pipeline, counts);
    }
    fn finished(&self, pipeline: &str) {
        self.inner.finished(pipeline);
    }
    fn wants_instances(&self) -> bool {
        self.inner.wants_instances()
    }
    fn instance_started(&self, pipeline: &str, stage: &str, instance: &str) {
        self.inner.instance_started(pipeline, stage, instance);
    }
    fn instance_finished(
        &self,
        pipeline: &str,
        stage: &str,
        instance: &str,
        seconds: f64,
        from_store: bool,
    ) {
        self.inner
            .instance_finished(pipeline, stage, instance, seconds, from_store);
    }
    fn instance_failed(&self, pipeline: &str, stage: &str, instance: &str, message: &str) {
        self.inner
            .instance_failed(pipeline, stage, instance, message);
    }
    fn verdict(&self, pipeline: &str, stage: &str, instance: &str, v: &Verdict) {
        let at = if instance.is_empty() {
            format!("{pipeline}: {stage}")
        } else {
            format!("{pipeline}: {stage} {{{instance}}}")
        };
        {
            let mut t = self.seen.lock().unwrap_or_else(|e| e.into_inner());
            t.checks += 1;
            t.flagged += usize::from(v.flagged);
            if v.unexpected {
                t.unexpected.push(format!("{at}: {}", v.line));
            }
        }
        if self.json {
            super::events::emit(
                "verdict",
                serde_json::json!({
                    "pipeline": pipeline,
                    "stage": stage,
                    "instance": instance,
                    "flagged": v.flagged,
                    "unexpected": v.unexpected,
                    "line": v.line,
                }),
            );
        } else if v.flagged || v.unexpected {
            let what = if v.unexpected {
                "UNEXPECTED"
            } else {
                "expected"
            };
            errln!("{at}: {} [{what}]", v.line);
        }
        self.inner.verdict(pipeline, stage, instance, v);
    }
}
