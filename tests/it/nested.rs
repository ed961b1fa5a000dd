//! A refused value inside nested parameters is named by its whole path (issue #54): a list
//! index alone (`0`) or the last key alone names nothing a reader can find, and text given as
//! a number says why it must be text.
//!
//! The class, not the example: every nested value of every stage of every pipeline under
//! `pipelines/` (one per kind and path shape) is replaced by a mapping, which no nested
//! parameter takes where it wants a scalar, and the refusal must name the value's path — or,
//! for a value of several forms (`claim.epsilon: 0.5` or `{column: eps}`), the path of that
//! value.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_yaml_ng::Value;

use crate::common::{dplab, stable};

/// The pipeline files under `pipelines/`, in name order.
fn pipelines(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let p = e.path();
        if p.is_dir() {
            pipelines(&p, out);
        } else if p.extension().is_some_and(|x| x == "yaml") {
            out.push(p);
        }
    }
}

/// A step of a path: a key or a list index.
#[derive(Clone, Debug)]
enum Step {
    Key(Value),
    Index(usize),
}

/// Every scalar under `v` with its path.
fn leaves(v: &Value, path: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
    match v {
        Value::Mapping(m) => {
            for (k, x) in m {
                path.push(Step::Key(k.clone()));
                leaves(x, path, out);
                path.pop();
            }
        }
        Value::Sequence(s) => {
            for (i, x) in s.iter().enumerate() {
                path.push(Step::Index(i));
                leaves(x, path, out);
                path.pop();
            }
        }
        _ => out.push(path.clone()),
    }
}

fn key_text(k: &Value) -> String {
    match k {
        Value::String(s) => s.clone(),
        other => serde_yaml_ng::to_string(other).unwrap().trim().to_string(),
    }
}

/// `neighbours.same.bin[0]`, as dplab writes a path.
fn dotted(path: &[Step]) -> String {
    let mut out = String::new();
    for s in path {
        match s {
            Step::Index(i) => out.push_str(&format!("[{i}]")),
            Step::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(&key_text(k));
            }
        }
    }
    out
}

fn at<'v>(v: &'v mut Value, path: &[Step]) -> &'v mut Value {
    let mut v = v;
    for s in path {
        v = match s {
            Step::Key(k) => v.as_mapping_mut().unwrap().get_mut(k).unwrap(),
            Step::Index(i) => &mut v.as_sequence_mut().unwrap()[*i],
        };
    }
    v
}

/// Copies the files of `from` (not its hidden ones) into `to`: a pipeline's sibling files.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        if e.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}

/// `dplab validate` of pipeline `file` with the value at `path` of stage `stage`'s `with:`
/// replaced by `new`, run in a copy of its folder: its exit code and its stderr.
fn validate_with(
    dir: &Path,
    file: &Path,
    stage: &str,
    path: &[Step],
    new: Value,
) -> (Option<i32>, String) {
    let mut doc: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    let with = doc["stages"][stage]["with"].clone();
    let mut with = with;
    *at(&mut with, path) = new;
    doc["stages"][stage]["with"] = with;
    let copy = dir.join("pipelines");
    if !copy.exists() {
        copy_dir(file.parent().unwrap(), &copy);
    }
    let mutant = copy.join("mutant.yaml");
    std::fs::write(&mutant, serde_yaml_ng::to_string(&doc).unwrap()).unwrap();
    let o = dplab().arg("validate").arg(&mutant).output().unwrap();
    (
        o.status.code(),
        stable(&String::from_utf8_lossy(&o.stderr), dir),
    )
}

#[test]
fn a_refused_nested_value_is_named_by_its_whole_path() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("pipelines");
    let mut files = Vec::new();
    pipelines(&root, &mut files);
    let mut seen = BTreeSet::new();
    let (mut refused, mut unnamed) = (0, Vec::new());
    for file in &files {
        let doc: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        let Some(stages) = doc.get("stages").and_then(Value::as_mapping) else {
            continue;
        };
        // One folder per pipeline: its sibling files copied once.
        let dir = tempfile::tempdir().unwrap();
        for (name, st) in stages {
            let (Some(name), Some(with)) = (name.as_str(), st.get("with")) else {
                continue;
            };
            let kind = st.get("kind").and_then(Value::as_str).unwrap_or_default();
            let mut all = Vec::new();
            leaves(with, &mut Vec::new(), &mut all);
            for path in all.into_iter().filter(|p| p.len() >= 2) {
                let shape: Vec<String> = path
                    .iter()
                    .map(|s| match s {
                        Step::Index(_) => "#".to_string(),
                        Step::Key(k) => key_text(k),
                    })
                    .collect();
                if !seen.insert((kind.to_string(), shape)) {
                    continue;
                }
                let wrong: Value = serde_yaml_ng::from_str("{wrong: 1}").unwrap();
                let (code, err) = validate_with(dir.path(), file, name, &path, wrong);
                if code == Some(0) {
                    // A value of no fixed type (an external program's `params`).
                    continue;
                }
                assert_eq!(code, Some(2), "{}: {err}", file.display());
                refused += 1;
                // The value's path, or the path of a value of several forms above it: never
                // the top key alone, nor a bare index.
                let named = (2..=path.len()).rev().any(|n| {
                    let p = dotted(&path[..n]);
                    err.contains(&format!("`{p}`")) || err.contains(&format!("{p} ="))
                });
                if !named {
                    unnamed.push(format!(
                        "{}: stage `{name}` ({kind}), `{}`: {}",
                        file.display(),
                        dotted(&path),
                        err.lines().next().unwrap_or_default()
                    ));
                }
            }
        }
    }
    // The pipelines hold a few hundred nested values of distinct shapes.
    assert!(refused > 100, "only {refused} nested values were refused");
    assert!(unnamed.is_empty(), "{}", unnamed.join("\n"));
}

/// The messages a researcher meets most, as she reads them: a label given as a number (the
/// issue's `same: {bin: [0, 1, …]}`), a table column of mixed values, a plotted column that is
/// no name, a nested value out of its range, a nested list holding a name twice.
#[test]
fn nested_messages_name_the_path_and_why() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("pipelines");
    let step = |s: &str| match s.parse::<usize>() {
        Ok(i) => Step::Index(i),
        Err(_) => Step::Key(Value::String(s.into())),
    };
    let mut all = String::new();
    for (file, stage, path, new) in [
        (
            "audit/audit-mechanisms.yaml",
            "exponential",
            "neighbours.same.candidate.0",
            "0",
        ),
        (
            "dwork-roth/dr-pumpkin.yaml",
            "bids",
            "columns.bid.1",
            "high",
        ),
        ("dwork-roth/dr-pumpkin.yaml", "figure", "y.0", "{a: 1}"),
        ("huang2014/h14-table3.2.yaml", "truth", "sigmas.1", "0"),
        (
            "dwork-roth/dr-pumpkin.yaml",
            "figure",
            "labels.mc_mean",
            "3",
        ),
    ] {
        let path: Vec<Step> = path.split('.').map(step).collect();
        let dir = tempfile::tempdir().unwrap();
        let new: Value = serde_yaml_ng::from_str(new).unwrap();
        let (code, err) = validate_with(dir.path(), &root.join(file), stage, &path, new);
        assert_eq!(code, Some(2), "{file}: {err}");
        all.push_str(&format!(
            "{file}, stage `{stage}`, {}:\n{err}\n",
            dotted(&path)
        ));
    }
    insta::assert_snapshot!(all);
}

/// A value of several forms is an untagged enum, which serde refuses with "data did not match
/// any variant": each says what it takes (`expecting = "expected …"`, which dplab puts after
/// what was given), or is read by hand, naming the element that is wrong.
#[test]
fn every_value_of_several_forms_says_what_it_takes() {
    fn walk(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push((p.clone(), std::fs::read_to_string(&p).unwrap()));
            }
        }
    }
    let mut files = Vec::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    let mut bad = Vec::new();
    let mut found = 0;
    for (path, text) in &files {
        // Each `#[serde(…)]` attribute, over as many lines as rustfmt gives it.
        let mut rest = text.as_str();
        while let Some(at) = rest.find("#[serde(") {
            let attr_and_after = &rest[at..];
            let end = attr_and_after
                .find(")]")
                .map_or(attr_and_after.len(), |e| e + 2);
            let attr = &attr_and_after[..end];
            rest = &attr_and_after[end..];
            if !attr.contains("untagged") {
                continue;
            }
            found += 1;
            let name = rest
                .split("enum ")
                .nth(1)
                .and_then(|r| r.split([' ', '{', '<']).next())
                .unwrap_or_default();
            let says = attr.contains("expecting = \"expected ");
            let by_hand = text.contains(&format!("Deserialize<'de> for {name} "));
            if !says && !by_hand {
                bad.push(format!("{}: enum {name}", path.display()));
            }
        }
    }
    assert!(found >= 5, "the scan found {found} untagged enums");
    assert!(
        bad.is_empty(),
        "untagged enums that do not say what they take:\n{}",
        bad.join("\n")
    );
}
