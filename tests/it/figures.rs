//! Figures that cannot lie: what a plot draws is a frame (compared with the goldens), and a
//! figure that would hide what its frame holds — a declared series with no rows, a series with
//! nothing to draw, two measures joined in one line, a value a log axis cannot show, two rows
//! in one heatmap cell — is refused with the way out, or marked.

use std::path::Path;

use tempfile::TempDir;

use crate::common;
use common::{dplab, text, write};

/// A frame of two measures (`value`) per x and series: the shape of h14-sensitivity's summary.
const HEAD: &str = r#"name: fig
title: Figure checks
source: {paper: test, item: none}
description: A small frame drawn as lines.
seed: 1
stages:
  data:
    kind: load.table
    with:
      columns:
        k: [1, 2, 1, 2, 1, 2, 1, 2]
        sigma: [2, 2, 2, 2, 6, 6, 6, 6]
        value: [abs, abs, rel, rel, abs, abs, rel, rel]
        mean: [0.1, 0.2, 0.5, 0.7, 0.05, 0.04, 0.3, 0.0]
  figure:
    kind: plot.lines
    input: data
    with:
      x: k
      y: mean
      title: t
      x_label: k
      y_label: error
"#;

/// Runs HEAD with `extra` lines appended to the figure's `with:`; returns (success, output).
fn run_with(extra: &str, out: &Path) -> (bool, String) {
    let dir = TempDir::new().unwrap();
    let p = write(dir.path(), "fig.yaml", &format!("{HEAD}{extra}"));
    let o = dplab()
        .args(["run", "-q", "--out"])
        .arg(out)
        .arg(&p)
        .output()
        .unwrap();
    (o.status.success(), text(&o))
}

fn drawn(out: &Path) -> String {
    std::fs::read_to_string(out.join("fig/figure.csv")).unwrap()
}

/// h14-sensitivity's zigzag: one line per σ through absolute and relative errors. Refused,
/// naming the column that tells the rows apart and the three ways out; each way out draws.
#[test]
fn rows_that_share_x_in_one_series_are_not_joined() {
    let dir = TempDir::new().unwrap();
    let (ok, msg) = run_with("      series: sigma\n", &dir.path().join("a"));
    assert!(!ok, "{msg}");
    for part in [
        "share x = 1",
        "differ in column `value`",
        "`facet: value`",
        "`series: value`",
        "`only: {value: [abs]}`",
        "fig.yaml:",
    ] {
        assert!(msg.contains(part), "missing {part:?} in: {msg}");
    }
    for fix in [
        "      series: sigma\n      facet: value\n",
        "      series: sigma\n      only: {value: [abs]}\n",
    ] {
        let out = dir.path().join("b");
        let (ok, msg) = run_with(fix, &out);
        assert!(ok, "{fix}: {msg}");
        let csv = drawn(&out);
        assert!(csv.starts_with("panel,series,x,y,lo,hi\n"), "{csv}");
    }
    let out = dir.path().join("c");
    run_with("      series: sigma\n      only: {value: [abs]}\n", &out);
    assert_eq!(
        drawn(&out),
        // `sigma` is a column of integers in the data: its series are its values as it prints
        // them, named by the column (a bare `2` does not say what it is).
        "panel,series,x,y,lo,hi\n\"\",sigma = 2,1.0,0.1,,\n\"\",sigma = 2,2.0,0.2,,\n\"\",sigma = 6,1.0,0.05,,\n\"\",sigma = 6,2.0,0.04,,\n"
    );
}

/// h14-table3.2's empty figure: the labels named our runs, and no row was one of them.
#[test]
fn a_label_that_names_nothing_drawn_is_an_error_with_its_place() {
    let dir = TempDir::new().unwrap();
    let (ok, msg) = run_with(
        "      series: value\n      facet: sigma\n      only: {value: [abs]}\n      labels: {rel: relative, ours: our runs}\n",
        &dir.path().join("a"),
    );
    // `sigma` is not an axis here, so every label must name something drawn.
    assert!(!ok, "{msg}");
    assert!(
        msg.contains("`rel` names no column, series or panel"),
        "{msg}"
    );
    assert!(msg.contains("labels.rel"), "{msg}");
    let (ok, msg) = run_with(
        "      series: value\n      facet: sigma\n      labels: {rel: relative, ours: our runs}\n",
        &dir.path().join("b"),
    );
    assert!(!ok, "{msg}");
    assert!(msg.contains("`ours` names no column"), "{msg}");
    let (ok, msg) = run_with(
        "      series: value\n      facet: sigma\n      style: {relative: dashed}\n",
        &dir.path().join("c"),
    );
    assert!(!ok, "{msg}");
    assert!(msg.contains("style.relative"), "{msg}");
    let (ok, msg) = run_with(
        "      series: value\n      facet: sigma\n      labels: {rel: relative}\n      style: {relative: dashed}\n",
        &dir.path().join("d"),
    );
    assert!(ok, "{msg}");
}

/// h14-table3.2's floor: rows there, every value NaN, the series silently absent.
#[test]
fn a_series_with_rows_and_nothing_to_draw_is_an_error() {
    let dir = TempDir::new().unwrap();
    write(
        dir.path(),
        "data.csv",
        "k,sigma,value,mean\n1,2,abs,0.1\n2,2,abs,0.2\n1,2,rel,\n2,2,rel,\n",
    );
    let (ok, msg) = run_csv(dir.path(), "      series: value\n");
    assert!(!ok, "{msg}");
    assert!(
        msg.contains("series `rel` has 2 row(s) and no value of `mean` to draw"),
        "{msg}"
    );
}

/// HEAD with its data read from `dir/data.csv` (empty cells are missing values) and `extra`
/// appended to the figure's `with:`.
fn run_csv(dir: &Path, extra: &str) -> (bool, String) {
    let head = HEAD.replace(
        &HEAD[HEAD.find("    with:\n      columns:").unwrap()..HEAD.find("  figure:").unwrap()],
        "    with: {path: data.csv}\n",
    );
    let p = write(dir, "fig.yaml", &format!("{head}{extra}"));
    let o = dplab()
        .args(["run", "-q", "--out"])
        .arg(dir.join("out"))
        .arg(&p)
        .output()
        .unwrap();
    (o.status.success(), text(&o))
}

/// A value of 0 on a log axis (the thesis's printed 0.000) is marked on the bottom edge and
/// said in the legend, and kept in the frame as a point without a y.
#[test]
fn a_value_a_log_axis_cannot_show_is_marked() {
    let dir = TempDir::new().unwrap();
    let out = dir.path().join("a");
    let (ok, msg) = run_with(
        "      series: sigma\n      only: {value: [rel]}\n      log_y: true\n",
        &out,
    );
    assert!(ok, "{msg}");
    let svg = std::fs::read_to_string(out.join("fig/figure.svg")).unwrap();
    assert!(
        svg.contains("below the log axis"),
        "no legend entry for the mark"
    );
    assert!(
        drawn(&out).contains(",sigma = 6,2.0,,,\n"),
        "{}",
        drawn(&out)
    );
}

/// Rows with no value in the facet column belong to no one panel: they are drawn in every
/// panel, not in an untitled panel of their own. A row with no series value needs a name.
#[test]
fn rows_without_a_facet_value_are_drawn_in_every_panel() {
    let dir = TempDir::new().unwrap();
    let rows =
        "k,sigma,value,mean,panel\n1,2,abs,0.1,a\n2,2,abs,0.2,a\n1,6,abs,0.05,\n2,6,abs,0.04,\n";
    write(dir.path(), "data.csv", rows);
    // In panel `a` the σ = 6 rows (shared) join σ = 2's when one series holds both.
    let (ok, msg) = run_csv(dir.path(), "      series: value\n      facet: panel\n");
    assert!(!ok);
    assert!(
        msg.contains("share x = 1 and differ in column `sigma`"),
        "{msg}"
    );
    let (ok, msg) = run_csv(dir.path(), "      series: sigma\n      facet: panel\n");
    assert!(ok, "{msg}");
    let csv = std::fs::read_to_string(dir.path().join("out/fig/figure.csv")).unwrap();
    assert_eq!(
        csv,
        "panel,series,x,y,lo,hi\na,sigma = 2,1.0,0.1,,\na,sigma = 2,2.0,0.2,,\na,sigma = 6,1.0,0.05,,\na,sigma = 6,2.0,0.04,,\n",
        "the shared σ = 6 rows are drawn in panel a, the only panel"
    );
    write(
        dir.path(),
        "data.csv",
        "k,sigma,value,mean\n1,2,abs,0.1\n2,2,abs,0.2\n1,,abs,0.05\n2,,abs,0.04\n",
    );
    let (ok, msg) = run_csv(dir.path(), "      series: sigma\n");
    assert!(!ok);
    assert!(msg.contains("2 row(s) have no `sigma` value"), "{msg}");
    let (ok, msg) = run_csv(
        dir.path(),
        "      series: sigma\n      labels: {'': no σ}\n",
    );
    assert!(ok, "{msg}");
    let csv = std::fs::read_to_string(dir.path().join("out/fig/figure.csv")).unwrap();
    assert!(csv.contains("\"\",no σ,1.0,0.05,,\n"), "{csv}");
}

/// `only:` names values that exist; a value no row holds is the empty-figure class again.
#[test]
fn only_refuses_a_value_no_row_holds() {
    let dir = TempDir::new().unwrap();
    let (ok, msg) = run_with(
        "      series: sigma\n      only: {value: [absolute]}\n",
        &dir.path().join("a"),
    );
    assert!(!ok);
    assert!(
        msg.contains("no row has `value` = `absolute`; its values: `abs`, `rel`"),
        "{msg}"
    );
    assert!(msg.contains("only.value.0"), "{msg}");
}

/// Two rows in one heatmap cell: the later hid the earlier.
#[test]
fn a_heatmap_refuses_two_rows_in_one_cell() {
    let dir = TempDir::new().unwrap();
    let yaml = HEAD.split("  figure:").next().unwrap().to_string()
        + "  figure:\n    kind: plot.heatmap\n    input: data\n    with: {x: k, y: sigma, z: mean, title: t, x_label: k, y_label: s, z_label: e}\n";
    let p = write(dir.path(), "fig.yaml", &yaml);
    let out = dir.path().join("out");
    let o = dplab()
        .args(["run", "-q", "--out"])
        .arg(&out)
        .arg(&p)
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        text(&o).contains("two rows fall in one cell (x = 1, y = 2)"),
        "{}",
        text(&o)
    );
    let p = write(
        dir.path(),
        "fig.yaml",
        &yaml.replace("z_label: e}", "z_label: e, facet: value}"),
    );
    let o = dplab()
        .args(["run", "-q", "--out"])
        .arg(&out)
        .arg(&p)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let csv = std::fs::read_to_string(out.join("fig/figure.csv")).unwrap();
    assert!(
        csv.starts_with("panel,x,y,z\nvalue = abs,1.0,2.0,0.1\n"),
        "{csv}"
    );
}

/// From an attack on the checks: rows without a facet value that join a panel's own rows in
/// one series zigzag too; a reference with two values at one x kept the first silently; a
/// heatmap row without a finite x fell into the lowest cell.
#[test]
fn shared_rows_references_and_heatmap_places_are_checked() {
    let dir = TempDir::new().unwrap();
    write(
        dir.path(),
        "data.csv",
        "k,sigma,value,mean,panel\n1,2,abs,0.1,a\n2,2,abs,0.2,a\n1,2,abs,10,\n2,2,abs,20,\n",
    );
    let (ok, msg) = run_csv(dir.path(), "      series: sigma\n      facet: panel\n");
    assert!(!ok);
    assert!(msg.contains("differ in column `panel`"), "{msg}");
    write(
        dir.path(),
        "data.csv",
        "k,sigma,value,mean,bound\n1,2,abs,0.1,1.5\n2,2,abs,0.2,2.5\n1,6,abs,0.05,9\n2,6,abs,0.04,9\n",
    );
    let (ok, msg) = run_csv(
        dir.path(),
        "      series: sigma\n      reference: {column: bound, label: bound}\n",
    );
    assert!(!ok);
    assert!(msg.contains("`bound` has two values at x = 1"), "{msg}");
    write(
        dir.path(),
        "data.csv",
        "k,sigma,value,mean\n1,1,abs,5\n2,1,abs,6\n,2,abs,7\n",
    );
    let head = HEAD.replace(
        &HEAD[HEAD.find("    with:\n      columns:").unwrap()..],
        "    with: {path: data.csv}\n  figure:\n    kind: plot.heatmap\n    input: data\n    with: {x: k, y: sigma, z: mean, title: t, x_label: k, y_label: s, z_label: e}\n",
    );
    let p = write(dir.path(), "fig.yaml", &head);
    let o = dplab()
        .args(["run", "-q", "--out"])
        .arg(dir.path().join("out"))
        .arg(&p)
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        text(&o).contains("1 row(s) have no finite `k`"),
        "{}",
        text(&o)
    );
}
