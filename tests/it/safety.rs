//! Hostile and careless input (issue: "a pipeline file can never harm the machine"): each
//! test names the class of defect it shuts, not only the example.

use std::fs;
use std::path::Path;

use tempfile::TempDir;

use crate::common;
use crate::hay::TINY as BASE;
use common::{dplab, stable, text, write};

/// `validate` on `text` must fail with exit 2; returns what it printed, its temporary
/// directory written `[TMP]` (so a whole message can be a snapshot).
fn invalid(text_: &str) -> String {
    let dir = TempDir::new().unwrap();
    let p = write(dir.path(), "p.yaml", text_);
    let o = dplab().arg("validate").arg(&p).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    stable(&text(&o), dir.path())
}

/// Every file under `dir`, relative.
fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    fn go(d: &Path, base: &Path, out: &mut Vec<String>) {
        for e in fs::read_dir(d).into_iter().flatten().flatten() {
            let p = e.path();
            out.push(p.strip_prefix(base).unwrap().display().to_string());
            if p.is_dir() && !p.is_symlink() {
                go(&p, base, out);
            }
        }
    }
    go(dir, dir, &mut out);
    out.sort();
    out
}

#[test]
fn pipeline_and_stage_names_cannot_leave_the_results_directory() {
    for name in ["../victim", "/tmp/abs", ".hidden", "a/b", "", "x y"] {
        let dir = TempDir::new().unwrap();
        fs::create_dir_all(dir.path().join("victim")).unwrap();
        fs::write(dir.path().join("victim/keep"), "precious").unwrap();
        let yaml = BASE.replace("name: tiny", &format!("name: {name:?}"));
        let p = write(dir.path(), "p/p.yaml", &yaml);
        let o = dplab().arg("validate").arg(&p).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{name:?}: {}", text(&o));
        assert!(text(&o).contains("p.yaml:1:1:"), "{}", text(&o));
        let o = dplab()
            .args(["run", "--out"])
            .arg(dir.path().join("p/out"))
            .arg(&p)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert_eq!(
            fs::read_to_string(dir.path().join("victim/keep")).unwrap(),
            "precious"
        );
        assert!(!dir.path().join("p/out").exists());
    }
    for stage in ["\"/../../../tmp/x/pwned\"", "f__c=a", "..", "a.b"] {
        let yaml = BASE.replace("  summary:\n", &format!("  {stage}:\n"));
        let e = invalid(&yaml);
        assert!(
            e.contains("p.yaml:17:3:") && e.contains("stage name"),
            "{e}"
        );
    }
}

#[test]
fn pipelines_read_only_inside_their_directory_unless_allowed() {
    let dir = TempDir::new().unwrap();
    write(dir.path(), "outside/secret.csv", "s\n42\n");
    write(dir.path(), "p/data/t.csv", "candidate,utility\na,1\nb,2\n");
    std::os::unix::fs::symlink(
        dir.path().join("outside/secret.csv"),
        dir.path().join("p/link.csv"),
    )
    .unwrap();
    let table = |path: &str| {
        BASE.replace(
            "with: {columns: {candidate: [a, b, c], utility: [1, 5, 2]}}",
            &format!("with: {{path: {path:?}}}"),
        )
    };
    for path in [
        "/etc/hostname",
        "../outside/secret.csv",
        "link.csv",
        "data/../../outside/secret.csv",
    ] {
        let p = write(dir.path(), "p/p.yaml", &table(path));
        let o = dplab().arg("validate").arg(&p).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{path}: {}", text(&o));
        assert!(
            text(&o).contains("p.yaml:11:")
                && text(&o).contains("outside the pipeline's directory"),
            "{}",
            text(&o)
        );
    }
    // Missing files fail validate, located, before anything runs.
    let p = write(dir.path(), "p/p.yaml", &table("data/missing.csv"));
    let o = dplab().arg("validate").arg(&p).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o).contains("p.yaml:11:") && text(&o).contains("no such file"),
        "{}",
        text(&o)
    );
    // Inside: fine. Outside but allowed on the command line: fine.
    let p = write(dir.path(), "p/p.yaml", &table("data/t.csv"));
    dplab().arg("validate").arg(&p).assert().success();
    let p = write(dir.path(), "p/p.yaml", &table("../outside/secret.csv"));
    dplab()
        .arg("validate")
        .arg(&p)
        .arg("--allow-read")
        .arg(dir.path().join("outside"))
        .assert()
        .success();
    // report.table's `paper:` is confined the same way.
    let paper = BASE.replace(
        "profiles:",
        "  table:\n    kind: report.table\n    input: summary\n    with: {title: t, paper: /etc/passwd, join: [row], compare: {mean: x}}\nprofiles:",
    );
    let e = invalid(&paper);
    assert!(e.contains("outside the pipeline's directory"), "{e}");
}

#[test]
fn instance_files_never_collide() {
    let dir = TempDir::new().unwrap();
    let yaml = r#"name: figs
title: t
source: {paper: p, item: i}
description: d
seed: 1
axes:
  c: ['a b', 'a_b', 'a/b', '..', 'CRM', 'a%41', 'é']
stages:
  t: {kind: load.table, with: {columns: {x: [1, 2], y: [1, 3]}}}
  f: {kind: plot.lines, input: t, with: {x: x, y: y, title: $c, x_label: x, y_label: y}}
"#;
    let p = write(dir.path(), "p.yaml", yaml);
    let out = dir.path().join("out");
    let o = dplab()
        .args(["run", "-q", "--out"])
        .arg(&out)
        .arg(&p)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let files = tree(&out.join("figs"));
    let svgs: Vec<&String> = files.iter().filter(|f| f.ends_with(".svg")).collect();
    assert_eq!(svgs.len(), 7, "{files:?}");
    // Readable: a capital stays a capital (it was `%43%52%4D`).
    assert!(files.contains(&"f__c=CRM.svg".to_string()), "{files:?}");
    // Distinct even where the file system folds case (macOS, Windows).
    let folded: std::collections::BTreeSet<String> =
        files.iter().map(|f| f.to_lowercase()).collect();
    assert_eq!(folded.len(), files.len(), "{files:?}");
    assert_eq!(tree(&out), {
        let mut v: Vec<String> = vec!["figs".into()];
        v.extend(files.iter().map(|f| format!("figs/{f}")));
        v.sort();
        v
    });
    // The manifest's hashes match the files on disk.
    let m: serde_json::Value =
        serde_json::from_slice(&fs::read(out.join("figs/manifest.json")).unwrap()).unwrap();
    for o in m["outputs"].as_array().unwrap() {
        let bytes = fs::read(out.join("figs").join(o["file"].as_str().unwrap())).unwrap();
        use sha2::Digest;
        let h: String = sha2::Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(o["sha256"].as_str().unwrap(), h);
    }
    // Values that differ only in case would name one file there: refused before anything
    // runs, at the second value, wherever the axis is written.
    insta::assert_snapshot!(
        "case_twins_in_an_axis",
        invalid(&yaml.replace("'a b', 'a_b'", "'crm', 'a_b'"))
    );
    insta::assert_snapshot!(
        "case_twins_in_a_profile",
        invalid(&BASE.replace(
            "  small:\n    axes: {eps: [1.0]}",
            "  small:\n    axes: {eps: [1.0]}\n  cased:\n    axes: {eps: [Ab, aB]}",
        ))
    );
    // A stage or pipeline named as a file dplab writes itself.
    insta::assert_snapshot!(
        "a_stage_named_as_dplab_s_own_file",
        invalid(&BASE.replace("  summary:\n", "  Manifest:\n"))
    );
    insta::assert_snapshot!(
        "a_pipeline_named_as_dplab_s_own_file",
        invalid(&BASE.replace("name: tiny", "name: index.html"))
    );
}

#[test]
fn a_stack_of_inputs_over_different_axes_runs_as_validate_says() {
    // One input varies over `sens` and `rep`, the other over nothing: `validate` said ok and
    // the run failed ("a column `sens` of its own … rename the axis").
    let dir = TempDir::new().unwrap();
    let yaml = r#"name: st
title: t
source: {paper: p, item: i}
description: d
seed: 1
axes:
  sens: [1, 2]
stages:
  ours:
    kind: mechanism.noise
    input: base
    repeat: 2
    with: {column: y, noise: laplace, epsilon: $sens, samples: 1}
  base: {kind: load.table, with: {columns: {x: [1, 2], y: [3, 4]}}}
  paper: {kind: load.table, with: {columns: {x: [9], y: [5]}}}
  both: {kind: frame.stack, input: [ours, paper]}
"#;
    let p = write(dir.path(), "p.yaml", yaml);
    let o = dplab().arg("validate").arg(&p).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let out = dir.path().join("out");
    let o = dplab()
        .args(["run", "-q", "--out"])
        .arg(&out)
        .arg(&p)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let csv = fs::read_to_string(out.join("st/both.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    // One instance: 2 σ × 2 repetitions × 2 rows of ours, and the paper's row once, with
    // its `sens` and `rep` empty.
    assert_eq!(lines.len(), 1 + 8 + 1, "{csv}");
    assert!(lines[0].starts_with("source,sens,rep,"), "{csv}");
    assert!(lines[9].starts_with("paper,,,"), "{csv}");
    // Told by `over:` to vary over `sens`, a stack puts the paper's row in each instance,
    // which is then one of that instance's rows.
    let p = write(
        dir.path(),
        "p.yaml",
        &yaml.replace(
            "input: [ours, paper]}",
            "input: [ours, paper], over: [rep]}",
        ),
    );
    let o = dplab()
        .args(["run", "-q", "--out"])
        .arg(&out)
        .arg(&p)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let csv = fs::read_to_string(out.join("st/both.csv")).unwrap();
    assert_eq!(
        csv.lines().filter(|l| l.contains(",paper,")).count(),
        2,
        "{csv}"
    );
    assert!(
        csv.contains("1,paper,,") && csv.contains("2,paper,,"),
        "{csv}"
    );
}

#[test]
fn instances_with_different_columns_are_stored_whole() {
    // A records axis over tables of different widths: every instance computed, then "unable
    // to append to a DataFrame of width 3 with a DataFrame of width 2" when they were joined.
    let dir = TempDir::new().unwrap();
    let yaml = r#"name: widths
title: t
source: {paper: p, item: i}
description: d
seed: 1
axes:
  data:
    - {name: A, cols: {x: [1, 2], y: [3.5, 4]}}
    - {name: B, cols: {x: [5], z: [b]}}
stages:
  raw: {kind: load.table, with: {columns: $data.cols}}
  figure: {kind: plot.lines, input: raw, with: {x: x, y: x, series: data, title: t, x_label: x, y_label: y}}
"#;
    let p = write(dir.path(), "p.yaml", yaml);
    let out = dir.path().join("out");
    let o = dplab()
        .args(["run", "-q", "--out"])
        .arg(&out)
        .arg(&p)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let csv = fs::read_to_string(out.join("widths/raw.csv")).unwrap();
    assert_eq!(csv, "data,x,y,z\nA,1,3.5,\nA,2,4.0,\nB,5,,b\n", "{csv}");
    assert!(out.join("widths/figure.svg").exists());
}

#[test]
fn stage_names_differing_only_in_case_are_refused() {
    let e = invalid(&BASE.replace("  summary:\n", "  Noisy:\n"));
    assert!(
        e.contains("differ only in case") && e.contains("p.yaml:17:3"),
        "{e}"
    );
}

#[test]
fn two_pipelines_with_one_name_are_refused_before_running() {
    let dir = TempDir::new().unwrap();
    let a = write(dir.path(), "a.yaml", BASE);
    let b = write(dir.path(), "b.yaml", BASE);
    let o = dplab()
        .args(["run", "--out"])
        .arg(dir.path().join("out"))
        .arg(&a)
        .arg(&b)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("a.yaml") && text(&o).contains("b.yaml") && text(&o).contains("`tiny`")
    );
    assert!(!dir.path().join("out/tiny").exists());
    // The same file named twice (or reached through a link) runs once.
    let o = dplab()
        .args(["run", "-q", "--out"])
        .arg(dir.path().join("out"))
        .arg(&a)
        .arg(&a)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    // Names differing only in case are one directory on case-insensitive file systems.
    let upper = write(
        dir.path(),
        "c.yaml",
        &BASE.replace("name: tiny", "name: TINY"),
    );
    let o = dplab()
        .args(["run", "--out"])
        .arg(dir.path().join("out2"))
        .arg(&a)
        .arg(&upper)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("differ only in case"), "{}", text(&o));
}

#[test]
fn equal_axis_values_are_refused_in_files_profiles_and_set() {
    insta::assert_snapshot!(
        "equal_values_in_an_axis",
        invalid(&BASE.replace("eps: [0.5, 1.0]", "eps: [0.5, 2.0, 2]"))
    );
    insta::assert_snapshot!(
        "equal_values_in_a_profile",
        invalid(&BASE.replace("axes: {eps: [1.0]}", "axes: {eps: [1.0, 1]}"))
    );
    let dir = TempDir::new().unwrap();
    let p = write(dir.path(), "p.yaml", BASE);
    let o = dplab()
        .arg("validate")
        .arg(&p)
        .args(["--set", "eps=[0.5, 0.5]"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o).contains("--set eps=[0.5, 0.5]") && text(&o).contains("twice"),
        "{}",
        text(&o)
    );
}

/// The whole message, each at the second key (line:column) and naming the first.
#[test]
fn duplicate_keys_are_refused_at_the_second() {
    insta::assert_snapshot!(
        "duplicate_axis",
        invalid(&BASE.replace("  eps: [0.5, 1.0]\n", "  eps: [0.5, 1.0]\n  eps: [2]\n"))
    );
    insta::assert_snapshot!(
        "duplicate_stage",
        invalid(&BASE.replace(
            "profiles:\n",
            "  counts: {kind: load.table, with: {columns: {a: [1]}}}\nprofiles:\n",
        ))
    );
    insta::assert_snapshot!(
        "duplicate_profile",
        invalid(&format!("{BASE}  small: {{}}\n"))
    );
    insta::assert_snapshot!(
        "duplicate_parameter",
        invalid(&BASE.replace("samples: 100000}", "samples: 100000, samples: 5}"))
    );
}

/// The whole message, located where the profile writes the bad value.
#[test]
fn every_profile_is_checked_and_located_at_the_profile() {
    let profile = |to: &str| invalid(&BASE.replace("    axes: {eps: [1.0]}\n", to));
    insta::assert_snapshot!(
        "profile_unknown_parameter",
        profile("    axes: {eps: [1.0]}\n    with: {noisy: {sel: 5}}\n")
    );
    insta::assert_snapshot!(
        "profile_unknown_axis",
        profile("    axes: {eps: [1.0], nope: [1]}\n")
    );
    insta::assert_snapshot!(
        "profile_value_out_of_range",
        profile("    axes: {eps: [-1.0]}\n")
    );
    // A profile's `repeat:` is found where the profile writes it, not at the stage's own.
    insta::assert_snapshot!(
        "profile_repeat",
        profile("    axes: {eps: [1.0]}\n    repeat: {noisy: 0}\n")
    );
}

#[test]
fn parameters_are_finite_and_set_like_lists_distinct() {
    // Non-finite numbers are refused for every kind, at their path.
    let non_finite: Vec<String> = [".nan", ".inf", "-.inf"]
        .iter()
        .map(|bad| invalid(&BASE.replace("epsilon: $eps", &format!("epsilon: {bad}"))))
        .collect();
    insta::assert_snapshot!("non_finite_parameters", non_finite.join("\n"));
    insta::assert_snapshot!(
        "a_non_finite_table_value",
        invalid(&BASE.replace("utility: [1, 5, 2]", "utility: [1, .nan, 2]"))
    );
    // Lists that are sets hold each value once, located at the repeat.
    insta::assert_snapshot!(
        "a_set_holding_a_name_twice",
        invalid(&BASE.replace(
            "values: [noisy], by: [row]",
            "values: [noisy, noisy], by: [row]",
        ))
    );
    insta::assert_snapshot!(
        "a_set_holding_a_number_twice",
        invalid(&BASE.replace("by: [row]}", "by: [row], quantiles: [0.5, 0.50]}"))
    );
}

#[test]
fn an_axis_never_overwrites_a_column_of_the_same_name() {
    // mechanism.noise writes a column `noisy`; an axis `noisy` must not replace its values.
    let yaml = BASE
        .replace("eps: [0.5, 1.0]", "noisy: [0.5, 1.0]")
        .replace("$eps", "$noisy")
        .replace("axes: {eps: [1.0]}", "axes: {noisy: [1.0]}");
    let dir = TempDir::new().unwrap();
    let p = write(dir.path(), "p.yaml", &yaml);
    let o = dplab()
        .arg("run")
        .arg("--out")
        .arg(dir.path().join("out"))
        .arg(&p)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("column `noisy` of its own"),
        "{}",
        text(&o)
    );
    // What succeeded is written, marked incomplete; the stage whose axis would overwrite its
    // column has no frame.
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("out/tiny/manifest.json")).unwrap())
            .unwrap();
    assert!(
        m["incomplete"]["failed"]
            .as_array()
            .is_some_and(|f| !f.is_empty()),
        "{m}"
    );
}

#[test]
fn many_profiles_share_one_planning_budget() {
    // 60 profiles of ~70 000 instances each: checking all would plan 4.2·10⁶ instances.
    let mut yaml = BASE.replace(
        "profiles:\n  small:\n    axes: {eps: [1.0]}\n",
        "profiles:\n",
    );
    for i in 0..60 {
        yaml.push_str(&format!(
            "  p{i}:\n    axes: {{eps: {{from: 0.001, to: 10, step: 0.001}}}}\n"
        ));
    }
    let dir = TempDir::new().unwrap();
    let p = write(dir.path(), "p.yaml", &yaml);
    let o = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "ulimit -v 4000000; exec timeout 120 {} validate {}",
            assert_cmd::cargo::cargo_bin("dplab").display(),
            p.display()
        ))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("were not checked") && text(&o).contains("--max-instances"),
        "{}",
        text(&o)
    );
    // Raised on purpose, every profile is checked.
    let o = dplab()
        .args(["validate", "--max-instances", "5e6"])
        .arg(&p)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn sizes_are_checked_before_anything_is_allocated() {
    for (from, to, what) in [
        ("repeat: 4", "repeat: 1000000000000", "repeat"),
        ("repeat: 4", "repeat: 20000000", "repeat"),
        (
            "eps: [0.5, 1.0]",
            "eps: {from: 1, to: 1000000, step: 1}\n  c: {from: 1, to: 1000000, step: 1}",
            "instances",
        ),
        ("samples: 100000}", "samples: 1e15}", "samples"),
    ] {
        let mut yaml = BASE.replace(from, to);
        if what == "instances" {
            yaml = yaml
                .replace(
                    "epsilon: $eps, samples: 100000}",
                    "epsilon: $eps, column: $c, samples: 100000}",
                )
                .replace("column: utility, ", "");
        }
        let dir = TempDir::new().unwrap();
        let p = write(dir.path(), "p.yaml", &yaml);
        // Address space capped at 4 GB: an allocation of that size would abort.
        let o = std::process::Command::new("bash")
            .arg("-c")
            .arg(format!(
                "ulimit -v 4000000; exec {} validate {}",
                assert_cmd::cargo::cargo_bin("dplab").display(),
                p.display()
            ))
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{what}: {}", text(&o));
        assert!(text(&o).contains("p.yaml:"), "{what}: {}", text(&o));
        assert!(
            what == "samples" || text(&o).contains("limit"),
            "{what}: {}",
            text(&o)
        );
    }
    // The limits can be raised on purpose.
    let dir = TempDir::new().unwrap();
    let p = write(
        dir.path(),
        "p.yaml",
        &BASE.replace("repeat: 4", "repeat: 3000000"),
    );
    dplab().arg("validate").arg(&p).assert().code(2);
    dplab()
        .arg("validate")
        .arg(&p)
        .args(["--max-instances", "1e7"])
        .assert()
        .success();
}

#[test]
fn counts_may_be_written_in_scientific_notation() {
    let dir = TempDir::new().unwrap();
    let p = write(
        dir.path(),
        "p.yaml",
        &BASE
            .replace("samples: 100000}", "samples: 1e5}")
            .replace("seed: 7", "seed: 7.0"),
    );
    dplab().arg("validate").arg(&p).assert().success();
    let e = invalid(
        &BASE
            .replace("samples: 100000}", "samples: 1.5e3}")
            .replace("samples: 1.5e3", "samples: 100000.5"),
    );
    assert!(e.contains("p.yaml:16:") && e.contains("samples"), "{e}");
}

#[test]
fn encodings_and_binary_files_are_located() {
    let dir = TempDir::new().unwrap();
    let check = |bytes: &[u8], want: &str, ok: bool| {
        let p = dir.path().join("e.yaml");
        fs::write(&p, bytes).unwrap();
        let o = dplab().arg("validate").arg(&p).output().unwrap();
        if ok {
            assert!(o.status.success(), "{}", text(&o));
        } else {
            assert_eq!(o.status.code(), Some(2), "{}", text(&o));
            assert!(text(&o).contains(want), "want {want}: {}", text(&o));
        }
    };
    check(format!("\u{feff}{BASE}").as_bytes(), "", true);
    let utf16: Vec<u8> = [0xFF, 0xFE]
        .into_iter()
        .chain(BASE.encode_utf16().flat_map(|u| u.to_le_bytes()))
        .collect();
    check(&utf16, "e.yaml:1:1: the file is UTF-16", false);
    let mut latin1 = BASE
        .replace("A tiny pipeline", "A tiny pipeline caf")
        .into_bytes();
    let at = latin1.windows(3).position(|w| w == b"caf").unwrap() + 3;
    latin1.insert(at, 0xE9);
    check(&latin1, "e.yaml:2:27: the file is not valid UTF-8", false);
    check(
        BASE.replace("seed: 7", "seed: 7\0").as_bytes(),
        "e.yaml:5:8: the file holds a NUL byte",
        false,
    );
    check(
        format!("{BASE}---\nname: two\n").as_bytes(),
        "e.yaml:29:1: a second YAML document",
        false,
    );
}

#[test]
fn special_files_and_link_loops_do_not_hang() {
    let dir = TempDir::new().unwrap();
    let fifo = dir.path().join("f.yaml");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let o = dplab()
        .arg("validate")
        .arg(&fifo)
        .timeout(std::time::Duration::from_secs(20))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("not a regular file (it is a FIFO)"),
        "{}",
        text(&o)
    );
    let o = dplab()
        .arg("validate")
        .arg("/dev/zero")
        .timeout(std::time::Duration::from_secs(20))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    fs::remove_file(&fifo).unwrap();
    // `compare` reads only regular files: a FIFO named like a frame is an error, not a hang.
    write(dir.path(), "a/t.csv", "x\n1\n");
    fs::create_dir_all(dir.path().join("b")).unwrap();
    assert!(std::process::Command::new("mkfifo")
        .arg(dir.path().join("b/t.csv"))
        .status()
        .unwrap()
        .success());
    let o = dplab()
        .arg("compare")
        .arg(dir.path().join("a"))
        .arg(dir.path().join("b"))
        .timeout(std::time::Duration::from_secs(20))
        .output()
        .unwrap();
    assert!(matches!(o.status.code(), Some(1 | 2)), "{}", text(&o));
    assert!(text(&o).contains("FIFO"), "{}", text(&o));
    // A directory holding a link to itself: each pipeline once.
    write(dir.path(), "d/p.yaml", BASE);
    std::os::unix::fs::symlink(dir.path().join("d"), dir.path().join("d/loop")).unwrap();
    let o = dplab()
        .arg("validate")
        .arg(dir.path().join("d"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(text(&o).matches("ok: ").count(), 1, "{}", text(&o));
    // Absurd thread counts are refused at once.
    let o = dplab()
        .args(["run", "--jobs", "100000"])
        .arg(dir.path().join("d"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("1 to 1024"), "{}", text(&o));
}

/// `validate` on a pipeline with `stages` lines (after the header), within `limit`; the output
/// with its temporary directory written `[TMP]`.
fn validate_within(stages: &str, limit: std::time::Duration) -> String {
    let dir = TempDir::new().unwrap();
    let head =
        "name: many\ntitle: t\nsource: {paper: p, item: i}\ndescription: d\nseed: 1\nstages:\n";
    let p = write(dir.path(), "p.yaml", &format!("{head}{stages}"));
    let t0 = std::time::Instant::now();
    let o = dplab()
        .arg("validate")
        .arg(&p)
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    let took = t0.elapsed();
    assert!(took < limit, "validate took {took:?}");
    stable(&text(&o), dir.path())
}

/// Found with `tests/it/mutate.rs`-style probing beyond the fuzzer's input size: the "did you
/// mean" hints computed an edit distance against every candidate, once per typo. 8 000 stages
/// reading a missing stage (a 300 KB file) took 10 s and 20 000 took a minute (quadratic); a
/// `kind:` of 3 MiB took 9 s (one distance per stage kind, each over the whole word).
#[test]
fn many_typos_and_huge_names_do_not_make_validate_quadratic() {
    let many: String = (0..20_000)
        .map(|i| format!("  s{i}: {{kind: load.table, input: zz}}\n"))
        .collect();
    let out = validate_within(&many, std::time::Duration::from_secs(10));
    assert!(
        out.contains("stage `s99` reads `zz`, which is not a stage"),
        "{}",
        &out[out.len().saturating_sub(500)..]
    );
    let huge = format!("  a:\n    kind: {}\n", "x".repeat(3 << 20));
    let out = validate_within(&huge, std::time::Duration::from_secs(5));
    assert!(
        out.contains("unknown kind"),
        "{}",
        &out[..out.len().min(500)]
    );
    // Short lists still get their hint.
    let out = validate_within(
        "  a: {kind: load.tabel}\n  b: {kind: load.table, input: aa}\n",
        std::time::Duration::from_secs(5),
    );
    insta::assert_snapshot!("hints_for_short_lists", out);
}

/// A file of a million mistakes gets the first hundred errors, not a million: each error
/// costs a "did you mean" search and a list of the axes. 32 000 references to a missing axis
/// under 1 000 axes took 5 s and 400 MB; a 4 MiB file would have taken minutes and > 4 GB.
#[test]
fn a_flood_of_errors_stops_at_one_hundred() {
    let axes: String = (0..1000).map(|i| format!("  a{i}: [1]\n")).collect();
    let refs = vec!["$zz"; 200_000].join(", ");
    let floods = [
        // References to a missing axis, in one stage.
        format!("axes:\n{axes}stages:\n  s:\n    kind: load.table\n    with: {{x: [{refs}]}}\n"),
        // Unknown kinds.
        format!(
            "stages:\n{}",
            (0..20_000)
                .map(|i| format!("  s{i}: {{kind: load.tabel}}\n"))
                .collect::<String>()
        ),
        // One stage reading many missing stages.
        format!(
            "stages:\n  s:\n    kind: load.table\n    input: [{}]\n",
            (0..100_000).map(|i| format!("m{i}")).collect::<Vec<_>>().join(", ")
        ),
        // A profile naming many missing stages.
        format!(
            "stages:\n  s: {{kind: load.table, with: {{columns: {{a: [1]}}}}}}\nprofiles:\n  p:\n    repeat: {{{}}}\n",
            (0..100_000).map(|i| format!("m{i}: 2")).collect::<Vec<_>>().join(", ")
        ),
    ];
    for yaml in &floods {
        let dir = TempDir::new().unwrap();
        let head = "name: many\ntitle: t\nsource: {paper: p, item: i}\ndescription: d\nseed: 1\n";
        let p = write(dir.path(), "p.yaml", &format!("{head}{yaml}"));
        let t0 = std::time::Instant::now();
        let o = dplab()
            .arg("validate")
            .arg(&p)
            .timeout(std::time::Duration::from_secs(60))
            .output()
            .unwrap();
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(10),
            "{:?}",
            t0.elapsed()
        );
        let out = text(&o);
        assert_eq!(o.status.code(), Some(2), "{}", &out[..out.len().min(1000)]);
        assert_eq!(
            out.matches("error: ").count(),
            101,
            "{}",
            &out[..out.len().min(1000)]
        );
        assert!(
            out.contains("stopped after 100 errors"),
            "{}",
            &out[out.len().saturating_sub(500)..]
        );
    }
}

/// Logs piped into a reader that leaves (`dplab run -v 2>&1 | head -1`): the run goes on,
/// exits 0 and writes its results (tracing-subscriber's own complaint about the failed write
/// used to panic on the same closed stderr, exit 101, losing the run).
#[test]
fn a_closed_stderr_does_not_stop_a_run() {
    let dir = TempDir::new().unwrap();
    let p = write(dir.path(), "p.yaml", BASE);
    let out = dir.path().join("o");
    let o = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "set -o pipefail; DPLAB_STORE={} {} run -v --out {} {} 2>&1 | head -c 1 >/dev/null",
            dir.path().join("store").display(),
            assert_cmd::cargo::cargo_bin("dplab").display(),
            out.display(),
            p.display()
        ))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(out.read_dir().unwrap().next().is_some(), "no results");
}

#[test]
fn a_closed_stdout_ends_quietly_and_colour_stays_off_the_pipe() {
    for args in [vec!["list"], vec!["data", "list"]] {
        let o = std::process::Command::new("bash")
            .arg("-c")
            .arg(format!(
                "set -o pipefail; {} {} | head -c 1 >/dev/null",
                assert_cmd::cargo::cargo_bin("dplab").display(),
                args.join(" ")
            ))
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o));
        assert!(
            !String::from_utf8_lossy(&o.stderr).contains("panicked"),
            "{}",
            text(&o)
        );
    }
    // Where the exit status is a verdict, a reader leaving early does not turn it into 0.
    let dir = TempDir::new().unwrap();
    let good = write(dir.path(), "a.yaml", BASE);
    let bad = write(dir.path(), "b.yaml", &BASE.replace("seed: 7", "seed: -7"));
    let o = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "set -o pipefail; {} validate {} {} {} | head -c 1 >/dev/null",
            assert_cmd::cargo::cargo_bin("dplab").display(),
            good.display(),
            good.display(),
            bad.display()
        ))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    // Text from the file reaches the terminal with its control characters escaped.
    let e = invalid(&BASE.replace("with: {columns:", "with: {\"\\e[2J\\r\": 1, columns:"));
    assert!(
        !e.contains('\x1b') && !e.contains('\r') && e.contains("\\u{1b}"),
        "{e}"
    );
    let dir = TempDir::new().unwrap();
    let p = write(dir.path(), "p.yaml", BASE);
    let o = dplab()
        .arg("run")
        .arg("--out")
        .arg(dir.path().join("o"))
        .arg(&p)
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(
        !o.stderr.contains(&0x1b),
        "ANSI escapes on a pipe: {}",
        text(&o)
    );
}

#[test]
fn a_results_path_that_is_a_file_is_refused_before_running() {
    let dir = TempDir::new().unwrap();
    let p = write(dir.path(), "p.yaml", BASE);
    let out = dir.path().join("out");
    write(&out, "tiny", "not a directory");
    let o = dplab()
        .arg("run")
        .arg("--out")
        .arg(&out)
        .arg(&p)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert_eq!(
        fs::read_to_string(out.join("tiny")).unwrap(),
        "not a directory"
    );
    assert_eq!(tree(&out), vec!["tiny"]);
    // A directory dplab did not write (`--out .` with `name: src`) is never replaced.
    let out = dir.path().join("out2");
    write(&out, "tiny/main.rs", "fn main() {}");
    let o = dplab()
        .arg("run")
        .arg("--out")
        .arg(&out)
        .arg(&p)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("not results of pipeline `tiny`"),
        "{}",
        text(&o)
    );
    assert_eq!(tree(&out), vec!["tiny", "tiny/main.rs"]);
    // An empty directory, or dplab's own results, are.
    let out = dir.path().join("out3");
    fs::create_dir_all(out.join("tiny")).unwrap();
    for _ in 0..2 {
        let o = dplab()
            .args(["run", "-q", "--out"])
            .arg(&out)
            .arg(&p)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
    }
    // Results of another pipeline are not.
    let other = write(
        dir.path(),
        "q.yaml",
        &BASE.replace("name: tiny", "name: other"),
    );
    let o = dplab()
        .args(["run", "-q", "--out"])
        .arg(&out)
        .arg(&other)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    fs::remove_dir_all(out.join("tiny")).unwrap();
    fs::rename(out.join("other"), out.join("tiny")).unwrap();
    let o = dplab()
        .arg("run")
        .arg("--out")
        .arg(&out)
        .arg(&p)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

#[test]
fn concurrent_runs_into_one_directory_are_safe() {
    let dir = TempDir::new().unwrap();
    let p = write(dir.path(), "p.yaml", BASE);
    let out = dir.path().join("out");
    let children: Vec<_> = (0..6)
        .map(|_| {
            std::process::Command::new(assert_cmd::cargo::cargo_bin("dplab"))
                .args(["run", "-q", "--jobs", "1", "--out"])
                .arg(&out)
                .arg(&p)
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", text(&o));
    }
    assert_eq!(
        tree(&out)
            .iter()
            .filter(|f| !f.starts_with("tiny/"))
            .collect::<Vec<_>>(),
        vec!["tiny"]
    );
    assert!(out.join("tiny/manifest.json").is_file());
}

#[test]
fn an_interrupted_swap_is_recovered() {
    // What a writer killed between "move the old results aside" and "move the new ones in"
    // leaves (the fallback path on file systems without an atomic exchange).
    let dir = TempDir::new().unwrap();
    let p = write(dir.path(), "p.yaml", BASE);
    let out = dir.path().join("out");
    dplab()
        .args(["run", "-q", "--out"])
        .arg(&out)
        .arg(&p)
        .assert()
        .success();
    fs::rename(out.join("tiny"), out.join(".tiny.old-4000000")).unwrap();
    fs::create_dir(out.join(".tiny.partial-4000001")).unwrap();
    // A failing run (bad output name? no: a bad --set) must not be needed: a good run restores and replaces.
    dplab()
        .args(["run", "-q", "--out"])
        .arg(&out)
        .arg(&p)
        .assert()
        .success();
    assert_eq!(
        tree(&out)
            .iter()
            .filter(|f| !f.starts_with("tiny/"))
            .collect::<Vec<_>>(),
        vec!["tiny"]
    );
}

#[test]
fn alias_bombs_and_deep_nesting_are_located_errors() {
    let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x]\n");
    for i in 1..12u8 {
        let (n, p) = ((b'a' + i) as char, (b'a' + i - 1) as char);
        bomb += &format!("{n}: &{n} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n");
    }
    insta::assert_snapshot!("an_alias_bomb", invalid(&format!("{bomb}{BASE}")));
    // Few aliases of a large anchor: under the parser's repetition limit (it counts nodes),
    // yet ten thousand copies of 60 KB took 4.4 GB before the expanded size was counted.
    let wide = format!(
        "a: [&s '{}', {}]\n",
        "x".repeat(60_000),
        vec!["*s"; 10_000].join(", ")
    );
    insta::assert_snapshot!(
        "few_aliases_of_a_large_anchor",
        invalid(&format!("{wide}{BASE}"))
    );
    let deep = BASE.replace(
        "eps: [0.5, 1.0]",
        &format!("eps: {}1{}", "[".repeat(100_000), "]".repeat(100_000)),
    );
    insta::assert_snapshot!("deep_nesting", invalid(&deep));
}

/// The results directory's manifest matches the files beside it.
fn complete(dir: &Path) -> bool {
    let Ok(m) = fs::read(dir.join("manifest.json")) else {
        return false;
    };
    let m: serde_json::Value = serde_json::from_slice(&m).unwrap();
    m["outputs"].as_array().unwrap().iter().all(|o| {
        use sha2::Digest;
        let bytes = fs::read(dir.join(o["file"].as_str().unwrap())).unwrap_or_default();
        let h: String = sha2::Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        o["sha256"].as_str() == Some(h.as_str())
    })
}

#[test]
fn a_kill_at_any_moment_leaves_complete_results() {
    let dir = TempDir::new().unwrap();
    let p = write(
        dir.path(),
        "p.yaml",
        &BASE.replace("samples: 100000}", "samples: 200000}"),
    );
    let out = dir.path().join("out");
    dplab()
        .args(["run", "-q", "--out"])
        .arg(&out)
        .arg(&p)
        .assert()
        .success();
    // Deterministic "random" moments spread over a run (about 0.1–0.5 s here).
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..12 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let wait = std::time::Duration::from_millis(x % 400);
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("dplab"))
            .args(["run", "-q", "--jobs", "2", "--out"])
            .arg(&out)
            .arg(&p)
            .spawn()
            .unwrap();
        std::thread::sleep(wait);
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            complete(&out.join("tiny")),
            "incomplete results after a kill at {wait:?}"
        );
    }
    // The next run cleans up whatever the killed ones left.
    dplab()
        .args(["run", "-q", "--out"])
        .arg(&out)
        .arg(&p)
        .assert()
        .success();
    assert_eq!(
        tree(&out)
            .iter()
            .filter(|f| !f.starts_with("tiny/"))
            .count(),
        1
    );
    assert!(complete(&out.join("tiny")));
}

#[test]
fn a_csv_file_of_too_many_columns_is_refused_before_it_is_parsed() {
    // One row of 10⁶ columns passed the size checks and took two minutes and 5.8 GB: a column
    // costs as much as 1000 cells, so --max-cells 10⁶ allows 1000 columns, counted in the
    // header before polars parses anything.
    let dir = TempDir::new().unwrap();
    let p = write(
        dir.path(),
        "p.yaml",
        "name: wide\ntitle: t\nsource: {paper: p, item: i}\ndescription: d\nseed: 1\nstages:\n  t: {kind: load.table, with: {path: wide.csv}}\n",
    );
    let run = |n: usize| {
        let names: Vec<String> = (0..n).map(|i| format!("c{i}")).collect();
        write(
            dir.path(),
            "wide.csv",
            &format!("{}\n{}\n", names.join(","), vec!["1"; n].join(",")),
        );
        dplab()
            .args(["run", "-q", "--max-cells", "1000000", "--out"])
            .arg(dir.path().join("out"))
            .arg(&p)
            .output()
            .unwrap()
    };
    let o = run(1001);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("wide.csv: its table: 1001 columns, more than the limit of 1000")
            && text(&o).contains("raise it with --max-cells"),
        "{}",
        text(&o)
    );
    let o = run(1000);
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn a_csv_file_too_large_to_parse_is_refused_before_it_is_parsed() {
    // A parameter's CSV file is parsed by polars: 250 MB of one short column (or a header of
    // 2·10⁷ names) aborted the process under a 3 GiB address space. Its rows and columns are
    // counted first and checked against what --max-cells allows (here lowered, so the file is
    // small).
    let dir = TempDir::new().unwrap();
    write(
        dir.path(),
        "rows.csv",
        &format!("a,b\n{}", "1,2\n".repeat(5000)),
    );
    let p = write(
        dir.path(),
        "p.yaml",
        "name: big\ntitle: t\nsource: {paper: p, item: i}\ndescription: d\nseed: 1\nstages:\n  t: {kind: load.table, with: {path: rows.csv}}\n",
    );
    let run = |cells: &str| {
        dplab()
            .args(["run", "-q", "--max-cells", cells, "--out"])
            .arg(dir.path().join("out"))
            .arg(&p)
            .output()
            .unwrap()
    };
    let o = run("10000");
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("rows.csv: its table: 5000 rows × 2 columns")
            && text(&o).contains("--max-cells"),
        "{}",
        text(&o)
    );
    let o = run("1000000");
    assert!(o.status.success(), "{}", text(&o));
}
