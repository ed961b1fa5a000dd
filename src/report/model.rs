//! What the page shows: the values the template renders, and what [`super::write`] returns.

use std::path::PathBuf;

use serde::Serialize;

use super::anchor;
use super::counts::Tally;
use crate::verdict::Verdict;

/// A pipeline the report expects (from `--pipelines`), whether or not it has results.
pub struct Expected {
    pub file: PathBuf,
    pub name: String,
    pub title: String,
    pub paper: String,
    pub item: String,
    pub description: String,
    /// Datasets it loads that are not on this machine.
    pub missing_data: Vec<String>,
}

/// What `write` did.
#[derive(Debug)]
pub struct Written {
    pub path: PathBuf,
    pub summary: Summary,
    /// Damage found in the results (each a clear sentence); the page shows it too.
    pub problems: Vec<String>,
}

#[derive(Serialize, Debug, Default, Clone)]
pub struct Summary {
    pub experiments: usize,
    pub with_results: usize,
    pub unavailable: usize,
    pub not_run: usize,
    pub damaged: usize,
    /// Printed numbers (of the papers the report reproduces) compared with ours.
    pub numbers: Tally,
    /// Verdicts of a benchmark compared with another tool's published ones (DP-Sniper's
    /// flags, derived from its logs): not numbers a paper prints, counted apart.
    pub benchmark: Tally,
    /// Findings the pipelines state about claims that are not printed numbers.
    pub findings: Tally,
    /// Whether an experiment names a paper: a reproduction report. Without one, no printed
    /// numbers are there to compare, and nothing speaks of them.
    pub reproduction: bool,
    /// Every printed number that differs, in page order.
    pub disagreements: Vec<Disagreement>,
    /// Every finding, in page order.
    pub finding_list: Vec<FindingRow>,
    /// Every audit row of the run, flagged ones first.
    pub audits: Vec<super::AuditRow>,
    /// How many of them are flagged (`violation`).
    pub flagged: usize,
    /// How many verdicts differ from what their stage expected (`expect:`; with none, any
    /// flag): what makes `dplab run` exit with status 4.
    pub unexpected: usize,
    /// Tables shown at the head of the Audits section (benchmarks of the audits).
    pub benchmarks: usize,
}

#[derive(Serialize, Debug, Clone)]
pub struct Disagreement {
    pub experiment: String,
    pub anchor: String,
    pub table: String,
    pub cell: String,
    pub ours: String,
    pub paper: String,
    pub verdict: Verdict,
    pub class: &'static str,
    /// The stated cause (explained), or where an unexplained value lies.
    pub note: String,
    /// Whether it is the first listed of its experiment's table (the list is grouped by table).
    pub first_of_table: bool,
}

/// A stated finding as the page shows it.
#[derive(Serialize, Debug, Clone)]
pub struct FindingRow {
    pub experiment: String,
    pub anchor: String,
    pub claim: String,
    pub found: String,
    pub verdict: Verdict,
    pub class: &'static str,
    pub why: String,
}

#[derive(Serialize)]
pub(super) struct Experiment {
    pub(super) id: String,
    pub(super) anchor: String,
    pub(super) title: String,
    pub(super) paper: String,
    pub(super) item: String,
    pub(super) description: String,
    /// ok | data not available | not run | damaged
    pub(super) status: &'static str,
    pub(super) message: String,
    pub(super) command: String,
    pub(super) figures: Vec<Figure>,
    pub(super) tables: Vec<TableView>,
    pub(super) findings: Vec<FindingRow>,
    pub(super) provenance: Vec<(String, String)>,
    pub(super) numbers: Tally,
    /// Its benchmark tables' verdicts ([`Summary::benchmark`]).
    pub(super) benchmark: Tally,
    pub(super) found: Tally,
    /// What was compared with the paper here, in words (the section's verdict line).
    pub(super) verdict_line: String,
}

#[derive(Serialize)]
pub(super) struct Figure {
    pub(super) src: String,
    pub(super) file: String,
    pub(super) problem: String,
}

#[derive(Serialize)]
pub(super) struct TableView {
    pub(super) stage: String,
    pub(super) title: String,
    pub(super) notes: String,
    pub(super) csv: String,
    pub(super) headers: Vec<String>,
    pub(super) rows: Vec<Vec<Cell>>,
    pub(super) total_rows: usize,
    /// The stage's Markdown, its heading left out, when its layout shows it (HTML).
    pub(super) markdown: String,
    /// The table in the paper's own arrangement, when its layout asks for it: then it is the
    /// table shown (each cell once) and `rows` is empty.
    pub(super) grid: Option<Pivot>,
    /// The stated causes of its differences, each once: verdict cells refer to them as `[k]`.
    pub(super) causes: Vec<String>,
    /// A frame with no table of its own (no Markdown, no verdicts: the data behind a figure),
    /// linked rather than shown.
    pub(super) data_only: bool,
    /// Shown at the head of the Audits section, its experiment's section linking to it (a
    /// benchmark of the audits: its layout says so).
    pub(super) in_audits: bool,
    pub(super) numbers: Tally,
    pub(super) problem: String,
}

#[derive(Serialize)]
pub(super) struct Pivot {
    /// Who printed the values (the legend's words).
    pub(super) printed_by: String,
    /// What "ours" is in each cell (the headline run).
    pub(super) ours: String,
    pub(super) headers: Vec<String>,
    pub(super) rows: Vec<Vec<PivotCell>>,
}

#[derive(Serialize, Clone)]
pub(super) struct PivotCell {
    pub(super) paper: String,
    pub(super) ours: String,
    pub(super) verdict: String,
    pub(super) note: String,
    pub(super) class: &'static str,
}

#[derive(Serialize, Clone)]
pub(super) struct Cell {
    pub(super) text: String,
    pub(super) class: &'static str,
    /// A number (right-aligned, never wrapped).
    pub(super) num: bool,
}

#[derive(Serialize)]
pub(super) struct Paper {
    pub(super) id: String,
    pub(super) experiments: Vec<(String, String, &'static str)>,
}

impl Experiment {
    /// An experiment shown without results (no data, not run, damaged): its name for a
    /// title until the caller fills in what it knows.
    pub(super) fn without_results(
        name: &str,
        status: &'static str,
        message: String,
        command: String,
    ) -> Self {
        Experiment {
            id: name.to_string(),
            anchor: anchor(name),
            title: name.to_string(),
            paper: String::new(),
            item: String::new(),
            description: String::new(),
            status,
            message,
            command,
            figures: vec![],
            tables: vec![],
            findings: vec![],
            provenance: vec![],
            numbers: Tally::default(),
            benchmark: Tally::default(),
            found: Tally::default(),
            verdict_line: String::new(),
        }
    }
}
