//! The report on results directories made here: good ones, damaged ones, hostile ones.

use std::path::Path;

use sha2::{Digest, Sha256};

use super::*;

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
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let mut outputs = Vec::new();
    for (f, text) in files {
        std::fs::write(dir.join(f), text).unwrap();
        outputs.push(serde_json::json!({
            "file": f,
            "bytes": text.len(),
            "sha256": crate::pipeline::plan::hex(&Sha256::digest(text.as_bytes())),
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
                     "sha256": "00ff", "source": {"paper": "paper-one", "item": "Table 1"}, "description": description},
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
1.0,0.7947,0.78,0.0147,differs,the paper's channel sits at its rounded MI\n\
2.0,0.1,,,,\n";

const VERDICT: &str =
    "source,value,sigma,paper,private_text,private_text_lo,private_text_hi,verdict,cause\n\
CRM,max_abs_error,2.0,0.002,0.0011,0.0001,0.0022,within,inside the interval\n\
CRM,max_abs_error,4.0,0.01,NaN,NaN,NaN,not run,σ not in this run's axes\n\
CSN,max_rel_error,2.0,0.5,0.1,0.09,0.11,unexplained,\n\
CSN,synthesis_seconds,2.0,2.5,0.1,0.09,0.11,side by side,\n\
CSN,synthesis_seconds,4.0,2.5,NaN,NaN,NaN,not run,σ not in this run's axes\n";

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
        ],
        &[("table", "report.verdict")],
        "",
    );
}

#[test]
fn counts_come_from_the_verdict_columns() {
    let dir = tempfile::tempdir().unwrap();
    good(dir.path());
    let w = write(dir.path(), &[]).unwrap();
    assert!(w.problems.is_empty(), "{:?}", w.problems);
    let s = &w.summary;
    assert_eq!((s.experiments, s.with_results), (2, 2));
    // exp-a: agrees + differs; exp-b: within + unexplained (not run and side by side are not compared).
    assert_eq!((s.compared, s.agree, s.differ), (4, 2, 2));
    assert_eq!(s.disagreements.len(), 2);
    let d = &s.disagreements[0];
    assert_eq!(d.experiment, "exp-a");
    assert_eq!(d.cell, "λ = 1.0, D");
    assert_eq!(d.explanation, "the paper's channel sits at its rounded MI");
    assert_eq!(s.disagreements[1].verdict, "unexplained");
    assert_eq!(s.explained, 1);
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
    assert!(html.contains("D (paper)") && html.contains("class=\"v-differ\""));
    assert!(html.contains("In the paper's layout"));
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
        &[("table.csv", TABLE)],
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

#[test]
fn verdict_words_are_counted_as_the_page_says() {
    assert_eq!(judge_word("agrees"), Some(Judged::Agrees));
    assert_eq!(judge_word("within CI"), Some(Judged::Agrees));
    assert_eq!(judge_word("within"), Some(Judged::Agrees));
    assert_eq!(judge_word("explained"), Some(Judged::Differs));
    assert_eq!(judge_word("unexplained"), Some(Judged::Differs));
    assert_eq!(judge_word("differs"), Some(Judged::Differs));
    assert_eq!(judge_word("not run"), Some(Judged::NotJudged));
    assert_eq!(judge_word(""), None);
}

/// A `report.verdict` table is also shown as the thesis lays it out: one row per dataset and
/// error, one column per σ, the thesis's value above ours (mean [95% CI]) coloured by verdict;
/// times (side by side) are left out.
#[test]
fn verdict_tables_are_shown_in_the_thesis_layout() {
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
        rows[0].contains(r#"<td class="v-within" title="within"><span class="thesis-value">0.002</span><br><span class="ours-value">1.10e-3 [1.00e-4, 2.20e-3]</span>"#),
        "{}",
        rows[0]
    );
    // σ = 4 was not run: the thesis's value, ours a dash, not coloured as a verdict.
    assert!(
        rows[0].contains(
            r#"<span class="thesis-value">0.01</span><br><span class="ours-value">—</span>"#
        ),
        "{}",
        rows[0]
    );
    assert!(rows[1].contains("max rel error") && rows[1].contains(r#"class="v-differ""#));
    assert!(
        !table.contains("synthesis"),
        "times are not in the error table"
    );
    // A frame without the verdict columns gets no such table (and no panic).
    let frame = read::Csv::parse(b"a,b\n1,2\n").unwrap();
    assert!(thesis_layout(&frame).is_none());
}
