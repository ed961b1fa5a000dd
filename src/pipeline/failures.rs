//! Failures as they happen: each stage's first failure is printed the moment it occurs (with
//! what the program printed), later ones with the same message are counted, not repeated, and a
//! stage that keeps failing is stopped instead of being run to its last instance.
//!
//! Why: a run reported failures only when it ended. A systematically broken program burned
//! ten minutes with no output, and a stage of 100 instances that all failed the same way
//! printed 100 identical messages at the end. A researcher needs the first failure at once,
//! the count of the others, and a run that gives up on a stage that cannot succeed.
//!
//! One rule decides when a stage stops ([`MaxFailures`]); one place prints ([`Failures`]).
//! The engine tells it every failure and success; it never decides anything about the
//! instances itself.

use std::sync::Mutex;

/// When a stage stops running its instances (`--max-failures`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MaxFailures {
    /// Stop a stage whose first [`AUTO_FIRST`] finished instances all failed: a program that
    /// fails on every one of them is broken, not unlucky. A stage that succeeded once runs on.
    #[default]
    Auto,
    /// Stop a stage at its N-th failure (N ≥ 1).
    At(usize),
    /// Never stop a stage (`--max-failures all`).
    Never,
}

/// See [`MaxFailures::Auto`].
pub(crate) const AUTO_FIRST: usize = 5;

impl MaxFailures {
    /// `--max-failures`'s value: a count ≥ 1, `auto` or `all`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s.trim() {
            "auto" => Ok(MaxFailures::Auto),
            "all" => Ok(MaxFailures::Never),
            t => match t.parse::<usize>() {
                Ok(n) if n >= 1 => Ok(MaxFailures::At(n)),
                _ => Err(format!(
                    "`{s}` is not a number of failures: give a count ≥ 1 (stop a stage at its N-th failed instance), `auto` (stop a stage whose first {AUTO_FIRST} instances all failed; the default) or `all` (never stop)"
                )),
            },
        }
    }

    /// Whether a stage with these counts stops.
    fn stops(self, failed: usize, succeeded: usize) -> bool {
        match self {
            MaxFailures::Auto => succeeded == 0 && failed >= AUTO_FIRST,
            MaxFailures::At(n) => failed >= n,
            MaxFailures::Never => false,
        }
    }

    /// Why a stage stopped, as the end of a sentence.
    fn why(self, failed: usize) -> String {
        match self {
            MaxFailures::Auto => format!(
                "its first {failed} instances all failed (give --max-failures N to run more, or --max-failures all)"
            ),
            _ => format!("{failed} of its instances failed (--max-failures {failed})"),
        }
    }
}

/// How many distinct messages of one stage are printed in full as they happen; later ones are
/// counted and listed by their first line at the end.
const SHOWN: usize = 3;

/// How many instances the closing list names per message; the rest are counted.
const NAMED: usize = 3;

/// Failures of a run, per stage.
pub(crate) struct Failures {
    pipeline: String,
    limit: MaxFailures,
    stages: Vec<Mutex<Stage>>,
    names: Vec<String>,
}

#[derive(Default)]
struct Stage {
    succeeded: usize,
    failed: usize,
    /// Distinct messages in the order they first came, each with the first [`NAMED`]
    /// instances that gave it and how many gave it.
    groups: Vec<(String, Vec<String>, usize)>,
    stopped: bool,
    /// Its failures when it stopped.
    stopped_at: usize,
    /// Instances not run because the stage stopped.
    not_run: usize,
}

impl Failures {
    pub fn new(pipeline: &str, stages: Vec<String>, limit: MaxFailures) -> Self {
        Failures {
            pipeline: pipeline.to_string(),
            limit,
            stages: stages.iter().map(|_| Mutex::default()).collect(),
            names: stages,
        }
    }

    fn stage(&self, si: usize) -> std::sync::MutexGuard<'_, Stage> {
        self.stages[si].lock().unwrap_or_else(|e| e.into_inner())
    }

    /// An instance of stage `si` was computed.
    pub fn succeeded(&self, si: usize) {
        self.stage(si).succeeded += 1;
    }

    /// Whether stage `si` stopped: its instances that are not in the store are not run.
    pub fn stopped(&self, si: usize) -> bool {
        self.stage(si).stopped
    }

    /// An instance of stage `si` was not run because the stage stopped.
    pub fn not_run(&self, si: usize) {
        self.stage(si).not_run += 1;
    }

    /// Instance `label` of stage `si` failed with `message`: printed now if no instance of
    /// the stage failed with it before (up to [`SHOWN`] messages), counted otherwise; stops
    /// the stage when the limit says so. `quiet`: counted, never printed (a dataset that is
    /// not on this machine: the caller says so once).
    pub fn failed(&self, si: usize, label: &str, message: &str, quiet: bool) {
        let mut st = self.stage(si);
        st.failed += 1;
        let name = &self.names[si];
        let at = if label.is_empty() {
            String::new()
        } else {
            format!(" instance {{{label}}}")
        };
        match st.groups.iter_mut().find(|(m, _, _)| m == message) {
            Some(g) => {
                g.2 += 1;
                if g.1.len() < NAMED {
                    g.1.push(label.to_string());
                }
            }
            None => {
                st.groups
                    .push((message.to_string(), vec![label.to_string()], 1));
                let n = st.groups.len();
                if !quiet && n <= SHOWN {
                    let other = if n > 1 { " (another message)" } else { "" };
                    tracing::error!(
                        "pipeline `{}`, stage `{name}`{at} failed{other}: {message}",
                        self.pipeline
                    );
                } else if !quiet && n == SHOWN + 1 {
                    tracing::error!(
                        "pipeline `{}`, stage `{name}`: more instances fail with other messages (listed at the end)",
                        self.pipeline
                    );
                }
            }
        }
        if !st.stopped && self.limit.stops(st.failed, st.succeeded) {
            st.stopped = true;
            st.stopped_at = st.failed;
            if !quiet {
                tracing::error!(
                    "pipeline `{}`, stage `{name}` stopped: {}; its other instances are not run",
                    self.pipeline,
                    self.limit.why(st.failed)
                );
            }
        }
    }

    /// How many instances failed, in all.
    pub fn count(&self) -> usize {
        (0..self.stages.len()).map(|si| self.stage(si).failed).sum()
    }

    /// One line per stage with a failure: how many failed, how many with each message and
    /// which (the first [`NAMED`] instances, then the count of the rest), and how many were
    /// not run because it stopped.
    pub fn summary(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (si, name) in self.names.iter().enumerate() {
            let st = self.stage(si);
            if st.failed == 0 {
                continue;
            }
            let what = match st.groups.as_slice() {
                [_] if st.failed > 1 => ", all with the same output".to_string(),
                [_] => String::new(),
                groups => {
                    let parts: Vec<String> = groups
                        .iter()
                        .map(|(message, labels, n)| {
                            format!("{n} with `{}`{}", gist(message), which(labels, *n))
                        })
                        .collect();
                    format!(": {}", parts.join(", "))
                }
            };
            let stopped = if st.stopped {
                format!(
                    "; stopped, {} instance(s) not run: {}",
                    st.not_run,
                    self.limit.why(st.stopped_at)
                )
            } else {
                String::new()
            };
            out.push(format!(
                "stage `{name}`: {} instance(s) failed{what}{stopped}",
                st.failed
            ));
        }
        out
    }
}

/// The instances of one message: ` ({x=1}, {x=2} and 5 more)`; nothing for failures of a
/// whole stage (no instance label).
fn which(labels: &[String], n: usize) -> String {
    let named: Vec<String> = labels
        .iter()
        .filter(|l| !l.is_empty())
        .map(|l| format!("{{{l}}}"))
        .collect();
    if named.is_empty() {
        return String::new();
    }
    let rest = n - labels.len();
    let more = if rest > 0 {
        format!(" and {rest} more")
    } else {
        String::new()
    };
    format!(" ({}{more})", named.join(", "))
}

/// A message on one line, cut short: its lines joined by ` | `, empty ones left out.
fn gist(message: &str) -> String {
    let joined: Vec<&str> = message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    crate::text::brief(&joined.join(" | "), 160)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_stops_a_stage_only_while_it_never_succeeded() {
        let f = Failures::new("p", vec!["a".into(), "b".into()], MaxFailures::Auto);
        for _ in 0..AUTO_FIRST - 1 {
            f.failed(0, "x=1", "boom", true);
        }
        assert!(!f.stopped(0));
        f.failed(0, "x=2", "boom", true);
        assert!(f.stopped(0));
        // A stage that succeeded once runs on, however many fail after.
        f.succeeded(1);
        for _ in 0..10 * AUTO_FIRST {
            f.failed(1, "x=1", "boom", true);
        }
        assert!(!f.stopped(1));
    }

    #[test]
    fn a_limit_stops_at_that_failure_and_all_never_stops() {
        let f = Failures::new("p", vec!["a".into()], MaxFailures::At(2));
        f.succeeded(0);
        f.failed(0, "", "m", true);
        assert!(!f.stopped(0));
        f.failed(0, "", "m", true);
        assert!(f.stopped(0));
        let f = Failures::new("p", vec!["a".into()], MaxFailures::Never);
        for _ in 0..1000 {
            f.failed(0, "", "m", true);
        }
        assert!(!f.stopped(0));
    }

    #[test]
    fn identical_messages_are_counted_once_and_the_summary_says_how_many() {
        let f = Failures::new("p", vec!["a".into()], MaxFailures::Never);
        for i in 0..38 {
            f.failed(0, &format!("k={i}"), "exited with status 3\nboom", true);
        }
        f.failed(0, "k=99", "timed out", true);
        f.not_run(0);
        let s = f.summary();
        assert_eq!(s.len(), 1);
        assert_eq!(
            s[0],
            "stage `a`: 39 instance(s) failed: 38 with `exited with status 3 | boom` ({k=0}, {k=1}, {k=2} and 35 more), 1 with `timed out` ({k=99})"
        );
        assert_eq!(f.count(), 39);
        let f = Failures::new("p", vec!["a".into()], MaxFailures::Auto);
        for i in 0..7 {
            f.failed(0, &format!("k={i}"), "boom", true);
        }
        f.not_run(0);
        assert_eq!(
            f.summary(),
            [format!("stage `a`: 7 instance(s) failed, all with the same output; stopped, 1 instance(s) not run: its first {AUTO_FIRST} instances all failed (give --max-failures N to run more, or --max-failures all)")]
        );
    }

    #[test]
    fn the_flag_takes_counts_auto_and_all_and_refuses_the_rest() {
        assert_eq!(MaxFailures::parse("3"), Ok(MaxFailures::At(3)));
        assert_eq!(MaxFailures::parse("auto"), Ok(MaxFailures::Auto));
        assert_eq!(MaxFailures::parse("all"), Ok(MaxFailures::Never));
        for bad in ["0", "-1", "x", ""] {
            let e = MaxFailures::parse(bad).unwrap_err();
            assert!(
                e.contains("count ≥ 1") && e.contains(&format!("`{bad}`")),
                "{e}"
            );
        }
    }
}
