//! The report's counts and words against the frames of a real run, and the checks of the report
//! kinds that `validate` or the run must make: a paper's table that lacks a key column, a
//! dataset column that matches no paper row, a finding whose verdict and cause disagree.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use tempfile::TempDir;

use crate::common;
use common::{dplab, text, write};

/// Every verdict in both table kinds and two findings: agrees (k = 1), explained by `explain`
/// (k = 2), within CI (k = 3), unexplained (k = 4); a thesis cell within CI (σ = 2), one
/// explained by the floor (σ = 4), one not run (σ = 6), one without data (B).
const PIPELINE: &str = r#"name: rt
title: Every verdict
source: {paper: test, item: Table 1}
description: Each verdict once or twice.
seed: 1
findings:
  - {claim: "Figure 1 rises", found: "it rises from 1 to 2", verdict: agrees}
  - {claim: "Figure 2 falls", found: "it rises from 1 to 3", verdict: explained, why: "the printed axis is flipped"}
stages:
  ours:
    kind: load.table
    with:
      columns:
        k: [1, 2, 3, 4]
        x: [0.5086, 0.7947, 0.1001, 0.3]
        lo: [0.5, 0.79, 0.09, 0.1]
        hi: [0.52, 0.8, 0.11, 0.5]
  table:
    kind: report.table
    input: ours
    with:
      title: Table 1
      paper: paper.csv
      join: [k]
      compare: {x: x}
      ci: {x: [lo, hi]}
      explain: [{where: {k: 2}, text: "the paper rounds the channel"}]
  runs:
    kind: load.table
    with:
      columns:
        dataset: [A, A, A, A]
        source: [ours, floor, ours, floor]
        variant: [ours, floor, ours, floor]
        value: [err, err, err, err]
        sigma: [2, 2, 4, 4]
        mean: [0.1, 0.01, 0.2, 0.01]
        ci_lo: [0.09, 0.01, 0.19, 0.01]
        ci_hi: [0.11, 0.01, 0.21, 0.01]
        max: [0.12, 0.01, 0.22, 0.01]
  cells:
    kind: report.verdict
    input: runs
    with: {title: Thesis table, paper: thesis.csv, dataset: dataset, ours: [ours], floor: floor, judged: [err]}
"#;

const PAPER: &str = "k,x\n1,0.509\n2,0.780\n3,0.1000\n4,0.050\n";
const THESIS: &str =
    "source,value,sigma,mean,max\nA,err,2,0.100,\nA,err,4,0.005,\nA,err,6,0.300,\nB,err,2,0.500,\n";

fn project(pipeline: &str) -> (TempDir, std::path::PathBuf) {
    let dir = TempDir::new().unwrap();
    let p = write(dir.path(), "rt.yaml", pipeline);
    write(dir.path(), "paper.csv", PAPER);
    write(dir.path(), "thesis.csv", THESIS);
    (dir, p)
}

/// The verdict words of every frame of a results directory, counted from the CSV text alone.
fn words(results: &Path) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for e in fs::read_dir(results).unwrap().flatten() {
        if e.path().extension().is_none_or(|x| x != "csv") {
            continue;
        }
        let mut r = csv::Reader::from_path(e.path()).unwrap();
        let cols: Vec<usize> = r
            .headers()
            .unwrap()
            .iter()
            .enumerate()
            .filter(|(_, h)| *h == "verdict" || h.starts_with("verdict_"))
            .map(|(i, _)| i)
            .collect();
        for rec in r.records() {
            let rec = rec.unwrap();
            for &c in &cols {
                *out.entry(rec[c].to_string()).or_default() += 1;
            }
        }
    }
    out
}

/// The attribute `name="…"` of the element with `id="summary"`.
fn attribute(html: &str, name: &str) -> usize {
    let summary = html.split(r#"<section id="summary""#).nth(1).unwrap();
    let head = summary.split('>').next().unwrap();
    let at = head.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
    head[at..].split('"').next().unwrap().parse().unwrap()
}

/// The summary's counts, the tables' colours and the list of differences are the verdict
/// words of the frames — and the words are the ones the rule gives each cell.
#[test]
fn the_report_counts_what_the_frames_hold() {
    let (dir, p) = project(PIPELINE);
    let out = dir.path().join("out");
    let o = dplab()
        .args(["run", "-q", "--out"])
        .arg(&out)
        .arg(&p)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let w = words(&out.join("rt"));
    let n = |k: &str| w.get(k).copied().unwrap_or(0);
    // The rule, cell by cell: known in advance, so the counts below cannot agree by accident.
    assert_eq!(
        (
            n("agrees"),
            n("within CI"),
            n("explained"),
            n("unexplained")
        ),
        (1, 2, 2, 1),
        "{w:?}"
    );
    assert_eq!((n("not run"), n("no data")), (1, 1), "{w:?}");
    let o = dplab().arg("report").arg(&out).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains(
            "6 printed numbers compared: 3 agree, 3 differ (2 explained, 1 unexplained); 2 findings: 1 agree, 1 differ (1 explained, 0 unexplained)"
        ),
        "{}",
        text(&o)
    );
    let html = fs::read_to_string(out.join("index.html")).unwrap();
    assert_eq!(attribute(&html, "data-compared"), 6);
    assert_eq!(attribute(&html, "data-agree"), n("agrees") + n("within CI"));
    assert_eq!(attribute(&html, "data-explained"), n("explained"));
    assert_eq!(attribute(&html, "data-unexplained"), n("unexplained"));
    assert_eq!(attribute(&html, "data-findings"), 2);
    assert_eq!(attribute(&html, "data-findings-explained"), 1);
    let list = html.split(r#"<table id="disagreements">"#).nth(1).unwrap();
    let list = list.split("</table>").next().unwrap();
    assert_eq!(
        list.matches(r#"<tr class="difference">"#).count(),
        n("explained") + n("unexplained")
    );
    // The paper's numbers as printed (0.780, 0.050, 0.005: never 0.78, 0.05, 0.005 → 5e-3).
    assert!(
        list.contains(r#"<td class="num">0.780</td>"#)
            && list.contains(r#"<td class="num">0.050</td>"#),
        "{list}"
    );
    // A cell the thesis shows is coloured as its verdict, the explained one cites its cause.
    assert!(html.contains(r#"<span class="verdict-word">within CI</span>"#));
    assert!(
        html.contains("explained [1]") && html.contains("<li>the paper rounds the channel</li>")
    );
    // The frame holds the printed text too.
    let table = fs::read_to_string(out.join("rt/table.csv")).unwrap();
    assert!(
        table.contains(",0.780,") && table.contains(",0.050,"),
        "{table}"
    );
}

/// A `join:` or compared column the paper's table lacks is found by `validate` (exit 2),
/// located at the parameter, with the columns the table has — not when the stage runs.
#[test]
fn a_column_the_paper_lacks_is_found_by_validate() {
    for (edit, at, paper, message) in [
        (
            "join: [k]",
            "join: [k]",
            "key,x\n1,0.509\n",
            "the paper's table paper.csv has no column `k` (it has key, x)",
        ),
        (
            "compare: {x: x}",
            "compare: {x: y}",
            PAPER,
            "has no column `y` (it has k, x)",
        ),
        (
            "judged: [err]}",
            "judged: [err, rate]}",
            PAPER,
            "has no row whose `value` is `rate` (its values: `err`)",
        ),
    ] {
        let (dir, p) = project(&PIPELINE.replace(edit, at));
        write(dir.path(), "paper.csv", paper);
        let o = dplab().arg("validate").arg(&p).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{edit}: {}", text(&o));
        let t = text(&o);
        assert!(t.contains(message), "{edit}: {t}");
        // Located at the parameter: the line of the edit.
        let line = PIPELINE.lines().position(|l| l.contains(edit)).unwrap() + 1;
        assert!(t.contains(&format!("rt.yaml:{line}:")), "{edit}: {t}");
        drop(dir);
    }
    // A paper's table without the columns `report.verdict` reads.
    let (dir, p) = project(PIPELINE);
    write(
        dir.path(),
        "thesis.csv",
        "source,value,sigma,average\nA,err,2,0.1\n",
    );
    let o = dplab().arg("validate").arg(&p).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("has no column `mean`"), "{}", text(&o));
}

/// A dataset column that matches no row of the paper's table (a stacked frame's `source`,
/// holding the kinds of run) is an error naming both sets of values, at the parameter — not
/// a table of "no data" and a figure of the paper's points alone.
#[test]
fn a_dataset_column_that_matches_no_paper_row_is_an_error() {
    let (dir, p) = project(&PIPELINE.replace("dataset: dataset, ", ""));
    let out = dir.path().join("out");
    let o = dplab()
        .args(["run", "-q", "--out"])
        .arg(&out)
        .arg(&p)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("no dataset of the input's column `source` (`ours`, `floor`) is one of the paper's `source` values")
            && t.contains("(`A`, `B`)"),
        "{t}"
    );
    // The stage names no `dataset`: its `with:` (where to add it).
    let line = PIPELINE
        .lines()
        .position(|l| l.contains("kind: report.verdict"))
        .unwrap()
        + 3;
    assert!(t.contains(&format!("rt.yaml:{line}:")), "{t}");
    // A variant that never occurs is the same class.
    let (dir, p) = project(&PIPELINE.replace("ours: [ours]", "ours: [private]"));
    let o = dplab()
        .args(["run", "-q", "--out"])
        .arg(dir.path().join("out"))
        .arg(&p)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains(
            "no row of the input has `private` in its column `variant` (it holds `ours`, `floor`)"
        ),
        "{}",
        text(&o)
    );
}

/// A finding's verdict and its cause must agree, and its verdict is one of the four words:
/// `validate` says so at the finding's line.
#[test]
fn a_finding_is_checked_by_validate() {
    for (from, to, message) in [
        (
            r#"verdict: explained, why: "the printed axis is flipped""#,
            "verdict: explained",
            "states its cause in `why`",
        ),
        (
            "verdict: agrees}",
            "verdict: agreed}",
            "unknown variant `agreed`",
        ),
        (
            "verdict: agrees}",
            "verdict: agrees, why: because}",
            "make it `explained`",
        ),
    ] {
        let (_dir, p) = project(&PIPELINE.replace(from, to));
        let o = dplab().arg("validate").arg(&p).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{to}: {}", text(&o));
        let t = text(&o);
        assert!(t.contains(message), "{to}: {t}");
        let line = PIPELINE.lines().position(|l| l.contains(from)).unwrap() + 1;
        assert!(t.contains(&format!("rt.yaml:{line}:")), "{to}: {t}");
    }
}

/// The sections of Huang's thesis (../shared/papers/huang2014-trigonometric-mechanism-thesis.md,
/// its headings): chapter 1 §1.1–§1.4, chapter 2 §2.1–§2.5, chapter 3 §3.1–§3.2. Its Table 3.1
/// stands in chapter 3's opening, before §3.1.
const THESIS_SECTIONS: &[&str] = &[
    "1.1", "1.2", "1.3", "1.4", "2.1", "2.2", "2.3", "2.4", "2.5", "3.1", "3.2",
];

/// Issue #58: the report cited "§3.4" of the thesis, a section it does not have. Every `§`
/// the Huang 2014 pipelines cite (their sources, descriptions, findings and labels, all of
/// which the report shows) is one of the thesis's sections.
#[test]
fn the_sections_the_huang_pipelines_cite_are_the_thesis_s() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("pipelines/huang2014");
    let mut wrong = Vec::new();
    for e in fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        let text = fs::read_to_string(&path).unwrap();
        for (at, _) in text.match_indices('§') {
            let cited: String = text[at + '§'.len_utf8()..]
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            let cited = cited.trim_end_matches('.');
            if !THESIS_SECTIONS.contains(&cited) {
                wrong.push(format!("{}: §{cited}", path.display()));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "sections the thesis does not have: {wrong:?}"
    );
}

/// A paper's number is shown with the digits the paper printed wherever the report shows it:
/// w20-adult's Table 2 recomputed at the printed distortions quotes the printed D and MI as
/// the paper's CSV writes them (0.270 and 1.6205, not 0.27 and 1.621), each printed row.
#[test]
fn the_printed_table_2_is_quoted_with_its_printed_digits() {
    let Some(mirror) = std::env::var_os("DPLAB_DATA_MIRROR").filter(|m| !m.is_empty()) else {
        eprintln!("skipped: DPLAB_DATA_MIRROR is not set (w20-adult reads Adult)");
        return;
    };
    let dir = TempDir::new().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = dplab()
        .env("DPLAB_DATA_MIRROR", &mirror)
        .env("DPLAB_DATA_DIR", dir.path().join("cache"))
        .args(["run", "-q", "--no-store", "--stages", "table2_printed_d"])
        .arg(root.join("pipelines/wu2020/w20-adult.yaml"))
        .arg("--out")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let md = fs::read_to_string(dir.path().join("w20-adult/table2_printed_d.md")).unwrap();
    let paper = fs::read_to_string(root.join("pipelines/wu2020/w20-table2.paper.csv")).unwrap();
    for line in paper.lines().skip(1) {
        let [lambda, d, sym, _]: [&str; 4] =
            line.split(',').collect::<Vec<_>>().try_into().unwrap();
        let row = md
            .lines()
            .find(|l| l.starts_with(&format!("| {lambda} | ")))
            .unwrap_or_else(|| panic!("no row λ = {lambda}:\n{md}"));
        let cells: Vec<&str> = row.split(" | ").collect();
        assert_eq!(
            (cells[1], cells[3].trim_end_matches(" |")),
            (d, sym),
            "{row}"
        );
    }
}

/// A count a pipeline's text states (a description, a table's notes: "4 within CI", "31
/// cells", "10 of 12 rows agree") is quoted from the frames at report time
/// (`{{counts.within_ci[0]}}`), never written by hand: h14-table3.3's "4 within CI, 11
/// explained, 35 unexplained" stayed when the run said 4 / 12 / 34.
#[test]
fn the_pipelines_quote_the_counts_they_state() {
    const COUNTED: [&str; 9] = [
        "cells",
        "cell",
        "explained",
        "unexplained",
        "agree",
        "differ",
        "verdicts",
        "rows",
        "within",
    ];
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("pipelines");
    let mut files = vec![];
    let mut dirs = vec![root.clone()];
    while let Some(d) = dirs.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "yaml") {
                files.push(p);
            }
        }
    }
    files.sort();
    let mut stated = vec![];
    for f in &files {
        let text = fs::read_to_string(f).unwrap();
        for (n, line) in text.lines().enumerate() {
            // What a quote stands for is the frame's, not the text's.
            let mut bare = String::new();
            let mut rest = line;
            while let Some(open) = rest.find("{{") {
                bare.push_str(&rest[..open]);
                rest = rest[open..]
                    .find("}}")
                    .map_or("", |c| &rest[open + c + 2..]);
            }
            bare.push_str(rest);
            let words: Vec<&str> = bare
                .split_whitespace()
                .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
                .collect();
            for (i, w) in words.iter().enumerate() {
                if w.is_empty() || !w.chars().all(|c| c.is_ascii_digit()) {
                    continue;
                }
                // "N of M rows agree" counts as "N … agree"; "rows 1 and 11 differ" names rows.
                let mut j = i + 1;
                if words.get(j) == Some(&"of") {
                    j += 2 + usize::from(words.get(j + 1) == Some(&"the"));
                }
                let next = words.get(j).copied().unwrap_or("");
                let counted = COUNTED.contains(&next)
                    && (next != "within" || words.get(j + 1) == Some(&"CI"))
                    && (next != "rows" || matches!(words.get(j + 1), Some(&"agree" | &"differ")))
                    && !(i > 0 && matches!(words[i - 1], "and" | "rows" | "row" | "σ" | "λ"));
                if counted {
                    stated.push(format!(
                        "{}:{}: {}",
                        f.strip_prefix(&root).unwrap().display(),
                        n + 1,
                        words[i..=j].join(" ")
                    ));
                }
            }
        }
    }
    assert!(
        stated.is_empty(),
        "counts written by hand:\n{}",
        stated.join("\n")
    );
}
