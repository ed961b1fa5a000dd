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
//! The summary counts printed numbers compared with the paper, from the verdict columns of the
//! table frames: `verdict_<c>` of `report.table` (agrees, within CI, differs) and `verdict` of
//! `report.verdict` (within; explained or unexplained; cells not judged — not run, no data,
//! side by side — are not counted).

mod markdown;
pub mod read;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use read::{Csv, Layout, Manifest, Outputs};

const TEMPLATE: &str = include_str!("../../templates/report.html");
/// Rows of one table shown on the page (the CSV beside it has them all).
const MAX_SHOWN_ROWS: usize = 400;
/// Largest figure referenced (checked against its manifest hash before it is).
const MAX_FIGURE: u64 = 256 << 20;

/// How a compared cell came out.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Judged {
    Agrees,
    Differs,
    /// A cell of a verdict table that was not compared (not run, no data, side by side).
    NotJudged,
}

/// The verdict words of both table kinds, as counted.
pub fn judge_word(word: &str) -> Option<Judged> {
    match word.trim() {
        "" => None,
        "agrees" | "within CI" | "within" => Some(Judged::Agrees),
        "differs" | "explained" | "unexplained" => Some(Judged::Differs),
        _ => Some(Judged::NotJudged),
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
    pub compared: usize,
    pub agree: usize,
    pub differ: usize,
    pub explained: usize,
    pub disagreements: Vec<Disagreement>,
}

#[derive(Serialize, Debug, Clone)]
pub struct Disagreement {
    pub experiment: String,
    pub anchor: String,
    pub table: String,
    pub cell: String,
    pub ours: String,
    pub paper: String,
    pub verdict: String,
    pub explanation: String,
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
    tables: Vec<Table>,
    provenance: Vec<(String, String)>,
    compared: usize,
    agree: usize,
    differ: usize,
}

#[derive(Serialize)]
struct Figure {
    src: String,
    file: String,
    problem: String,
}

#[derive(Serialize)]
struct Table {
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
    /// column per σ, the thesis's value above ours in each cell.
    thesis: Option<Pivot>,
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
    class: &'static str,
}

#[derive(Serialize, Clone)]
struct Cell {
    text: String,
    class: &'static str,
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
    for ex in &ordered {
        summary.compared += ex.compared;
        summary.agree += ex.agree;
        summary.differ += ex.differ;
    }
    // In page order (experiments are grouped by paper).
    for ex in &ordered {
        summary
            .disagreements
            .extend(found.iter().filter(|x| x.experiment == ex.id).cloned());
    }
    summary.explained = summary
        .disagreements
        .iter()
        .filter(|d| !d.explanation.is_empty())
        .count();
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
            provenance: vec![],
            compared: 0,
            agree: 0,
            differ: 0,
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
    let (mut compared, mut agree, mut differ) = (0, 0, 0);
    for st in m
        .stages
        .iter()
        .filter(|s| matches!(s.kind.as_str(), "report.table" | "report.verdict"))
    {
        let t = table(name, &outputs, st, problems, found);
        if let Some((t, c)) = t {
            compared += c.0;
            agree += c.1;
            differ += c.2;
            tables.push(t);
        }
    }
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
        provenance,
        compared,
        agree,
        differ,
    }
}

fn short(sha: &str) -> String {
    sha.chars().take(12).collect()
}

/// One table of an experiment and its counts (compared, agree, differ).
fn table(
    exp: &str,
    outputs: &Outputs,
    st: &read::StageInfo,
    problems: &mut Vec<String>,
    found: &mut Vec<Disagreement>,
) -> Option<(Table, (usize, usize, usize))> {
    let csv_name = format!("{}.csv", st.name);
    if !outputs.has(&csv_name) {
        return None;
    }
    let mut t = Table {
        stage: st.name.clone(),
        title: st.name.clone(),
        notes: String::new(),
        csv: format!("{}/{}", url_segment(exp), url_segment(&csv_name)),
        headers: vec![],
        rows: vec![],
        total_rows: 0,
        paper_layout: String::new(),
        thesis: None,
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
            return Some((t, (0, 0, 0)));
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
    if let Some(md) = &md {
        if let Some(title) = md.lines().next().and_then(|l| l.strip_prefix("## ")) {
            t.title = title.trim().to_string();
        }
        if st.kind == "report.verdict" {
            t.paper_layout = markdown::to_html(md.split_once('\n').map_or("", |x| x.1));
        }
    }
    if st.kind == "report.verdict" {
        t.thesis = thesis_layout(&frame);
    }
    let view = match &layout {
        Some(l) => {
            t.title = l.title.clone();
            t.notes = l
                .notes
                .as_deref()
                .map(markdown::to_html)
                .unwrap_or_default();
            view_with_layout(&frame, l)
        }
        None => view_generic(&frame),
    };
    let view = match view {
        Ok(v) => v,
        Err(e) => {
            let e = format!("{exp}/{csv_name}: {e}");
            problems.push(e.clone());
            t.problem = e;
            return Some((t, (0, 0, 0)));
        }
    };
    t.headers = view.headers;
    t.total_rows = view.rows.len();
    t.rows = view.rows.into_iter().take(MAX_SHOWN_ROWS).collect();
    let counts = count(exp, &t.title, &frame, layout.as_ref(), found);
    Some((t, counts))
}

/// A `report.verdict` frame (source, value, sigma, paper, ours, ours_lo, ours_hi, …, verdict)
/// pivoted to the thesis's layout: datasets and errors down, σ across, the thesis's value and
/// ours (the headline run: the first run column after `paper`) in each cell, coloured by the
/// verdict. Cells shown side by side (times) are left out, as the thesis's error tables do.
/// `None` when the frame lacks those columns.
fn thesis_layout(frame: &Csv) -> Option<Pivot> {
    let [src, val, sig, paper, verdict] =
        ["source", "value", "sigma", "paper", "verdict"].map(|c| frame.col(c));
    let (src, val, sig, paper, verdict) = (src?, val?, sig?, paper?, verdict?);
    let ours = paper + 1;
    let name = frame.names.get(ours)?.clone();
    let (lo, hi) = (
        frame.col(&format!("{name}_lo"))?,
        frame.col(&format!("{name}_hi"))?,
    );
    let num = |r: &Vec<String>, i: usize| r.get(i).and_then(|s| s.trim().parse::<f64>().ok());
    let mut sigmas: Vec<f64> = Vec::new();
    let mut keys: Vec<(String, String)> = Vec::new();
    // A value shown side by side anywhere (a time) is left out everywhere, also where its
    // σ was not run.
    let beside: Vec<&String> = frame
        .rows
        .iter()
        .filter(|r| r.get(verdict).is_some_and(|v| v.trim() == "side by side"))
        .filter_map(|r| r.get(val))
        .collect();
    let rows: Vec<&Vec<String>> = frame
        .rows
        .iter()
        .filter(|r| r.get(val).is_some_and(|v| !beside.contains(&v)))
        .collect();
    for r in &rows {
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
    let fmt = |x: Option<f64>| {
        crate::stages::report::format_column(&[x.filter(|v| v.is_finite())], 3).remove(0)
    };
    let mut headers = vec!["dataset".to_string(), "error".to_string()];
    headers.extend(sigmas.iter().map(|s| format!("σ = {s}")));
    let body = keys
        .iter()
        .map(|(k_src, k_val)| {
            let mut cells = vec![
                PivotCell {
                    paper: k_src.clone(),
                    ours: String::new(),
                    verdict: String::new(),
                    class: "text",
                },
                PivotCell {
                    paper: k_val.replace('_', " "),
                    ours: String::new(),
                    verdict: String::new(),
                    class: "text",
                },
            ];
            for s in &sigmas {
                let r = rows.iter().find(|r| {
                    r.get(src) == Some(k_src)
                        && r.get(val) == Some(k_val)
                        && num(r, sig) == Some(*s)
                });
                cells.push(match r {
                    None => PivotCell {
                        paper: "—".into(),
                        ours: String::new(),
                        verdict: String::new(),
                        class: "v-none",
                    },
                    Some(r) => {
                        let word = r.get(verdict).map_or("", |v| v.trim()).to_string();
                        let mean = num(r, ours).filter(|v| v.is_finite());
                        let ours_text = match (mean, num(r, lo), num(r, hi)) {
                            (None, ..) => "—".to_string(),
                            (Some(m), Some(l), Some(h)) if l.is_finite() && h.is_finite() => {
                                // One number format for the mean and its interval.
                                let t = crate::stages::report::format_column(
                                    &[Some(m), Some(l), Some(h)],
                                    3,
                                );
                                format!("{} [{}, {}]", t[0], t[1], t[2])
                            }
                            (m, ..) => fmt(m),
                        };
                        PivotCell {
                            paper: shortest(num(r, paper)),
                            ours: ours_text,
                            class: verdict_class(&word),
                            verdict: word,
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

struct View {
    headers: Vec<String>,
    rows: Vec<Vec<Cell>>,
}

fn verdict_class(word: &str) -> &'static str {
    match word.trim() {
        "agrees" => "v-agree",
        "within CI" | "within" => "v-within",
        "explained" => "v-explained",
        "differs" | "unexplained" => "v-differ",
        _ => "v-none",
    }
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

/// Axis values and the paper's numbers as written (shortest form), not padded to digits.
fn shortest(x: Option<f64>) -> String {
    match x {
        Some(v) if v.is_finite() => format!("{v}"),
        _ => "—".into(),
    }
}

fn view_with_layout(frame: &Csv, l: &Layout) -> Result<View, String> {
    let mut cols: Vec<Vec<Cell>> = Vec::new();
    for c in &l.columns {
        let i = frame
            .col(&c.name)
            .ok_or_else(|| format!("its layout names a column `{}` the frame lacks", c.name))?;
        let col: Vec<Cell> = if numeric(frame, i) {
            let v = numbers(frame, i);
            let text: Vec<String> = match c.role.as_str() {
                "key" | "paper" => v.iter().map(|x| shortest(*x)).collect(),
                "diff" => {
                    let mut t = crate::stages::report::format_column(&v, 2);
                    for (s, x) in t.iter_mut().zip(&v) {
                        if x.is_some_and(|x| x > 0.0) {
                            s.insert(0, '+');
                        }
                    }
                    t
                }
                _ => crate::stages::report::format_column(&v, l.digits),
            };
            text.into_iter()
                .map(|text| Cell { text, class: "num" })
                .collect()
        } else {
            frame
                .rows
                .iter()
                .map(|r| {
                    let s = r.get(i).cloned().unwrap_or_default();
                    let class = if c.role == "verdict" {
                        verdict_class(&s)
                    } else {
                        "text"
                    };
                    Cell {
                        text: if s.is_empty() { "—".into() } else { s },
                        class,
                    }
                })
                .collect()
        };
        cols.push(col);
    }
    // Colour each compared column's difference by its verdict.
    for (k, c) in l.columns.iter().enumerate() {
        if c.role != "diff" {
            continue;
        }
        let Some(ours) = c.name.strip_prefix("diff_") else {
            continue;
        };
        let Some(vk) = l
            .columns
            .iter()
            .position(|x| x.name == format!("verdict_{ours}"))
        else {
            continue;
        };
        let classes: Vec<&'static str> = cols[vk].iter().map(|c| c.class).collect();
        for (cell, class) in cols[k].iter_mut().zip(classes) {
            if class != "v-none" {
                cell.class = class;
            }
        }
    }
    Ok(View {
        headers: l.columns.iter().map(|c| c.header.clone()).collect(),
        rows: transpose(cols, frame.rows.len()),
    })
}

fn transpose(cols: Vec<Vec<Cell>>, n: usize) -> Vec<Vec<Cell>> {
    (0..n)
        .map(|r| cols.iter().map(|c| c[r].clone()).collect())
        .collect()
}

/// A frame without a layout: every column; `x` with `x_lo`/`x_hi` (or `mean` with
/// `ci_lo`/`ci_hi`) shown as one cell `x [lo, hi]`; a `verdict` column coloured.
fn view_generic(frame: &Csv) -> Result<View, String> {
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
        if numeric(frame, i) {
            let v = numbers(frame, i);
            let mut text = crate::stages::report::format_column(&v, 4);
            if let Some((lo, hi)) =
                pair.filter(|(lo, hi)| numeric(frame, *lo) && numeric(frame, *hi))
            {
                used[lo] = true;
                used[hi] = true;
                let l = crate::stages::report::format_column(&numbers(frame, lo), 3);
                let h = crate::stages::report::format_column(&numbers(frame, hi), 3);
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
                    .map(|text| Cell { text, class: "num" })
                    .collect(),
            );
        } else {
            headers.push(name.clone());
            let verdict = name == "verdict" || name.starts_with("verdict_");
            cols.push(
                frame
                    .rows
                    .iter()
                    .map(|r| {
                        let s = r.get(i).cloned().unwrap_or_default();
                        Cell {
                            class: if verdict { verdict_class(&s) } else { "text" },
                            text: if s.is_empty() { "—".into() } else { s },
                        }
                    })
                    .collect(),
            );
        }
    }
    Ok(View {
        headers,
        rows: transpose(cols, frame.rows.len()),
    })
}

/// Counts the compared cells of one table frame and records its disagreements.
fn count(
    exp: &str,
    title: &str,
    frame: &Csv,
    layout: Option<&Layout>,
    found: &mut Vec<Disagreement>,
) -> (usize, usize, usize) {
    let (mut compared, mut agree, mut differ) = (0, 0, 0);
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
    for (vi, vname) in frame.names.iter().enumerate() {
        let ours = if vname == "verdict" {
            None
        } else if let Some(o) = vname.strip_prefix("verdict_") {
            Some(o)
        } else {
            continue;
        };
        // `report.table` explains cell by cell (why_<c>), `report.verdict` row by row (cause).
        let explanation = match ours {
            Some(o) => frame.col(&format!("why_{o}")),
            None => frame.col("cause"),
        };
        for row in &frame.rows {
            let word = row.get(vi).map_or("", String::as_str);
            let Some(j) = judge_word(word) else { continue };
            if j == Judged::NotJudged {
                continue;
            }
            compared += 1;
            if j == Judged::Agrees {
                agree += 1;
                continue;
            }
            differ += 1;
            let cell_of = |name: &str| {
                frame
                    .col(name)
                    .and_then(|i| row.get(i))
                    .cloned()
                    .unwrap_or_default()
            };
            let mut label: Vec<String> = keys
                .iter()
                .map(|&k| format!("{} = {}", header(&frame.names[k]), row[k]))
                .collect();
            let (o, p) = match ours {
                Some(o) => {
                    label.push(header(o).trim_end_matches(" (ours)").to_string());
                    (cell_of(o), cell_of(&format!("paper_{o}")))
                }
                None => (
                    frame
                        .names
                        .iter()
                        .position(|n| n == "private" || n == "private_text")
                        .and_then(|i| row.get(i))
                        .cloned()
                        .unwrap_or_default(),
                    cell_of("paper"),
                ),
            };
            let fmt = |s: String| {
                s.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite())
                    .map_or(s, |v| {
                        crate::stages::report::format_column(&[Some(v)], 4).remove(0)
                    })
            };
            found.push(Disagreement {
                experiment: exp.to_string(),
                anchor: anchor(exp),
                table: title.to_string(),
                cell: label.join(", "),
                ours: fmt(o),
                paper: p
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .map_or(p.clone(), |v| shortest(Some(v))),
                verdict: word.trim().to_string(),
                explanation: explanation
                    .and_then(|i| row.get(i))
                    .map(|s| s.trim().to_string())
                    .unwrap_or_default(),
            });
        }
    }
    (compared, agree, differ)
}

#[cfg(test)]
mod tests;
