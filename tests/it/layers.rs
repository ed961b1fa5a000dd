//! The three layers point one way (CLI → engine → stages → mechanisms): the engine never
//! imports the stage kinds (it is handed their registry), a stage never imports the engine
//! (the contract lives in `crate::kind`), and a mechanism knows nothing of YAML, frames,
//! stages or the engine.

use std::path::Path;

fn sources(dir: &Path, out: &mut Vec<(String, String)>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push((
                p.display().to_string(),
                std::fs::read_to_string(&p).unwrap(),
            ));
        }
    }
}

fn offenders(dir: &str, forbidden: &[&str]) -> Vec<String> {
    let mut files = Vec::new();
    sources(&Path::new(env!("CARGO_MANIFEST_DIR")).join(dir), &mut files);
    assert!(!files.is_empty(), "no sources under {dir}");
    let mut bad = Vec::new();
    for (path, text) in files {
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for f in forbidden {
                if code.contains(f) {
                    bad.push(format!("{path}:{}: {}", n + 1, line.trim()));
                }
            }
        }
    }
    bad
}

#[test]
fn the_engine_does_not_import_stage_kinds() {
    let bad = offenders("src/pipeline", &["crate::stages", "dplab::stages"]);
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn stage_kinds_do_not_import_the_engine() {
    let bad = offenders("src/stages", &["crate::pipeline", "dplab::pipeline"]);
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn mechanisms_know_nothing_of_yaml_frames_stages_or_the_engine() {
    let bad = offenders(
        "src/mech",
        &[
            "crate::pipeline",
            "crate::stages",
            "crate::kind",
            "polars",
            "serde_yaml",
        ],
    );
    assert!(bad.is_empty(), "{bad:#?}");
}
