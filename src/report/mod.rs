//! `dplab report RESULTS_DIR`: one HTML page people read in a browser — for every experiment,
//! what the paper claims, what we got, and where and why the two differ.
//!
//! The page is `RESULTS_DIR/index.html`, self-contained and offline: styles inline, no script,
//! figures referenced by relative paths (`<pipeline>/<figure>.svg`) so it works from the file
//! system. It is built from the results directories alone (manifests, table frames and their
//! layouts, figures), with the HTML from a template ([`minijinja`], escaping on) and the
//! descriptions from Markdown ([`pulldown_cmark`], raw HTML shown as text). A results directory
//! is input like any other: files are read only when they are regular files listed in the
//! manifest with the size and sha256 it recorded, and nothing is written but `index.html`.
//!
//! The summary counts what was compared with the paper: printed numbers, from the verdict
//! columns of the table frames (`verdict_<c>` of `report.table`, `verdict` of
//! `report.verdict`), and the pipelines' stated findings (`findings:` in the manifest). Both
//! speak one vocabulary ([`Verdict`]: agrees, within CI, explained, unexplained); a cell whose
//! word is not a verdict (not run, no data, side by side) was not compared. The tables'
//! colours, the counts and the list of differences are all made from one reading of those
//! columns ([`judgements`]), so they cannot disagree.

mod markdown;
pub mod read;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::stages::report::{format_column, format_ours};
use crate::verdict::{Finding, Verdict, NOT_COMPARED};
use read::{Csv, Layout, Manifest, Outputs};

const TEMPLATE: &str = include_str!("../../templates/report.html");
/// Rows of one table shown on the page (the CSV beside it has them all).
const MAX_SHOWN_ROWS: usize = 400;
/// Largest figure referenced (checked against its manifest hash before it is).
const MAX_FIGURE: u64 = 256 << 20;

/// The CSS class of a verdict: one colour per word, everywhere on the page.
pub fn class(v: Verdict) -> &'static str {
    match v {
        Verdict::Agrees => "v-agree",
        Verdict::WithinCi => "v-within",
        Verdict::Explained => "v-explained",
        Verdict::Unexplained => "v-unexplained",
    }
}

/// How many compared things got each verdict.
#[derive(Serialize, Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    pub compared: usize,
    /// `agrees` + `within CI`.
    pub agree: usize,
    pub agrees: usize,
    pub within_ci: usize,
    /// `explained` + `unexplained`.
    pub differ: usize,
    pub explained: usize,
    pub unexplained: usize,
}

impl Tally {
    pub fn add(&mut self, v: Verdict) {
        self.compared += 1;
        let slot = match v {
            Verdict::Agrees => &mut self.agrees,
            Verdict::WithinCi => &mut self.within_ci,
            Verdict::Explained => &mut self.explained,
            Verdict::Unexplained => &mut self.unexplained,
        };
        *slot += 1;
        if v.agrees() {
            self.agree += 1;
        } else {
            self.differ += 1;
        }
    }

    /// `4 printed numbers: 1 agree, 2 explained, 1 unexplained` (`one`, `many`: the name of
    /// the things).
    pub fn text(&self, one: &str, many: &str) -> String {
        let what = if self.compared == 1 { one } else { many };
        let parts: Vec<String> = [
            (self.agrees, "agree"),
            (self.within_ci, "within CI"),
            (self.explained, "explained"),
            (self.unexplained, "unexplained"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, w)| format!("{n} {w}"))
        .collect();
        if parts.is_empty() {
            format!("{} {what}", self.compared)
        } else {
            format!("{} {what}: {}", self.compared, parts.join(", "))
        }
    }

    fn merge(&mut self, o: &Tally) {
        self.compared += o.compared;
        self.agree += o.agree;
        self.agrees += o.agrees;
        self.within_ci += o.within_ci;
        self.differ += o.differ;
        self.explained += o.explained;
        self.unexplained += o.unexplained;
    }
}

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
    /// Printed numbers compared with ours.
    pub numbers: Tally,
    /// Findings the pipelines state about claims that are not printed numbers.
    pub findings: Tally,
    /// Every printed number that differs, in page order.
    pub disagreements: Vec<Disagreement>,
    /// Every finding, in page order.
    pub finding_list: Vec<FindingRow>,
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
struct Experiment {
    id: String,
    anchor: String,
    title: String,
    paper: String,
    item: String,
    description: String,
    /// ok | data not available | not run | damaged
    status: &'static str,
    message: String,
    command: String,
    figures: Vec<Figure>,
    tables: Vec<TableView>,
    findings: Vec<FindingRow>,
    provenance: Vec<(String, String)>,
    numbers: Tally,
    found: Tally,
    /// What was compared with the paper here, in words (the section's verdict line).
    verdict_line: String,
}

#[derive(Serialize)]
struct Figure {
    src: String,
    file: String,
    problem: String,
}

#[derive(Serialize)]
struct TableView {
    stage: String,
    title: String,
    notes: String,
    csv: String,
    headers: Vec<String>,
    rows: Vec<Vec<Cell>>,
    total_rows: usize,
    /// The table in the paper's own layout (the stage's Markdown), when it has one.
    paper_layout: String,
    /// A `report.verdict` table as the thesis prints it: one row per dataset and error, one
    /// column per σ, the thesis's value above ours in each cell. When there is one, it is
    /// the table shown (each cell once) and `rows` is empty.
    thesis: Option<Pivot>,
    /// The stated causes of its differences, each once: verdict cells refer to them as `[k]`.
    causes: Vec<String>,
    /// A frame with no table of its own (no Markdown, no verdicts: the data behind a figure),
    /// linked rather than shown.
    data_only: bool,
    numbers: Tally,
    problem: String,
}

#[derive(Serialize)]
struct Pivot {
    /// What "ours" is in each cell (the headline private run's column).
    ours: String,
    headers: Vec<String>,
    rows: Vec<Vec<PivotCell>>,
}

#[derive(Serialize, Clone)]
struct PivotCell {
    paper: String,
    ours: String,
    verdict: String,
    note: String,
    class: &'static str,
}

#[derive(Serialize, Clone)]
struct Cell {
    text: String,
    class: &'static str,
    /// A number (right-aligned, never wrapped).
    num: bool,
}

#[derive(Serialize)]
struct Paper {
    id: String,
    experiments: Vec<(String, String, &'static str)>,
}

/// A path segment as it goes into a relative URL: everything but unreserved bytes encoded
/// (`%` of an instance file name included).
fn url_segment(s: &str) -> String {
    const SET: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'.')
        .remove(b'_')
        .remove(b'~');
    percent_encoding::utf8_percent_encode(s, SET).to_string()
}

fn anchor(name: &str) -> String {
    format!(
        "exp-{}",
        name.chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            })
            .collect::<String>()
    )
}

/// Writes `results/index.html` and returns what it holds. Errors only when the page cannot be
/// written (or `results` is not a directory); damage inside is in [`Written::problems`].
pub fn write(results: &Path, expected: &[Expected]) -> Result<Written, String> {
    let meta = std::fs::metadata(results).map_err(|e| format!("{}: {e}", results.display()))?;
    if !meta.is_dir() {
        return Err(format!("{}: not a directory", results.display()));
    }
    let (html, summary, problems) = build(results, expected)?;
    let path = results.join("index.html");
    place(&path, html.as_bytes())?;
    Ok(Written {
        path,
        summary,
        problems,
    })
}

/// Writes under a fresh temporary name (never following a link that waits there) and renames
/// over `path`: a rename replaces a link at `path` instead of writing through it.
fn place(path: &Path, bytes: &[u8]) -> Result<(), String> {
    use std::io::Write as _;
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(".index.html.{}.tmp", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(|e| format!("{}: {e}", tmp.display()))?;
    let done = f
        .write_all(bytes)
        .and_then(|()| f.sync_all())
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = done {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!("writing {}: {e}", path.display()));
    }
    Ok(())
}

/// The page, its summary and the damage found.
pub fn build(
    results: &Path,
    expected: &[Expected],
) -> Result<(String, Summary, Vec<String>), String> {
    let mut problems = Vec::new();
    let mut found = Vec::new();
    let mut experiments: BTreeMap<String, Experiment> = BTreeMap::new();
    let mut entries: Vec<(String, PathBuf)> = Vec::new();
    let dir = std::fs::read_dir(results).map_err(|e| format!("{}: {e}", results.display()))?;
    for e in dir {
        let e = e.map_err(|e| format!("{}: {e}", results.display()))?;
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let Ok(t) = e.file_type() else { continue };
        if t.is_symlink() {
            problems.push(format!(
                "{}: a symbolic link (results directories are real directories; not followed)",
                e.path().display()
            ));
            continue;
        }
        if !t.is_dir() {
            continue;
        }
        if let Some(p) =
            crate::pipeline::spec::name_problem(&name, crate::pipeline::spec::NameKind::Pipeline)
        {
            problems.push(format!("{}: {p}", e.path().display()));
            continue;
        }
        entries.push((name, e.path()));
    }
    entries.sort();
    for (name, path) in entries {
        let ex = match read::manifest(&path) {
            Ok(m) if m.pipeline.name != name => {
                let msg = format!(
                    "{}: its manifest is of pipeline `{}`, not `{name}`",
                    path.display(),
                    m.pipeline.name
                );
                problems.push(msg.clone());
                damaged(&name, msg)
            }
            Ok(m) => experiment(&name, &path, &m, &mut problems, &mut found),
            Err(msg) => {
                problems.push(msg.clone());
                damaged(&name, msg)
            }
        };
        experiments.insert(name, ex);
    }
    for x in expected {
        if experiments.contains_key(&x.name) {
            continue;
        }
        let out = results.display().to_string();
        let file = shell_word(&x.file.display().to_string());
        let run = format!("dplab run {file} --out {}", shell_word(&out));
        let (status, message, command) = if x.missing_data.is_empty() {
            ("not run", "No results in this directory.".to_string(), run)
        } else {
            (
                "data not available",
                format!(
                    "Skipped: dataset{} {} not on this machine (neither in the download cache nor in the mirror, verified).",
                    if x.missing_data.len() > 1 { "s" } else { "" },
                    x.missing_data.join(", ")
                ),
                format!("dplab data fetch --pipelines {file} && {run}"),
            )
        };
        experiments.insert(
            x.name.clone(),
            Experiment {
                title: x.title.clone(),
                paper: x.paper.clone(),
                item: x.item.clone(),
                description: markdown::to_html(&x.description),
                ..Experiment::without_results(&x.name, status, message, command)
            },
        );
    }
    let mut summary = Summary::default();
    for ex in experiments.values() {
        summary.experiments += 1;
        match ex.status {
            "ok" => summary.with_results += 1,
            "data not available" => summary.unavailable += 1,
            "not run" => summary.not_run += 1,
            _ => summary.damaged += 1,
        }
    }
    let mut by_paper: BTreeMap<String, Vec<&Experiment>> = BTreeMap::new();
    for ex in experiments.values() {
        by_paper.entry(ex.paper.clone()).or_default().push(ex);
    }
    let mut ordered: Vec<&Experiment> = Vec::new();
    let papers: Vec<Paper> = by_paper
        .iter()
        .map(|(id, exs)| {
            ordered.extend(exs.iter().copied());
            Paper {
                id: if id.is_empty() {
                    "(no paper named)".into()
                } else {
                    id.clone()
                },
                experiments: exs
                    .iter()
                    .map(|e| (e.anchor.clone(), e.id.clone(), e.status))
                    .collect(),
            }
        })
        .collect();
    // In page order (experiments are grouped by paper).
    for ex in &ordered {
        summary.numbers.merge(&ex.numbers);
        summary.findings.merge(&ex.found);
        summary
            .disagreements
            .extend(found.iter().filter(|x| x.experiment == ex.id).cloned());
        summary.finding_list.extend(ex.findings.iter().cloned());
    }
    let mut env = minijinja::Environment::new();
    env.set_auto_escape_callback(|_| minijinja::AutoEscape::Html);
    env.add_template("report.html", TEMPLATE)
        .map_err(|e| format!("the report template: {e}"))?;
    let tmpl = env
        .get_template("report.html")
        .map_err(|e| format!("the report template: {e}"))?;
    let html = tmpl
        .render(minijinja::context! {
            results => results.display().to_string(),
            summary => &summary,
            papers => papers,
            experiments => ordered,
            problems => &problems,
            version => env!("CARGO_PKG_VERSION"),
        })
        .map_err(|e| format!("rendering the report: {e}"))?;
    Ok((html, summary, problems))
}

/// A word as a POSIX shell reads it back (quoted by `shlex`, as `dplab slurm` quotes its
/// scripts; only NUL cannot be quoted, and no path holds one).
fn shell_word(s: &str) -> String {
    shlex::try_quote(s).map_or_else(|_| "''".to_string(), |q| q.into_owned())
}

fn damaged(name: &str, message: String) -> Experiment {
    Experiment::without_results(name, "damaged", message, String::new())
}

impl Experiment {
    /// An experiment shown without results (no data, not run, damaged): its name for a
    /// title until the caller fills in what it knows.
    fn without_results(name: &str, status: &'static str, message: String, command: String) -> Self {
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
            found: Tally::default(),
            verdict_line: String::new(),
        }
    }
}

fn experiment(
    name: &str,
    dir: &Path,
    m: &Manifest,
    problems: &mut Vec<String>,
    found: &mut Vec<Disagreement>,
) -> Experiment {
    let outputs = Outputs::new(dir, m);
    let mut figures = Vec::new();
    for file in outputs.with_ext("svg") {
        let problem = match outputs.check(file, MAX_FIGURE, false) {
            Ok(_) => String::new(),
            Err(e) => {
                problems.push(e.clone());
                e
            }
        };
        figures.push(Figure {
            src: format!("{}/{}", url_segment(name), url_segment(file)),
            file: file.to_string(),
            problem,
        });
    }
    let mut tables = Vec::new();
    let mut numbers = Tally::default();
    for st in m
        .stages
        .iter()
        .filter(|s| matches!(s.kind.as_str(), "report.table" | "report.verdict"))
    {
        if let Some(t) = table(name, &outputs, st, problems, found) {
            numbers.merge(&t.numbers);
            tables.push(t);
        }
    }
    let mut stated = Tally::default();
    let findings: Vec<FindingRow> = m
        .pipeline
        .findings
        .iter()
        .map(|f| {
            stated.add(f.verdict);
            finding_row(name, f)
        })
        .collect();
    let (run, cached) = m.stages.iter().fold((0, 0), |(r, c), s| {
        (r + s.instances_run, c + s.instances_cached)
    });
    let mut provenance = vec![
        (
            "pipeline file".into(),
            format!("{} (sha256 {})", m.pipeline.file, short(&m.pipeline.sha256)),
        ),
        (
            "git commit".into(),
            m.git_commit.clone().unwrap_or_else(|| "unknown".into()),
        ),
        ("dplab version".into(), m.dplab_version.clone()),
        (
            "profile".into(),
            m.profile
                .clone()
                .unwrap_or_else(|| "none (full settings)".into()),
        ),
        ("seed".into(), m.seed.map_or("—".into(), |s| s.to_string())),
        (
            "wall time".into(),
            m.wall_seconds.map_or("—".into(), |s| format!("{s:.2} s")),
        ),
        (
            "instances".into(),
            format!("{run} run, {cached} from the store"),
        ),
    ];
    if let Some(j) = m.jobs {
        provenance.push(("worker threads".into(), j.to_string()));
    }
    if !m.set.is_empty() {
        provenance.push(("--set".into(), m.set.join("; ")));
    }
    Experiment {
        id: name.to_string(),
        anchor: anchor(name),
        title: m.pipeline.title.clone(),
        paper: m.pipeline.source.paper.clone(),
        item: m.pipeline.source.item.clone(),
        description: markdown::to_html(&m.pipeline.description),
        status: "ok",
        message: String::new(),
        command: String::new(),
        figures,
        tables,
        findings,
        provenance,
        verdict_line: if numbers.compared + stated.compared == 0 {
            "nothing: this experiment states no finding and its tables hold no printed number of the paper.".into()
        } else {
            format!(
                "{}; {}.",
                numbers.text("printed number", "printed numbers"),
                stated.text("finding", "findings")
            )
        },
        numbers,
        found: stated,
    }
}

fn finding_row(exp: &str, f: &Finding) -> FindingRow {
    FindingRow {
        experiment: exp.to_string(),
        anchor: anchor(exp),
        claim: f.claim.trim().to_string(),
        found: f.found.trim().to_string(),
        verdict: f.verdict,
        class: class(f.verdict),
        why: f
            .why
            .as_deref()
            .map_or_else(String::new, |w| w.trim().to_string()),
    }
}

fn short(sha: &str) -> String {
    sha.chars().take(12).collect()
}

/// One table of an experiment, with its compared cells counted and its differences recorded.
fn table(
    exp: &str,
    outputs: &Outputs,
    st: &read::StageInfo,
    problems: &mut Vec<String>,
    found: &mut Vec<Disagreement>,
) -> Option<TableView> {
    let csv_name = format!("{}.csv", st.name);
    if !outputs.has(&csv_name) {
        return None;
    }
    let mut t = TableView {
        stage: st.name.clone(),
        title: st.name.clone(),
        notes: String::new(),
        csv: format!("{}/{}", url_segment(exp), url_segment(&csv_name)),
        headers: vec![],
        rows: vec![],
        total_rows: 0,
        paper_layout: String::new(),
        thesis: None,
        causes: vec![],
        data_only: false,
        numbers: Tally::default(),
        problem: String::new(),
    };
    let frame = outputs
        .check(&csv_name, read::MAX_CSV, true)
        .and_then(|b| Csv::parse(&b).map_err(|e| format!("{exp}/{csv_name}: {e}")));
    let frame = match frame {
        Ok(f) => f,
        Err(e) => {
            problems.push(e.clone());
            t.problem = e;
            return Some(t);
        }
    };
    let md_name = format!("{}.md", st.name);
    let md = outputs.has(&md_name).then(|| outputs.text(&md_name));
    let md = match md {
        Some(Ok(s)) => Some(s),
        Some(Err(e)) => {
            problems.push(e);
            None
        }
        None => None,
    };
    let json_name = format!("{}.json", st.name);
    let layout = if outputs.has(&json_name) {
        match outputs.text(&json_name).and_then(|s| {
            serde_json::from_str::<Layout>(&s).map_err(|e| format!("{exp}/{json_name}: {e}"))
        }) {
            Ok(l) => Some(l),
            Err(e) => {
                problems.push(e);
                None
            }
        }
    } else {
        None
    };
    let judged = match judgements(&frame) {
        Ok(j) => j,
        Err(e) => {
            let e = format!("{exp}/{csv_name}: {e}");
            problems.push(e.clone());
            t.problem = e;
            return Some(t);
        }
    };
    if let Some(md) = &md {
        if let Some(title) = md.lines().next().and_then(|l| l.strip_prefix("## ")) {
            t.title = title.trim().to_string();
        }
        if st.kind == "report.verdict" {
            t.paper_layout = markdown::to_html(md.split_once('\n').map_or("", |x| x.1));
        }
    }
    if st.kind == "report.verdict" {
        t.thesis = thesis_layout(&frame, &judged);
    }
    let at: HashMap<(usize, usize), &Judged> =
        judged.iter().map(|j| ((j.row, j.column), j)).collect();
    if md.is_none() && layout.is_none() && judged.is_empty() {
        t.data_only = true;
        t.total_rows = frame.rows.len();
        return Some(t);
    }
    let view = match &layout {
        Some(l) => {
            t.title = l.title.clone();
            t.notes = l
                .notes
                .as_deref()
                .map(markdown::to_html)
                .unwrap_or_default();
            view_with_layout(&frame, l, &at)
        }
        // A verdict table shown in the thesis's layout is not repeated cell by cell.
        None if t.thesis.is_some() => Ok(View {
            headers: vec![],
            rows: vec![],
            causes: vec![],
        }),
        None => Ok(view_generic(&frame, &at)),
    };
    let view = match view {
        Ok(v) => v,
        Err(e) => {
            let e = format!("{exp}/{csv_name}: {e}");
            problems.push(e.clone());
            t.problem = e;
            return Some(t);
        }
    };
    t.headers = view.headers;
    t.causes = view.causes;
    t.total_rows = view.rows.len();
    t.rows = view.rows.into_iter().take(MAX_SHOWN_ROWS).collect();
    for j in &judged {
        t.numbers.add(j.verdict);
    }
    record_differences(exp, &t.title, &frame, layout.as_ref(), &judged, found);
    Some(t)
}

/// One compared cell of a table frame: its row, the column of its verdict word, our compared
/// column (`c` of `verdict_<c>`; `None` for the `verdict` column of a cell-by-cell table), the
/// verdict, and its note (the stated cause, or what an agreement or an unexplained difference
/// rests on).
#[derive(Debug, Clone)]
pub struct Judged {
    pub row: usize,
    pub column: usize,
    pub ours: Option<String>,
    pub verdict: Verdict,
    pub note: String,
}

/// The compared cells of a table frame, read from its verdict columns (`verdict_<c>`, with the
/// cause in `why_<c>`; `verdict`, with `cause`): the one reading from which the page colours
/// the tables, counts the numbers and lists the differences. A word that is neither a verdict
/// nor one of the words for "not compared" is an error (a frame of another dplab, or damage),
/// not a cell silently left out.
pub fn judgements(frame: &Csv) -> Result<Vec<Judged>, String> {
    let mut out = Vec::new();
    for (vi, vname) in frame.names.iter().enumerate() {
        let ours = if vname == "verdict" {
            None
        } else if let Some(o) = vname.strip_prefix("verdict_") {
            Some(o.to_string())
        } else {
            continue;
        };
        let note_col = match &ours {
            Some(o) => frame.col(&format!("why_{o}")),
            None => frame.col("cause"),
        };
        for (r, row) in frame.rows.iter().enumerate() {
            let word = row.get(vi).map_or("", |w| w.trim());
            if word.is_empty() || NOT_COMPARED.contains(&word) {
                continue;
            }
            let Some(verdict) = Verdict::from_word(word) else {
                return Err(format!(
                    "row {}: `{word}` in column `{vname}` is not a verdict ({}) nor a word for a cell not compared ({}); a results directory of an older dplab is read again after `dplab run`",
                    r + 1,
                    Verdict::ALL.map(Verdict::word).join(", "),
                    NOT_COMPARED.join(", ")
                ));
            };
            let note = note_col
                .and_then(|i| row.get(i))
                .map_or_else(String::new, |s| s.trim().to_string());
            out.push(Judged {
                row: r,
                column: vi,
                ours: ours.clone(),
                verdict,
                note,
            });
        }
    }
    Ok(out)
}

/// A `report.verdict` frame (source, value, sigma, paper, ours, ours_lo, ours_hi, …, verdict)
/// pivoted to the thesis's layout: datasets and errors down, σ across, the thesis's value as
/// printed and ours (the headline run: the first run column after `paper`) in each cell,
/// coloured by its verdict. Cells shown side by side (times) are left out, as the thesis's
/// error tables do. `None` when the frame lacks those columns.
fn thesis_layout(frame: &Csv, judged: &[Judged]) -> Option<Pivot> {
    let [src, val, sig, paper, verdict] =
        ["source", "value", "sigma", "paper", "verdict"].map(|c| frame.col(c));
    let (src, val, sig, paper, verdict) = (src?, val?, sig?, paper?, verdict?);
    let ours = paper + 1;
    let name = frame.names.get(ours)?.clone();
    frame.col(&format!("{name}_lo"))?;
    frame.col(&format!("{name}_hi"))?;
    let cause = frame.col("cause");
    let by_row: HashMap<usize, &Judged> = judged
        .iter()
        .filter(|j| j.column == verdict)
        .map(|j| (j.row, j))
        .collect();
    let num = |r: &Vec<String>, i: usize| r.get(i).and_then(|s| s.trim().parse::<f64>().ok());
    let mut sigmas: Vec<f64> = Vec::new();
    let mut keys: Vec<(String, String)> = Vec::new();
    // A value shown side by side anywhere (a time) is left out everywhere, also where its
    // σ was not run.
    let beside: Vec<&String> = frame
        .rows
        .iter()
        .filter(|r| {
            r.get(verdict)
                .is_some_and(|v| v.trim() == crate::verdict::SIDE_BY_SIDE)
        })
        .filter_map(|r| r.get(val))
        .collect();
    let rows: Vec<(usize, &Vec<String>)> = frame
        .rows
        .iter()
        .enumerate()
        .filter(|(_, r)| r.get(val).is_some_and(|v| !beside.contains(&v)))
        .collect();
    for (_, r) in &rows {
        let s = num(r, sig)?;
        if !sigmas.contains(&s) {
            sigmas.push(s);
        }
        let k = (r.get(src)?.clone(), r.get(val)?.clone());
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    if keys.is_empty() {
        return None;
    }
    sigmas.sort_by(f64::total_cmp);
    let mut headers = vec!["dataset".to_string(), "error".to_string()];
    headers.extend(sigmas.iter().map(|s| format!("σ = {s}")));
    let text = |t: String| PivotCell {
        paper: t,
        ours: String::new(),
        verdict: String::new(),
        note: String::new(),
        class: "text",
    };
    let body = keys
        .iter()
        .map(|(k_src, k_val)| {
            let mut cells = vec![text(k_src.clone()), text(k_val.replace('_', " "))];
            for s in &sigmas {
                let r = rows.iter().find(|(_, r)| {
                    r.get(src) == Some(k_src)
                        && r.get(val) == Some(k_val)
                        && num(r, sig) == Some(*s)
                });
                cells.push(match r {
                    None => PivotCell {
                        paper: "—".into(),
                        ..text(String::new())
                    },
                    Some((i, r)) => {
                        let printed = r.get(paper).map_or("", |p| p.trim());
                        let j = by_row.get(i);
                        PivotCell {
                            paper: if printed.is_empty() { "—" } else { printed }.to_string(),
                            ours: shown_run(frame, r, ours, printed),
                            verdict: j.map_or_else(
                                || r.get(verdict).map_or("", |v| v.trim()).to_string(),
                                |j| j.verdict.word().to_string(),
                            ),
                            note: j.map_or_else(
                                || {
                                    cause
                                        .and_then(|c| r.get(c))
                                        .map_or("", |c| c.trim())
                                        .to_string()
                                },
                                |j| j.note.clone(),
                            ),
                            class: j.map_or("v-none", |j| class(j.verdict)),
                        }
                    }
                });
            }
            cells
        })
        .collect();
    Some(Pivot {
        ours: name,
        headers,
        rows: body,
    })
}

/// The run a verdict table's row is shown with: the one whose interval holds the paper's value
/// (its `matched` column), named when it is not the headline run `headline`, else the
/// headline run.
fn shown_run(frame: &Csv, row: &[String], headline: usize, printed: &str) -> String {
    let matched = frame
        .col("matched")
        .and_then(|m| row.get(m))
        .map(|m| m.trim())
        .filter(|m| !m.is_empty());
    match matched.and_then(|m| Some((m, frame.col(m)?))) {
        Some((name, col)) if col != headline => {
            format!("{} ({name})", run_text(frame, row, col, printed))
        }
        _ => run_text(frame, row, headline, printed),
    }
}

/// A run's mean and 95% interval in one format (`0.0534 [0.0501, 0.0567]`), with a decimal
/// more than the paper `printed` (see [`format_ours`]); `—` when the run has no value.
fn run_text(frame: &Csv, row: &[String], mean_col: usize, printed: &str) -> String {
    let num = |i: Option<usize>| {
        i.and_then(|i| row.get(i))
            .and_then(|s| s.trim().parse::<f64>().ok())
            .filter(|v| v.is_finite())
    };
    let name = &frame.names[mean_col];
    let (m, l, h) = (
        num(Some(mean_col)),
        num(frame.col(&format!("{name}_lo"))),
        num(frame.col(&format!("{name}_hi"))),
    );
    match (m, l, h) {
        (None, ..) => "—".to_string(),
        (Some(m), Some(l), Some(h)) => {
            let t = format_ours(&[Some(m), Some(l), Some(h)], &[printed; 3], 3);
            format!("{} [{}, {}]", t[0], t[1], t[2])
        }
        (m, ..) => format_ours(&[m], &[printed], 3).remove(0),
    }
}

struct View {
    headers: Vec<String>,
    rows: Vec<Vec<Cell>>,
    causes: Vec<String>,
}

fn numbers(frame: &Csv, i: usize) -> Vec<Option<f64>> {
    frame
        .rows
        .iter()
        .map(|r| r.get(i).and_then(|s| s.trim().parse::<f64>().ok()))
        .collect()
}

/// Whether every non-empty cell of column `i` is a number.
fn numeric(frame: &Csv, i: usize) -> bool {
    let mut any = false;
    for r in &frame.rows {
        let s = r.get(i).map_or("", |s| s.trim());
        if s.is_empty() {
            continue;
        }
        if s.parse::<f64>().is_err() {
            return false;
        }
        any = true;
    }
    any
}

/// Cells of column `i` as written in the frame (keys, the paper's printed numbers): never
/// re-rounded or padded.
fn as_written(frame: &Csv, i: usize) -> Vec<String> {
    frame
        .rows
        .iter()
        .map(|r| {
            let s = r.get(i).map_or("", |s| s.trim());
            if s.is_empty() || s.eq_ignore_ascii_case("nan") {
                "—".to_string()
            } else {
                s.to_string()
            }
        })
        .collect()
}

/// The class of the cell at (row, column) of the frame: its verdict's when it is a compared
/// cell, else `other`.
fn cell_class(
    at: &HashMap<(usize, usize), &Judged>,
    row: usize,
    col: usize,
    other: &'static str,
) -> &'static str {
    at.get(&(row, col)).map_or(other, |j| class(j.verdict))
}

fn view_with_layout(
    frame: &Csv,
    l: &Layout,
    at: &HashMap<(usize, usize), &Judged>,
) -> Result<View, String> {
    let mut cols: Vec<Vec<Cell>> = Vec::new();
    let mut headers = Vec::new();
    // Each stated cause once, under the table; a verdict cell refers to it as `[k]`.
    let mut causes: Vec<String> = Vec::new();
    for c in &l.columns {
        let i = frame
            .col(&c.name)
            .ok_or_else(|| format!("its layout names a column `{}` the frame lacks", c.name))?;
        if c.role == "explanation" {
            continue;
        }
        headers.push(c.header.clone());
        let plain = |texts: Vec<String>, class: &'static str| -> Vec<Cell> {
            texts
                .into_iter()
                .map(|text| Cell {
                    text,
                    class,
                    num: class == "num",
                })
                .collect()
        };
        let col: Vec<Cell> = match c.role.as_str() {
            "key" | "paper" => plain(
                as_written(frame, i),
                if numeric(frame, i) { "num" } else { "text" },
            ),
            "verdict" => frame
                .rows
                .iter()
                .enumerate()
                .map(|(r, row)| {
                    let s = row.get(i).map_or("", |s| s.trim());
                    let mut text = if s.is_empty() {
                        "—".into()
                    } else {
                        s.to_string()
                    };
                    if let Some(j) = at.get(&(r, i)).filter(|j| j.verdict == Verdict::Explained) {
                        let k = match causes.iter().position(|c| *c == j.note) {
                            Some(k) => k,
                            None => {
                                causes.push(j.note.clone());
                                causes.len() - 1
                            }
                        };
                        text = format!("{text} [{}]", k + 1);
                    }
                    Cell {
                        text,
                        class: cell_class(at, r, i, "v-none"),
                        num: false,
                    }
                })
                .collect(),
            _ if numeric(frame, i) => {
                let v = numbers(frame, i);
                let text = match c.role.as_str() {
                    "ours" => {
                        let printed = frame
                            .col(&format!("paper_{}", c.name))
                            .map(|p| as_written(frame, p))
                            .unwrap_or_default();
                        let texts: Vec<&str> = printed.iter().map(String::as_str).collect();
                        format_ours(&v, &texts, l.digits)
                    }
                    "diff" => {
                        let mut t = format_column(&v, 2);
                        for (s, x) in t.iter_mut().zip(&v) {
                            if x.is_some_and(|x| x > 0.0) {
                                s.insert(0, '+');
                            }
                        }
                        t
                    }
                    _ => format_column(&v, l.digits),
                };
                plain(text, "num")
            }
            _ => plain(as_written(frame, i), "text"),
        };
        cols.push(col);
    }
    // Colour each compared column's difference by its verdict.
    let shown = l.columns.iter().filter(|c| c.role != "explanation");
    for (k, c) in shown.enumerate() {
        let Some(ours) = c.name.strip_prefix("diff_").filter(|_| c.role == "diff") else {
            continue;
        };
        let Some(vi) = frame.col(&format!("verdict_{ours}")) else {
            continue;
        };
        for (r, cell) in cols[k].iter_mut().enumerate() {
            cell.class = cell_class(at, r, vi, cell.class);
        }
    }
    Ok(View {
        headers,
        rows: transpose(cols, frame.rows.len()),
        causes,
    })
}

fn transpose(cols: Vec<Vec<Cell>>, n: usize) -> Vec<Vec<Cell>> {
    (0..n)
        .map(|r| cols.iter().map(|c| c[r].clone()).collect())
        .collect()
}

/// A frame without a layout: every column; `x` with `x_lo`/`x_hi` (or `mean` with
/// `ci_lo`/`ci_hi`) shown as one cell `x [lo, hi]`; a `paper` column as written; verdict
/// columns coloured.
fn view_generic(frame: &Csv, at: &HashMap<(usize, usize), &Judged>) -> View {
    let mut used = vec![false; frame.names.len()];
    let mut headers = Vec::new();
    let mut cols: Vec<Vec<Cell>> = Vec::new();
    for (i, name) in frame.names.iter().enumerate() {
        if used[i] {
            continue;
        }
        used[i] = true;
        let pair = [("_lo", "_hi"), ("_ci_lo", "_ci_hi")]
            .iter()
            .find_map(|(a, b)| {
                Some((
                    frame.col(&format!("{name}{a}"))?,
                    frame.col(&format!("{name}{b}"))?,
                ))
            })
            .or_else(|| {
                (name == "mean").then(|| Some((frame.col("ci_lo")?, frame.col("ci_hi")?)))?
            });
        let verdict = name == "verdict" || name.starts_with("verdict_");
        if name == "paper" || name.starts_with("paper_") {
            headers.push(name.clone());
            cols.push(
                as_written(frame, i)
                    .into_iter()
                    .map(|text| Cell {
                        text,
                        class: "num",
                        num: true,
                    })
                    .collect(),
            );
        } else if numeric(frame, i) {
            let v = numbers(frame, i);
            let mut text = format_column(&v, 4);
            if let Some((lo, hi)) =
                pair.filter(|(lo, hi)| numeric(frame, *lo) && numeric(frame, *hi))
            {
                used[lo] = true;
                used[hi] = true;
                let l = format_column(&numbers(frame, lo), 3);
                let h = format_column(&numbers(frame, hi), 3);
                for (r, t) in text.iter_mut().enumerate() {
                    if l[r] != "—" {
                        *t = format!("{t} [{}, {}]", l[r], h[r]);
                    }
                }
                headers.push(format!("{name} [95% CI]"));
            } else {
                headers.push(name.clone());
            }
            cols.push(
                text.into_iter()
                    .map(|text| Cell {
                        text,
                        class: "num",
                        num: true,
                    })
                    .collect(),
            );
        } else {
            headers.push(name.clone());
            cols.push(
                as_written(frame, i)
                    .into_iter()
                    .enumerate()
                    .map(|(r, text)| Cell {
                        class: if verdict {
                            cell_class(at, r, i, "v-none")
                        } else {
                            "text"
                        },
                        text,
                        num: false,
                    })
                    .collect(),
            );
        }
    }
    View {
        headers,
        rows: transpose(cols, frame.rows.len()),
        causes: vec![],
    }
}

/// Records the differences among a table's compared cells, each named by its row's keys,
/// with our value (digits enough to see the difference) beside the paper's as printed.
fn record_differences(
    exp: &str,
    title: &str,
    frame: &Csv,
    layout: Option<&Layout>,
    judged: &[Judged],
    found: &mut Vec<Disagreement>,
) {
    let header = |name: &str| -> String {
        layout
            .and_then(|l| l.columns.iter().find(|c| c.name == name))
            .map_or_else(|| name.to_string(), |c| c.header.clone())
    };
    let keys: Vec<usize> = match layout {
        Some(l) => l
            .columns
            .iter()
            .filter(|c| c.role == "key")
            .filter_map(|c| frame.col(&c.name))
            .collect(),
        None => ["source", "value", "sigma"]
            .iter()
            .filter_map(|k| frame.col(k))
            .collect(),
    };
    let mut first = true;
    for j in judged.iter().filter(|j| !j.verdict.agrees()) {
        let row = &frame.rows[j.row];
        let cell_of = |name: &str| {
            frame
                .col(name)
                .and_then(|i| row.get(i))
                .map_or_else(String::new, |s| s.trim().to_string())
        };
        let mut label: Vec<String> = keys
            .iter()
            .map(|&k| format!("{} = {}", header(&frame.names[k]), row[k].trim()))
            .collect();
        let (ours, paper) = match &j.ours {
            Some(o) => {
                label.push(header(o).trim_end_matches(" (ours)").to_string());
                let paper = cell_of(&format!("paper_{o}"));
                let v = cell_of(o).parse::<f64>().ok();
                (format_ours(&[v], &[paper.as_str()], 4).remove(0), paper)
            }
            None => {
                let paper = cell_of("paper");
                let ours = frame
                    .col("paper")
                    .filter(|p| p + 1 < frame.names.len())
                    .map_or_else(|| "—".to_string(), |p| shown_run(frame, row, p + 1, &paper));
                (ours, paper)
            }
        };
        found.push(Disagreement {
            experiment: exp.to_string(),
            anchor: anchor(exp),
            table: title.to_string(),
            cell: label.join(", "),
            ours,
            paper,
            verdict: j.verdict,
            class: class(j.verdict),
            note: j.note.clone(),
            first_of_table: std::mem::take(&mut first),
        });
    }
}

#[cfg(test)]
mod tests;
