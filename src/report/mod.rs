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
//! A table is a stage that wrote a layout beside its frame
//! ([`crate::stages::report::layout`]), shown as the layout says ([`tables`]): the report
//! names no stage kind. The summary counts what was compared with the paper: printed numbers,
//! from the verdict columns of the table frames (`verdict_<c>`, `verdict`), and the pipelines'
//! stated findings (`findings:` in the manifest). Both speak one vocabulary ([`crate::verdict::Verdict`]:
//! agrees, within CI, explained, unexplained); a cell whose word is not a verdict (not run, no
//! data, side by side) was not compared. The tables' colours, the counts and the list of
//! differences are all made from one reading of those columns ([`counts`]), so they cannot
//! disagree.
//!
//! Here the page itself: the results read, the experiments in order, the template rendered;
//! [`model`] holds what the template shows.

mod audits;
mod counts;
mod markdown;
mod model;
pub mod read;
mod tables;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use crate::stages::report::layout::Layout;
use crate::verdict::Finding;
use read::{Manifest, Outputs};

pub(crate) use audits::AuditRow;
pub use counts::class;
pub(crate) use counts::Tally;
pub(crate) use model::{Disagreement, FindingRow, Summary};
pub use model::{Expected, Written};
use model::{Experiment, Figure, Paper};

const TEMPLATE: &str = include_str!("../../templates/report.html");
/// Largest figure referenced (checked against its manifest hash before it is).
const MAX_FIGURE: u64 = 256 << 20;

/// A path segment as it goes into a relative URL: everything but unreserved bytes encoded
/// (`%` of an instance file name included).
pub(super) fn url_segment(s: &str) -> String {
    const SET: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'.')
        .remove(b'_')
        .remove(b'~');
    percent_encoding::utf8_percent_encode(s, SET).to_string()
}

pub(super) fn anchor(name: &str) -> String {
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
    write_titled(results, expected, None)
}

/// [`write`] under a title of one's own (`dplab report --title`). Without one, the page is a
/// reproduction report when an experiment names a paper, an experiment report otherwise.
pub fn write_titled(
    results: &Path,
    expected: &[Expected],
    title: Option<&str>,
) -> Result<Written, String> {
    let meta = std::fs::metadata(results).map_err(|e| format!("{}: {e}", results.display()))?;
    if !meta.is_dir() {
        return Err(format!("{}: not a directory", results.display()));
    }
    let (html, summary, problems) = build(results, expected, title)?;
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
// Creates (create_new) a temporary file dplab names beside the page; never reads a path.
#[expect(clippy::disallowed_methods)]
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
    title: Option<&str>,
) -> Result<(String, Summary, Vec<String>), String> {
    let mut problems = Vec::new();
    let mut found = Vec::new();
    let mut experiments: BTreeMap<String, Experiment> = BTreeMap::new();
    let mut entries: Vec<(String, PathBuf)> = Vec::new();
    let mut audit_rows: Vec<AuditRow> = Vec::new();
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
            Ok(m) => {
                let outputs = Outputs::new(&path, &m);
                let layouts = read::layouts(&name, &outputs, &m);
                audit_rows.extend(audits::rows(&name, &outputs, &layouts, &mut problems));
                experiment(&name, &outputs, &m, &layouts, &mut problems, &mut found)
            }
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
            "ok" | "incomplete" => summary.with_results += 1,
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
    // The papers first, in name order; experiments of one's own (audits, examples) after
    // them: a reader comes for the reproductions (the page had 19 700 px of audits and
    // examples before its first paper).
    let mut by_paper: Vec<(&String, &Vec<&Experiment>)> = by_paper.iter().collect();
    by_paper.sort_by_key(|(id, _)| (id.is_empty(), id.as_str()));
    let papers: Vec<Paper> = by_paper
        .into_iter()
        .map(|(id, exs)| {
            ordered.extend(exs.iter().copied());
            Paper {
                id: if id.is_empty() {
                    "Experiments of one's own".into()
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
        summary.benchmark.merge(&ex.benchmark);
        summary.findings.merge(&ex.found);
        summary
            .disagreements
            .extend(found.iter().filter(|x| x.experiment == ex.id).cloned());
        summary.finding_list.extend(ex.findings.iter().cloned());
    }
    // Flagged mechanisms first; otherwise in page order (experiments by name here, then
    // stage and row order), which the stable sort keeps.
    let order: Vec<&str> = ordered.iter().map(|e| e.id.as_str()).collect();
    audit_rows.sort_by_key(|a| {
        (
            !a.violation,
            order
                .iter()
                .position(|e| *e == a.experiment)
                .unwrap_or(usize::MAX),
        )
    });
    summary.flagged = audit_rows.iter().filter(|a| a.violation).count();
    summary.unexpected = audit_rows.iter().filter(|a| a.unexpected).count();
    summary.audits = audit_rows;
    summary.benchmarks = ordered
        .iter()
        .flat_map(|e| &e.tables)
        .filter(|t| t.in_audits && !t.data_only)
        .count();
    let mut env = minijinja::Environment::new();
    env.set_auto_escape_callback(|_| minijinja::AutoEscape::Html);
    env.add_template("report.html", TEMPLATE)
        .map_err(|e| format!("the report template: {e}"))?;
    let tmpl = env
        .get_template("report.html")
        .map_err(|e| format!("the report template: {e}"))?;
    // A report over one's own experiments (none names a paper) speaks no reproduction
    // vocabulary: no verdict legend, no list of differences.
    let reproduction = ordered.iter().any(|e| !e.paper.is_empty());
    summary.reproduction = reproduction;
    let html = tmpl
        .render(minijinja::context! {
            reproduction => reproduction,
            results => results.display().to_string(),
            heading => title.map_or_else(
                || {
                    if reproduction {
                        "Reproduction report"
                    } else {
                        "Experiment report"
                    }
                    .to_string()
                },
                str::to_string,
            ),
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

fn experiment(
    name: &str,
    outputs: &Outputs,
    m: &Manifest,
    layouts: &[(String, Result<Layout, String>)],
    problems: &mut Vec<String>,
    found: &mut Vec<Disagreement>,
) -> Experiment {
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
    let mut benchmark = Tally::default();
    for (stage, layout) in layouts {
        if let Some(t) = tables::table(name, outputs, stage, layout, problems, found) {
            // A benchmark's verdicts are another tool's, not a paper's printed numbers.
            if t.in_audits {
                benchmark.merge(&t.numbers);
            } else {
                numbers.merge(&t.numbers);
            }
            tables.push(t);
        }
    }
    // Numbers the description and the findings quote from the frames (`{{stage.column[row]}}`).
    let frames = std::cell::RefCell::new(HashMap::new());
    let fill = |text: &str| {
        crate::text::fill_cells(text, |r| {
            let mut frames = frames.borrow_mut();
            let csv = frames
                .entry(r.stage.clone())
                .or_insert_with(|| outputs.frame(name, &format!("{}.csv", r.stage)));
            let csv = csv.as_ref().map_err(|e| e.clone())?;
            let col = csv
                .col(&r.column)
                .ok_or_else(|| format!("no column `{}`", r.column))?;
            let row = r.row.find(&csv.names, &csv.rows)?;
            Ok(csv.rows[row][col].clone())
        })
    };
    let mut stated = Tally::default();
    let findings: Vec<FindingRow> = m
        .pipeline
        .findings
        .iter()
        .map(|f| {
            stated.add(f.verdict);
            let f = Finding {
                claim: fill(&f.claim),
                found: fill(&f.found),
                why: f.why.as_deref().map(fill),
                ..f.clone()
            };
            finding_row(name, &f)
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
            "wall time of this run".into(),
            m.wall_seconds.map_or("—".into(), |s| format!("{s:.2} s")),
        ),
        (
            "instances".into(),
            format!("{run} run, {cached} from the store"),
        ),
    ];
    // A result taken from the store was computed earlier, perhaps by another build: when,
    // by which and in how long, so "wall time 0.05 s" is not read as what the numbers cost.
    if let Some(from) = from_store(&m.stages) {
        provenance.push(("computed earlier".into(), from));
    }
    if let Some(j) = m.jobs {
        provenance.push(("worker threads".into(), j.to_string()));
    }
    if !m.set.is_empty() {
        provenance.push(("--set".into(), m.set.join("; ")));
    }
    // A run of some stages, or one in which instances failed: what is here is shown, and
    // what is not is said.
    let (status, message) = match &m.incomplete {
        None => ("ok", String::new()),
        Some(inc) => {
            let mut parts = Vec::new();
            if !inc.left_out.is_empty() {
                parts.push(format!(
                    "The run left out stage(s) {} (--stages), which had no earlier outputs to keep.",
                    inc.left_out.join(", ")
                ));
            }
            if !inc.failed.is_empty() {
                parts.push(format!(
                    "Failed, so not made by this run (earlier outputs, where there were any, are kept and marked): {}.",
                    inc.failed.join("; ")
                ));
            }
            if !inc.stale.is_empty() {
                parts.push(format!("Stale: {}.", inc.stale.join("; ")));
            }
            ("incomplete", parts.join(" "))
        }
    };
    Experiment {
        id: name.to_string(),
        anchor: anchor(name),
        title: m.pipeline.title.clone(),
        paper: m.pipeline.source.paper.clone(),
        item: m.pipeline.source.item.clone(),
        description: markdown::to_html(&fill(&m.pipeline.description)),
        status,
        message,
        command: String::new(),
        figures,
        tables,
        findings,
        provenance,
        verdict_line: if numbers.compared + stated.compared + benchmark.compared == 0 {
            "nothing: this experiment states no finding and its tables hold no printed number of the paper.".into()
        } else if benchmark.compared > 0 {
            format!(
                "{}; {}; {} (another tool's published verdicts, in its table at the head of the Audits section).",
                numbers.text("printed number", "printed numbers"),
                stated.text("finding", "findings"),
                benchmark.text("benchmark verdict", "benchmark verdicts")
            )
        } else {
            format!(
                "{}; {}.",
                numbers.text("printed number", "printed numbers"),
                stated.text("finding", "findings")
            )
        },
        numbers,
        benchmark,
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

#[cfg(test)]
mod tests;

/// What the instances a run took from the store say of their computation, summed over the
/// stages: "40 instances computed 2026-11-20 14:02:11 – 2026-11-28 09:11:02 UTC by 0.1.0
/// a1b2c3d4e5f6 0f1e2d3c4b5a, 12.3 s of compute". `None` when none came from the store.
fn from_store<S>(stages: &[crate::pipeline::manifest::StageEntry<S>]) -> Option<String> {
    let mut n = 0;
    let (mut earliest, mut latest): (Option<&str>, Option<&str>) = (None, None);
    let mut builds: Vec<&str> = Vec::new();
    let (mut seconds, mut unrecorded) = (0.0, 0);
    for st in stages {
        let Some(f) = &st.from_store else { continue };
        n += st.instances_cached;
        unrecorded += f.unrecorded;
        seconds += f.seconds;
        // RFC 3339 UTC times of one length order as text.
        if !f.earliest.is_empty() && earliest.is_none_or(|e| f.earliest.as_str() < e) {
            earliest = Some(&f.earliest);
        }
        if !f.latest.is_empty() && latest.is_none_or(|l| f.latest.as_str() > l) {
            latest = Some(&f.latest);
        }
        for b in &f.builds {
            if !builds.contains(&b.as_str()) {
                builds.push(b);
            }
        }
    }
    if n == 0 {
        return None;
    }
    let when = |t: &str| t.replacen('T', " ", 1).trim_end_matches('Z').to_string();
    let mut text = match (earliest, latest) {
        (Some(e), Some(l)) if e == l => format!("{n} instance(s) computed {} UTC", when(e)),
        (Some(e), Some(l)) => format!("{n} instance(s) computed {} – {} UTC", when(e), when(l)),
        _ => format!("{n} instance(s)"),
    };
    if !builds.is_empty() {
        text += &format!(" by {}", builds.join("; "));
    }
    if n > unrecorded {
        text += &format!(", {seconds:.2} s of compute");
    }
    if unrecorded > 0 {
        text += &format!(" ({unrecorded} stored by a dplab that did not record when)");
    }
    Some(text)
}
