//! `dplab show`: the composed pipeline is itself a pipeline that plans to the same instances,
//! seeds and store keys as the original under its profile and `--set`.

use crate::common;
use common::{dplab, text};
use std::fs;
use std::path::Path;

use tempfile::TempDir;

fn instances(file: &Path, args: &[&str]) -> String {
    let o = dplab()
        .args(["show", "--instances"])
        .args(args)
        .arg(file)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    String::from_utf8(o.stdout).unwrap()
}

fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for f in fs::read_dir(from).unwrap().flatten() {
        if f.file_type().unwrap().is_dir() {
            copy_tree(&f.path(), &to.join(f.file_name()));
        } else {
            fs::copy(f.path(), to.join(f.file_name())).unwrap();
        }
    }
}

#[test]
fn every_composed_pipeline_plans_to_the_same_instances_and_keys() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("pipelines");
    let dir = TempDir::new().unwrap();
    let mut checked = 0;
    for paper in fs::read_dir(&root).unwrap().flatten() {
        // A copy of the paper's directory: pipelines read files (and code folders) beside them.
        let copy = dir.path().join(paper.file_name());
        copy_tree(&paper.path(), &copy);
        for f in fs::read_dir(paper.path()).unwrap().flatten() {
            let p = f.path();
            if p.extension().is_none_or(|e| e != "yaml") {
                continue;
            }
            for args in [&["--profile", "ci", "--set", "seed=5"][..], &[]] {
                let o = dplab().arg("show").args(args).arg(&p).output().unwrap();
                assert!(o.status.success(), "{}: {}", p.display(), text(&o));
                let composed = copy.join("composed.yaml");
                fs::write(&composed, &o.stdout).unwrap();
                assert_eq!(
                    instances(&composed, &[]),
                    instances(&p, args),
                    "{} {args:?}: the composed file plans other instances:\n{}",
                    p.display(),
                    String::from_utf8_lossy(&o.stdout)
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 40, "{checked} pipelines checked");
}

#[test]
fn show_applies_set_and_reports_bad_input() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let p = root.join("pipelines/dwork-roth/dr-two-diseases.yaml");
    let o = dplab()
        .args(["show", "--set", "noisy_max.samples=77", "--set", "eps=[3]"])
        .arg(&p)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let root_text = root.to_string_lossy();
    let y = String::from_utf8(o.stdout)
        .unwrap()
        .replace(&*root_text, "[ROOT]");
    // The two `--set`s applied (stated here; the snapshot holds the rest of the file).
    assert!(y.contains("samples: 77"), "{y}");
    assert!(y.contains("eps:\n  - 3\n"), "{y}");
    insta::assert_snapshot!(y);
    let o = dplab()
        .args(["show", "--set", "noisy_max.smples=1"])
        .arg(&p)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(o.stdout.is_empty(), "{}", text(&o));
    insta::assert_snapshot!(
        "show_refuses_a_misspelt_set",
        String::from_utf8_lossy(&o.stderr).replace(&*root_text, "[ROOT]")
    );
}
