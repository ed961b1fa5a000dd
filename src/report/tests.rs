//! The report on results directories made here: good ones, damaged ones, hostile ones.

// The tests read the pages and files they wrote.
#![allow(clippy::disallowed_methods)]

use std::collections::BTreeMap;
use std::path::Path;

use sha2::{Digest, Sha256};

use super::counts::judgements;
use super::*;
use crate::verdict::Verdict;

/// The page with the entities the template's escaping writes turned back into characters.
fn page(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap()
        .replace("&#x2f;", "/")
        .replace("&#x27;", "'")
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
}

const SVG: &str = r#"<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10"/></svg>"#;

/// A results directory of pipeline `name` holding `files`, with a manifest that lists them
/// (size and sha256) and the given stages (name, kind).
fn results_dir(
    root: &Path,
    name: &str,
    files: &[(&str, &str)],
    stages: &[(&str, &str)],
    description: &str,
) {
    results_dir_with(
        root,
        name,
        files,
        stages,
        description,
        serde_json::json!([]),
    );
}

/// [`results_dir`] with the pipeline's findings in its manifest.
fn results_dir_with(
    root: &Path,
    name: &str,
    files: &[(&str, &str)],
    stages: &[(&str, &str)],
    description: &str,
    findings: serde_json::Value,
) {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let mut outputs = Vec::new();
    for (f, text) in files {
        std::fs::write(dir.join(f), text).unwrap();
        outputs.push(serde_json::json!({
            "file": f,
            "bytes": text.len(),
            "sha256": crate::text::hex(&Sha256::digest(text.as_bytes())),
        }));
    }
    let stages: Vec<_> = stages
        .iter()
        .map(|(n, k)| serde_json::json!({"name": n, "kind": k, "instances_run": 2, "instances_cached": 1, "stored": true, "seeds": []}))
        .collect();
    let m = serde_json::json!({
        "dplab_version": "0.1.0",
        "git_commit": "abc123",
        "pipeline": {"name": name, "title": format!("Title of {name}"), "file": format!("pipelines/{name}.yaml"),
                     "sha256": "00ff", "source": {"paper": "paper-one", "item": "Table 1"}, "description": description,
                     "findings": findings},
        "profile": "ci",
        "set": [],
        "seed": 7,
        "jobs": 2,
        "wall_seconds": 1.5,
        "outputs": outputs,
        "stages": stages,
    });
    std::fs::write(dir.join("manifest.json"), serde_json::to_vec(&m).unwrap()).unwrap();
}

const LAYOUT: &str = r#"{"title": "Table 1 beside ours", "notes": "*read* me", "digits": 4, "columns": [
  {"name": "lambda", "header": "λ", "role": "key"},
  {"name": "d", "header": "D (ours)", "role": "ours"},
  {"name": "paper_d", "header": "D (paper)", "role": "paper"},
  {"name": "diff_d", "header": "Δ D", "role": "diff"},
  {"name": "verdict_d", "header": "verdict", "role": "verdict"},
  {"name": "why_d", "header": "why D differs", "role": "explanation"}]}"#;

const TABLE: &str = "lambda,d,paper_d,diff_d,verdict_d,why_d\n\
0.5,0.5086,0.509,-0.0004,agrees,\n\
1.0,0.7947,0.780,0.0147,explained,the paper's channel sits at its rounded MI\n\
2.0,0.1,,,,\n";

const VERDICT: &str =
    "source,value,sigma,paper,private_text,private_text_lo,private_text_hi,verdict,cause\n\
CRM,max_abs_error,2.0,0.002,0.0011,0.0001,0.0022,within CI,inside the 95% interval of private_text\n\
CRM,max_abs_error,4.0,0.010,NaN,NaN,NaN,not run,σ not in this run's axes\n\
CSN,max_rel_error,2.0,0.500,0.1,0.09,0.11,unexplained,no cause found: above every run of ours\n\
CSN,synthesis_seconds,2.0,2.5,0.1,0.09,0.11,side by side,not compared as a difference\n\
CSN,synthesis_seconds,4.0,2.5,NaN,NaN,NaN,not run,σ not in this run's axes\n";

/// The layout `report.verdict` writes beside [`VERDICT`]: the thesis's arrangement (datasets
/// and errors down, σ across; the times left out) and ours per row.
const VERDICT_LAYOUT: &str = r#"{"title": "Thesis table", "notes": null, "digits": 4,
  "columns": [{"name": "source", "header": "dataset", "role": "key"},
              {"name": "value", "header": "error", "role": "key"},
              {"name": "sigma", "header": "σ", "role": "key"}],
  "show": {"grid": {"printed_by": "the thesis", "ours": "private_text",
                    "headers": ["dataset", "error", "σ = 2", "σ = 4"],
                    "rows": [{"head": ["CRM", "max abs error"], "cells": [0, 1]},
                             {"head": ["CSN", "max rel error"], "cells": [2, null]}]}},
  "markdown": true,
  "ours": ["1.10e-3 [1.00e-4, 2.20e-3]", "—", "0.1000 [0.0900, 0.1100]", "0.100", "—"]}"#;

fn good(root: &Path) {
    results_dir(
        root,
        "exp-a",
        &[
            ("table.csv", TABLE),
            ("table.json", LAYOUT),
            ("table.md", "## Table 1 beside ours\n"),
            ("figure.svg", SVG),
            ("figure__eps=0.5%2C%41.svg", SVG),
        ],
        &[("table", "report.table"), ("figure", "plot.lines")],
        "A **bold** claim.\n\n<script>alert('x')</script>",
    );
    results_dir(
        root,
        "exp-b",
        &[
            ("table.csv", VERDICT),
            (
                "table.md",
                "## Thesis table\n\n| a | b |\n|---|---|\n| 1 | 2 |\n",
            ),
            ("table.json", VERDICT_LAYOUT),
        ],
        &[("table", "report.verdict")],
        "",
    );
}

/// The counts are the verdict words: an unexplained cell whose note says where the paper's
/// value lies is not "with an explanation" (the page once counted 118 of 126 differences as
/// explained while its tables called 61 of them unexplained).
#[test]
fn counts_come_from_the_verdict_columns() {
    let dir = tempfile::tempdir().unwrap();
    good(dir.path());
    let w = write(dir.path(), &[]).unwrap();
    assert!(w.problems.is_empty(), "{:?}", w.problems);
    let s = &w.summary;
    assert_eq!((s.experiments, s.with_results), (2, 2));
    // exp-a: agrees + explained; exp-b: within CI + unexplained (not run and side by side are
    // not compared).
    let n = s.numbers;
    assert_eq!((n.compared, n.agree, n.differ), (4, 2, 2));
    assert_eq!(
        (n.agrees, n.within_ci, n.explained, n.unexplained),
        (1, 1, 1, 1)
    );
    assert_eq!(s.disagreements.len(), 2);
    let d = &s.disagreements[0];
    assert_eq!(d.experiment, "exp-a");
    assert_eq!(d.cell, "λ = 1.0, D");
    assert_eq!(d.note, "the paper's channel sits at its rounded MI");
    assert_eq!(d.verdict, Verdict::Explained);
    // The paper's number as printed, ours with a digit more.
    assert_eq!((d.paper.as_str(), d.ours.as_str()), ("0.780", "0.7947"));
    let d = &s.disagreements[1];
    assert_eq!(d.verdict, Verdict::Unexplained);
    assert_eq!(d.note, "no cause found: above every run of ours");
    assert_eq!(
        (d.paper.as_str(), d.ours.as_str()),
        ("0.500", "0.1000 [0.0900, 0.1100]")
    );
    assert_eq!(s.findings, Tally::default());
}

/// What the page shows agrees with what it counts: the cells coloured with each verdict in
/// its tables, the rows of the list of differences and the summary's figures are the counts
/// of the verdict words in the frames, counted here from the CSV text alone.
#[test]
fn the_page_colours_and_lists_what_the_frames_say() {
    let dir = tempfile::tempdir().unwrap();
    good(dir.path());
    let w = write(dir.path(), &[]).unwrap();
    let html = page(&w.path);
    let mut words: BTreeMap<&str, usize> = BTreeMap::new();
    for frame in [TABLE, VERDICT] {
        let mut lines = frame.lines();
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        let cols: Vec<usize> = (0..header.len())
            .filter(|&i| header[i] == "verdict" || header[i].starts_with("verdict_"))
            .collect();
        for line in lines {
            let cells: Vec<&str> = line.split(',').collect();
            for &c in &cols {
                *words.entry(cells[c]).or_default() += 1;
            }
        }
    }
    let tables = |class: &str| {
        html.split("<table")
            .filter(|t| t.starts_with(r#" class="result""#) || t.starts_with(r#" class="thesis""#))
            .map(|t| t.split("</table>").next().unwrap())
            .map(|t| t.matches(&format!(r#"<td class="{class}"#)).count())
            .sum::<usize>()
    };
    // A verdict cell and, in a table with a layout, its difference cell carry the colour.
    assert_eq!(tables("v-agree"), 2 * words["agrees"]);
    assert_eq!(tables("v-explained"), 2 * words["explained"]);
    assert_eq!(tables("v-within"), words["within CI"]);
    assert_eq!(tables("v-unexplained"), words["unexplained"]);
    let s = &w.summary.numbers;
    assert_eq!(s.explained, words["explained"]);
    assert_eq!(s.unexplained, words["unexplained"]);
    assert_eq!(s.agrees + s.within_ci, words["agrees"] + words["within CI"]);
    assert!(html.contains(&format!(
        r#"data-explained="{}" data-unexplained="{}""#,
        s.explained, s.unexplained
    )));
    let listed = html.split(r#"<table id="disagreements">"#).nth(1).unwrap();
    let listed = listed.split("</table>").next().unwrap();
    assert_eq!(
        listed.matches(r#"<tr class="difference">"#).count(),
        s.differ
    );
    assert_eq!(
        listed
            .matches(r#"<td class="v-unexplained">unexplained</td>"#)
            .count(),
        s.unexplained
    );
}

/// The experiments come first; the list of differences, however long, after them.
#[test]
fn the_differences_are_listed_after_the_experiments() {
    let dir = tempfile::tempdir().unwrap();
    good(dir.path());
    let w = write(dir.path(), &[]).unwrap();
    let html = page(&w.path);
    let summary_end = html.find("</section>").unwrap();
    let first = html.find(r#"<section class="experiment""#).unwrap();
    let list = html.find(r#"<table id="disagreements">"#).unwrap();
    assert!(
        summary_end < first && first < list,
        "summary, experiments, then the list"
    );
    assert!(
        html.find(r#"<section id="differences">"#).unwrap()
            > html.rfind(r#"<section class="experiment""#).unwrap()
    );
    // Wide figures open at full size.
    assert!(
        html.contains(r#"<a class="full" href="exp-a/figure.svg""#),
        "{html}"
    );
}

/// A pipeline's findings are counted beside the printed numbers, listed in the summary, and a
/// section with figures only gets its verdict line.
#[test]
fn findings_are_counted_and_shown_with_their_section() {
    let dir = tempfile::tempdir().unwrap();
    good(dir.path());
    results_dir_with(
        dir.path(),
        "exp-fig",
        &[("figure.svg", SVG)],
        &[("figure", "plot.lines")],
        "",
        serde_json::json!([
            {"claim": "Figure 10: distortion grows with λ", "found": "it falls from 0.41 to 0.12", "verdict": "explained", "why": "a larger λ weighs distortion more"},
            {"claim": "Figure 9: MI grows with λ", "found": "it grows from 0.05 to 0.73", "verdict": "agrees"}
        ]),
    );
    let w = write(dir.path(), &[]).unwrap();
    assert!(w.problems.is_empty(), "{:?}", w.problems);
    let f = w.summary.findings;
    assert_eq!(
        (f.compared, f.agree, f.explained, f.unexplained),
        (2, 1, 1, 0)
    );
    // The printed numbers' counts are not changed by findings.
    assert_eq!(w.summary.numbers.compared, 4);
    let html = page(&w.path);
    assert!(
        html.contains(r#"data-findings="2" data-findings-agree="1" data-findings-explained="1""#),
        "{html}"
    );
    let section = html.split(r#"id="exp-exp-fig""#).nth(1).unwrap();
    let section = section.split("</section>").next().unwrap();
    assert!(
        section.contains("<strong>Compared with the paper:</strong> 0 printed numbers; 2 findings: 1 agree, 1 explained."),
        "{section}"
    );
    assert!(
        section.contains("a larger λ weighs distortion more"),
        "{section}"
    );
    // A section that compares nothing says so.
    results_dir(
        dir.path(),
        "exp-none",
        &[("figure.svg", SVG)],
        &[("figure", "plot.lines")],
        "",
    );
    let w = write(dir.path(), &[]).unwrap();
    let html = page(&w.path);
    let section = html.split(r#"id="exp-exp-none""#).nth(1).unwrap();
    assert!(section
        .split("</section>")
        .next()
        .unwrap()
        .contains("Compared with the paper:</strong> nothing"));
}

/// A word in a verdict column that is not a verdict (a frame of an older dplab, damage) is
/// named, not silently left out of the counts.
#[test]
fn a_word_that_is_no_verdict_is_a_problem() {
    let dir = tempfile::tempdir().unwrap();
    results_dir(
        dir.path(),
        "exp-a",
        &[
            ("table.csv", "lambda,d,paper_d,verdict_d\n0.5,1,2,differs\n"),
            ("table.json", LAYOUT),
        ],
        &[("table", "report.table")],
        "",
    );
    let w = write(dir.path(), &[]).unwrap();
    let all = w.problems.join("\n");
    assert!(
        all.contains("`differs` in column `verdict_d` is not a verdict"),
        "{all}"
    );
    let frame = read::Csv::parse(b"verdict,cause\nwithin CI,x\nno data,\nexplained,c\n").unwrap();
    let j = judgements(&frame).unwrap();
    assert_eq!(
        j.iter().map(|j| (j.row, j.verdict)).collect::<Vec<_>>(),
        [(0, Verdict::WithinCi), (2, Verdict::Explained)]
    );
}

#[test]
fn the_page_has_every_section_its_figures_and_escapes_what_it_reads() {
    let dir = tempfile::tempdir().unwrap();
    good(dir.path());
    let w = write(dir.path(), &[]).unwrap();
    let html = page(&w.path);
    assert!(html.contains(r#"id="exp-exp-a""#) && html.contains(r#"id="exp-exp-b""#));
    assert!(
        html.contains(r#"src="exp-a/figure.svg""#),
        "figures are referenced relatively"
    );
    // An instance file's `%` is itself encoded in the URL.
    assert!(
        html.contains(r#"src="exp-a/figure__eps%3D0.5%252C%2541.svg""#),
        "{html}"
    );
    assert!(
        html.contains("<strong>bold</strong>"),
        "the description is Markdown"
    );
    assert!(
        !html.contains("<script>"),
        "raw HTML from a results directory is text"
    );
    assert!(html.contains("D (paper)") && html.contains("class=\"v-explained\""));
    assert!(html.contains("Every run, cell by cell"));
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "nothing loads from the network"
    );
}

#[test]
fn damage_is_reported_not_panicked_on() {
    let dir = tempfile::tempdir().unwrap();
    good(dir.path());
    let root = dir.path();
    // A figure changed after the run, a table that is not CSV, a manifest that is not JSON,
    // a results directory that is a link, a directory of another pipeline.
    std::fs::write(root.join("exp-a/figure.svg"), SVG.replace("10", "11")).unwrap();
    std::fs::create_dir(root.join("broken")).unwrap();
    std::fs::write(root.join("broken/manifest.json"), "{not json").unwrap();
    std::fs::create_dir(root.join("empty")).unwrap();
    std::os::unix::fs::symlink("/etc", root.join("linked")).unwrap();
    std::fs::create_dir(root.join("bad name")).unwrap();
    std::fs::rename(root.join("exp-b"), root.join("exp-c")).unwrap();
    let w = write(root, &[]).unwrap();
    let all = w.problems.join("\n");
    assert!(
        all.contains("figure.svg") && all.contains("changed after the run"),
        "{all}"
    );
    assert!(all.contains("broken/manifest.json"), "{all}");
    assert!(all.contains("empty/manifest.json"), "{all}");
    assert!(
        all.contains("linked") && all.contains("symbolic link"),
        "{all}"
    );
    assert!(all.contains("bad name"), "{all}");
    assert!(all.contains("not `exp-c`"), "{all}");
    assert_eq!(w.summary.damaged, 3, "{all}");
    let html = page(&w.path);
    assert!(
        !html.contains(r#"src="exp-a/figure.svg""#),
        "a changed figure is not shown"
    );
}

#[test]
fn a_hostile_file_in_a_results_directory_is_not_read_or_followed() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    results_dir(
        root,
        "exp-a",
        &[("table.csv", TABLE), ("table.json", LAYOUT)],
        &[("table", "report.table")],
        "",
    );
    // The listed table replaced by a link to a file elsewhere, with the same size.
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), TABLE).unwrap();
    std::fs::remove_file(root.join("exp-a/table.csv")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret"), root.join("exp-a/table.csv"))
        .unwrap();
    // index.html a link to a file outside: the page replaces the link, the file stays.
    std::os::unix::fs::symlink(outside.path().join("victim"), root.join("index.html")).unwrap();
    std::fs::write(outside.path().join("victim"), "keep").unwrap();
    let w = write(root, &[]).unwrap();
    assert!(
        w.problems.iter().any(|p| p.contains("symbolic link")),
        "{:?}",
        w.problems
    );
    assert_eq!(
        std::fs::read_to_string(outside.path().join("victim")).unwrap(),
        "keep"
    );
    let meta = std::fs::symlink_metadata(root.join("index.html")).unwrap();
    assert!(meta.is_file());
    let leftovers: Vec<_> = std::fs::read_dir(root)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty());
}

#[test]
fn not_a_directory_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("file");
    std::fs::write(&f, "x").unwrap();
    assert!(write(&f, &[]).unwrap_err().contains("not a directory"));
    assert!(write(&dir.path().join("missing"), &[]).is_err());
}

#[test]
fn experiments_without_results_say_why_and_how_to_get_them() {
    let dir = tempfile::tempdir().unwrap();
    good(dir.path());
    let expected = |name: &str, missing: &[&str]| Expected {
        file: format!("pipelines/{name}.yaml").into(),
        name: name.into(),
        title: format!("Title of {name}"),
        paper: "paper-two".into(),
        item: "Figure 2".into(),
        description: "d".into(),
        missing_data: missing.iter().map(|s| s.to_string()).collect(),
    };
    let w = write(
        dir.path(),
        &[
            expected("exp-a", &[]),
            expected("needs-data", &["adult", "wdbc"]),
            expected("never-run", &[]),
        ],
    )
    .unwrap();
    assert_eq!(
        (
            w.summary.experiments,
            w.summary.unavailable,
            w.summary.not_run
        ),
        (4, 1, 1)
    );
    let html = page(&w.path);
    assert!(html.contains("data not available"));
    assert!(
        html.contains(
            "dplab data fetch --pipelines pipelines/needs-data.yaml && dplab run pipelines/needs-data.yaml --out"
        ) && html.contains("adult, wdbc not on this machine"),
        "{html}"
    );
}

/// A table whose layout is a grid is shown in the paper's arrangement: one row per dataset and
/// error, one column per σ, the thesis's value above ours (mean [95% CI]) coloured by the
/// verdict read from the frame; the rows its layout leaves out (times) are not shown.
#[test]
fn grid_layouts_are_shown_as_the_paper_lays_them_out() {
    let dir = tempfile::tempdir().unwrap();
    good(dir.path());
    let w = write(dir.path(), &[]).unwrap();
    let html = page(&w.path);
    let at = html
        .find(r#"<table class="thesis""#)
        .expect("no thesis layout");
    let table = &html[at..at + html[at..].find("</table>").unwrap()];
    let headers: Vec<&str> = table
        .split("<th>")
        .skip(1)
        .map(|h| h.split("</th>").next().unwrap())
        .collect();
    assert_eq!(headers, ["dataset", "error", "σ = 2", "σ = 4"]);
    let rows: Vec<&str> = table.split("<tr>").skip(2).collect();
    assert_eq!(rows.len(), 2, "{table}");
    assert!(rows[0].contains(r#"<th scope="row">CRM</th>"#) && rows[0].contains("max abs error"));
    assert!(
        // Ours on lines of its own (value, interval), the interval never broken inside.
        rows[0].contains(&format!(r#"<td class="v-within" title="inside the 95% interval of private_text"><span class="thesis-value">0.002</span><br><span class="ours-value">1.10e-3{}[1.00e-4,{}2.20e-3]</span><br><span class="verdict-word">within CI</span>"#, '\n', '\u{a0}')),
        "{}",
        rows[0]
    );
    // σ = 4 was not run: the thesis's value as printed, ours a dash, not coloured as a verdict.
    assert!(
        rows[0].contains(
            r#"<td class="v-none" title="σ not in this run's axes"><span class="thesis-value">0.010</span><br><span class="ours-value">—</span><br><span class="verdict-word">not run</span>"#
        ),
        "{}",
        rows[0]
    );
    assert!(rows[1].contains("max rel error") && rows[1].contains(r#"class="v-unexplained""#));
    assert!(
        !table.contains("synthesis"),
        "times are not in the error table"
    );
    // Each cell once: the frame is not repeated as a table of its own.
    let section = html.split(r#"id="exp-exp-b""#).nth(1).unwrap();
    assert!(!section.contains(r#"<table class="result""#), "{section}");
    assert!(html.contains("As the thesis lays it out: in each cell the thesis's value as printed, below it ours (mean [95% CI] of private_text,"));
    // The list of differences shows ours as the layout gives it, and names the cell as the
    // grid's heads do (#58 item 8: it read `source = CSN, value = max_rel_error, sigma = 2.0`).
    let d = &w.summary.disagreements[1];
    assert_eq!(d.cell, "dataset = CSN, error = max rel error, σ = 2");
    assert_eq!(d.ours, "0.1000 [0.0900, 0.1100]");
    // A grid naming a row the frame lacks is a problem of its table, not a panic.
    let root = dir.path();
    results_dir(
        root,
        "exp-d",
        &[
            ("table.csv", VERDICT),
            ("table.json", &VERDICT_LAYOUT.replace("[0, 1]", "[0, 9]")),
        ],
        &[("table", "report.verdict")],
        "",
    );
    let w = write(root, &[]).unwrap();
    assert!(
        w.problems
            .iter()
            .any(|p| p == "exp-d/table.csv: its layout shows row 10 of a frame of 5 rows"),
        "{:?}",
        w.problems
    );
}

/// What is a table is said by the stage's layout, never by its kind: a kind the report has
/// never heard of is shown by its layout, a stage without a layout is not a table whatever its
/// kind, and a layout that says `link` shows the data behind a figure as a link.
#[test]
fn a_table_is_a_stage_with_a_layout_whatever_its_kind() {
    let dir = tempfile::tempdir().unwrap();
    results_dir(
        dir.path(),
        "exp-a",
        &[
            ("new.csv", TABLE),
            ("new.json", LAYOUT),
            ("old.csv", TABLE),
            ("data.csv", "x,y\n1,2\n3,4\n"),
            (
                "data.json",
                r#"{"title": "T", "columns": [], "show": "link"}"#,
            ),
        ],
        &[
            ("new", "a.kind_not_yet_written"),
            ("old", "report.table"),
            ("data", "another.kind"),
        ],
        "",
    );
    let w = write(dir.path(), &[]).unwrap();
    assert!(w.problems.is_empty(), "{:?}", w.problems);
    assert_eq!(
        (w.summary.numbers.compared, w.summary.numbers.explained),
        (2, 1)
    );
    let html = page(&w.path);
    assert!(
        html.contains(r#"<table class="result" data-stage="new">"#),
        "{html}"
    );
    assert!(!html.contains(r#"data-stage="old""#), "{html}");
    assert!(
        html.contains(
            r#"The data behind a figure (2 rows): <a href="exp-a/data.csv">data.csv</a>"#
        ),
        "{html}"
    );
}

/// An experiment of one's own: no paper named, no printed numbers. The page is an "Experiment
/// report" (or takes the title given), says nothing of comparisons with papers, and still shows
/// the experiment's figure and table.
#[test]
fn an_experiment_without_a_paper_gets_an_experiment_report() {
    let dir = tempfile::tempdir().unwrap();
    results_dir(
        dir.path(),
        "mine",
        &[
            ("figure.svg", SVG),
            ("errors.csv", "eps,l1\n0.5,2.1\n1,1.0\n"),
            ("errors.md", "| eps | l1 |\n|---|---|\n| 0.5 | 2.1 |\n"),
            (
                "errors.json",
                r#"{"title": "L1 error", "columns": [{"name": "eps", "header": "ε", "role": "key"}, {"name": "l1", "header": "L1", "role": "ours"}]}"#,
            ),
        ],
        &[("errors", "report.table"), ("figure", "plot.lines")],
        "",
    );
    // No paper: the manifest's source is empty.
    let m = dir.path().join("mine/manifest.json");
    let text = std::fs::read_to_string(&m).unwrap().replace(
        r#""paper":"paper-one","item":"Table 1""#,
        r#""paper":"","item":"""#,
    );
    assert!(text.contains(r#""paper":"""#), "{text}");
    std::fs::write(&m, text).unwrap();
    let w = write(dir.path(), &[]).unwrap();
    assert!(w.problems.is_empty(), "{:?}", w.problems);
    let html = page(&w.path);
    assert!(html.contains("<h1>Experiment report</h1>"), "{html}");
    assert!(!html.contains("id=\"tally\"") && !html.contains("id=\"differences\""));
    assert!(!html.contains("printed numbers"), "{html}");
    // Nor a verdict line or an empty paper line in its section.
    assert!(!html.contains("Compared with the paper"), "{html}");
    assert!(!html.contains(r#"<p class="meta"></p>"#), "{html}");
    assert!(
        html.contains("mine/figure.svg") && html.contains("L1 error"),
        "{html}"
    );
    let w = write_titled(dir.path(), &[], Some("Noise on my histogram")).unwrap();
    assert!(page(&w.path).contains("<h1>Noise on my histogram</h1>"));
    // Beside a paper's experiment, it is a reproduction report again.
    good(dir.path());
    let html = page(&write(dir.path(), &[]).unwrap().path);
    assert!(html.contains("<h1>Reproduction report</h1>") && html.contains("id=\"tally\""));
}

/// An audit frame of version 2 says how sure it is: its how-sure columns are no axis of the
/// instance, the least detectable loss stands under "none found", the search split's counts
/// beside the event, and an event longer than the table shows is cut, whole on hover.
#[test]
fn an_audit_row_says_how_sure_it_is() {
    let long = format!("q >= {}", "1".repeat(200));
    let audit = format!(
        "epsilon,delta,epsilon_lb,confidence,samples,p1,p2,pair,event,violation,detectable,search_samples,search_k1,search_k2,search_score,eps\n\
         1.0,0.0,0.0,0.95,100000,0.5,0.5,0 vs 1,{long},false,1.3456,50000,120,100,0.012,1.0\n"
    );
    let layout = r#"{"title": "ε lower bounds", "columns": [], "show": "audit"}"#;
    let dir = tempfile::tempdir().unwrap();
    results_dir(
        dir.path(),
        "exp-a",
        &[("checked.csv", &audit), ("checked.json", layout)],
        &[("checked", "audit.epsilon")],
        "",
    );
    let w = write(dir.path(), &[]).unwrap();
    assert!(w.problems.is_empty(), "{:?}", w.problems);
    let a = &w.summary.audits[0];
    assert_eq!(a.instance, "eps = 1.0");
    assert_eq!(a.detectable, "1.35");
    assert_eq!(
        a.search,
        "chosen on 120 / 100 of 50000 search draws, bound 0.012"
    );
    assert_eq!(
        a.event.chars().count(),
        super::audits::EVENT_SHOWN + 2,
        "{}",
        a.event
    );
    assert_eq!(a.event_full, long);
    let html = page(&w.path);
    assert!(html.contains("would flag ε ≥ 1.35 here"), "{html}");
    let escaped = long.replace('>', "&gt;");
    assert!(html.contains(&format!(r#"title="{escaped}""#)), "{html}");
}

/// What is an audit is said by the stage's layout too (`"show": "audit"`), never by its kind:
/// its rows go to the Audits section, flagged first, and nowhere else; a frame with the same
/// columns and no such layout is no audit.
#[test]
fn an_audit_is_a_stage_whose_layout_says_audit_whatever_its_kind() {
    const AUDIT: &str =
        "epsilon,delta,epsilon_lb,confidence,samples,p1,p2,pair,event,violation,eps\n\
        1.0,0.0,0.2,0.95,100000,0.5,0.4,0 vs 1,q >= 2.5,false,1.0\n\
        0.1,0.0,0.6,0.95,100000,0.6,0.3,0 vs 1,q >= 0.5,true,0.1\n";
    const AUDIT_LAYOUT: &str = r#"{"title": "ε lower bounds", "columns": [], "show": "audit"}"#;
    let dir = tempfile::tempdir().unwrap();
    results_dir(
        dir.path(),
        "exp-a",
        &[
            ("checked.csv", AUDIT),
            ("checked.json", AUDIT_LAYOUT),
            ("lookalike.csv", AUDIT),
        ],
        &[
            ("checked", "a.kind_not_yet_written"),
            ("lookalike", "audit.epsilon"),
        ],
        "",
    );
    let w = write(dir.path(), &[]).unwrap();
    assert!(w.problems.is_empty(), "{:?}", w.problems);
    let rows: Vec<(&str, &str, bool)> = w
        .summary
        .audits
        .iter()
        .map(|a| (a.stage.as_str(), a.instance.as_str(), a.violation))
        .collect();
    assert_eq!(
        rows,
        [
            ("checked", "eps = 0.1", true),
            ("checked", "eps = 1.0", false)
        ]
    );
    assert_eq!(w.summary.flagged, 1);
    let html = page(&w.path);
    // In the Audits table only, not as a table of its experiment; the look-alike nowhere.
    assert_eq!(html.matches(r#"data-stage="checked""#).count(), 2, "{html}");
    assert!(
        !html.contains(r#"class="result" data-stage="checked""#),
        "{html}"
    );
    assert!(!html.contains(r#"data-stage="lookalike""#), "{html}");
}

/// The summary says how many audits there are, how many flagged and how many unexpected (a
/// verdict other than its stage's `expect:`; a frame without the column: any flag), and each
/// row says its expectation; a curve claim is shown as written, at the point it was tested.
#[test]
fn the_summary_counts_audits_flagged_and_unexpected() {
    const AUDIT: &str = "epsilon,delta,epsilon_lb,confidence,samples,p1,p2,pair,event,violation,\
        detectable,search_samples,search_k1,search_k2,search_score,claim,conversion,delta_lb,\
        draws_to_flag,expect,unexpected,reproducible,case\n\
        1.0,0.0,0.2,0.95,100000,0.5,0.4,0 vs 1,q >= 2.5,false,1.3,1000,10,5,0.1,ε = 1,as claimed,0.0,52000,none,false,true,a\n\
        0.1,0.0,0.6,0.95,100000,0.6,0.3,0 vs 1,q >= 0.5,true,,1000,10,5,0.5,ε = 0.1,as claimed,0.1,900,violation,false,true,b\n\
        2.5,0.0056,6.1,0.95,100000,0.6,0.3,0 vs 1,q >= 0.5,true,,1000,10,5,5.9,μ = 0.5 (GDP),exact,0.02,900,none,true,true,c\n";
    const LAYOUT: &str = r#"{"title": "ε lower bounds", "columns": [], "show": "audit"}"#;
    let dir = tempfile::tempdir().unwrap();
    results_dir(
        dir.path(),
        "exp-a",
        &[("checked.csv", AUDIT), ("checked.json", LAYOUT)],
        &[("checked", "audit.epsilon")],
        "",
    );
    let w = write(dir.path(), &[]).unwrap();
    assert!(w.problems.is_empty(), "{:?}", w.problems);
    assert_eq!(
        (
            w.summary.audits.len(),
            w.summary.flagged,
            w.summary.unexpected
        ),
        (3, 2, 1)
    );
    let gdp = w
        .summary
        .audits
        .iter()
        .find(|a| a.instance == "case = c")
        .unwrap();
    assert_eq!(gdp.claim, "μ = 0.5 (GDP), at ε = 2.5, δ = 0.0056");
    let html = page(&w.path);
    assert!(
        html.contains(r#"data-audits="3" data-flagged="2" data-unexpected="1""#)
            && html.contains("3 audited instances, 2 flagged,"),
        "{html}"
    );
    assert!(
        html.contains("expected: violation") && html.contains("52000 draws would flag it"),
        "{html}"
    );
}

/// A table whose layout says `in_audits` (`report.table section: audits`, a benchmark of the
/// audits) stands at the head of the Audits section, once, and its experiment's section links
/// to it; the Audits section is there for it even when no audit frame is.
#[test]
fn a_benchmark_table_stands_in_the_audits_section() {
    const TABLE: &str = "mechanism,flagged\nSVT3,1\nSVT1,0\n";
    const LAYOUT: &str = r#"{"title": "The benchmark", "columns": [
        {"name": "mechanism", "header": "mechanism", "role": "key"},
        {"name": "flagged", "header": "flagged", "role": "value"}], "in_audits": true}"#;
    let dir = tempfile::tempdir().unwrap();
    results_dir(
        dir.path(),
        "exp-b",
        &[("bench.csv", TABLE), ("bench.json", LAYOUT)],
        &[("bench", "report.table")],
        "",
    );
    let w = write(dir.path(), &[]).unwrap();
    assert!(w.problems.is_empty(), "{:?}", w.problems);
    assert_eq!(w.summary.benchmarks, 1);
    let html = page(&w.path);
    let audits = html
        .find(r#"<section id="audits""#)
        .expect("an Audits section");
    let table = html
        .find(r#"class="result" data-stage="bench""#)
        .expect("the table");
    assert!(
        table > audits,
        "the table is not in the Audits section: {html}"
    );
    assert_eq!(html.matches(r#"data-stage="bench""#).count(), 1, "{html}");
    assert!(html.contains(">SVT3<"), "{html}");
    let link = html.find(r##"href="#exp-exp-b--bench""##);
    let target = html.find(r#"id="exp-exp-b--bench""#);
    assert!(
        link.is_some_and(|l| l < audits) && target.is_some_and(|t| t > audits),
        "no link from the experiment to the table in the Audits section: {html}"
    );
}

/// A benchmark's verdicts (a table `in_audits`: DP-Sniper's flags beside ours) are not a
/// paper's printed numbers: the summary and the section count them apart, and the list of
/// differences is the printed numbers' only.
#[test]
fn a_benchmark_s_verdicts_are_counted_apart_from_printed_numbers() {
    let in_audits = LAYOUT.replacen(r#""digits": 4,"#, r#""digits": 4, "in_audits": true,"#, 1);
    assert_ne!(in_audits, LAYOUT);
    let dir = tempfile::tempdir().unwrap();
    results_dir(
        dir.path(),
        "exp-b",
        &[
            ("t.csv", TABLE),
            ("t.json", LAYOUT),
            ("bench.csv", TABLE),
            ("bench.json", &in_audits),
        ],
        &[("t", "report.table"), ("bench", "report.table")],
        "",
    );
    let w = write(dir.path(), &[]).unwrap();
    assert!(w.problems.is_empty(), "{:?}", w.problems);
    let (n, b) = (&w.summary.numbers, &w.summary.benchmark);
    assert_eq!((n.compared, n.agree, n.explained), (2, 1, 1));
    assert_eq!((b.compared, b.agree, b.differ), (2, 1, 1));
    assert_eq!(w.summary.disagreements.len(), 1);
    let html = page(&w.path);
    assert!(
        html.contains(r#"data-compared="2" data-agree="1" data-differ="1">2 benchmark verdicts"#),
        "{html}"
    );
    assert!(
        html.contains("2 printed numbers: 1 agree, 1 explained; 0 findings; 2 benchmark verdicts: 1 agree, 1 explained"),
        "{html}"
    );
}

/// A table longer than the page holds says one count of its rows: the fold names the first
/// rows shown of all the frame's rows, and the page says how many it holds of them ("the
/// first 20 of 400 rows", then "first 400 of 480", read as two different tables).
#[test]
fn a_long_table_counts_its_rows_once() {
    const LAYOUT: &str = r#"{"title": "Long", "columns": [
        {"name": "i", "header": "i", "role": "key"},
        {"name": "x", "header": "x", "role": "value"}]}"#;
    let table: String = std::iter::once("i,x\n".to_string())
        .chain((0..480).map(|i| format!("{i},{}\n", i * 2)))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    results_dir(
        dir.path(),
        "exp-l",
        &[("long.csv", &table), ("long.json", LAYOUT)],
        &[("long", "report.table")],
        "",
    );
    let w = write(dir.path(), &[]).unwrap();
    assert!(w.problems.is_empty(), "{:?}", w.problems);
    let html = page(&w.path);
    assert!(
        html.contains("Showing the first 20 of 480 rows: show the first 400<")
            && html.contains("Showing the first 400 of 480 rows: show the first 20 only")
            && html.contains("This page holds the first 400 of the 480 rows"),
        "{html}"
    );
    assert!(!html.contains("of 400 rows"), "{html}");
}

/// A description is shown open however long it is (#58 item 8: 13 of 28 were folded, the
/// Huang tables' analyses of their unexplained cells among them); a reader folds it.
#[test]
fn a_long_description_is_shown_open() {
    let dir = tempfile::tempdir().unwrap();
    let long = "The analysis of every unexplained cell. ".repeat(80);
    assert!(long.len() > 2000);
    results_dir(dir.path(), "exp-d", &[], &[], &long);
    let w = write(dir.path(), &[]).unwrap();
    assert!(w.problems.is_empty(), "{:?}", w.problems);
    let html = page(&w.path);
    assert!(
        html.contains("The analysis of every unexplained cell."),
        "{html}"
    );
    assert!(
        html.contains(r#"<details class="description" open>"#),
        "{html}"
    );
}
