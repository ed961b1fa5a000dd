//! The three layers point one way (CLI → engine → stages → mechanisms): the engine never
//! imports the stage kinds (it is handed their registry), a stage never imports the engine
//! (the contract lives in `crate::kind`), and a mechanism knows nothing of YAML, frames,
//! stages or the engine. The command line (`src/cli`, a module of the binary) is the top:
//! nothing imports it, it owns its vocabulary, and `main.rs` only hands over to it.

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

/// The program sandbox stands below the stage kinds and the engine: the `external` kind binds
/// it to a stage, the command line stops its programs, and it knows neither — nor the
/// contract between them.
#[test]
fn the_program_sandbox_knows_no_stage_engine_or_contract() {
    let bad = offenders(
        "src/program",
        &[
            "crate::stages",
            "crate::pipeline",
            "crate::kind",
            "crate::expr",
        ],
    );
    assert!(bad.is_empty(), "{bad:#?}");
}

/// The expression language is tested without any kind, and needs none.
#[test]
fn the_expression_language_knows_no_stage_engine_or_contract() {
    let bad = offenders(
        "src/expr",
        &[
            "crate::stages",
            "crate::pipeline",
            "crate::kind",
            "crate::program",
        ],
    );
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn nothing_imports_the_command_line() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let cli = src.join("cli").display().to_string();
    let mut bad = Vec::new();
    for (path, text) in files.iter().filter(|(p, _)| !p.starts_with(&cli)) {
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if ["crate::cli", "dplab::cli"]
                .iter()
                .any(|f| code.contains(f))
            {
                bad.push(format!("{path}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(files.len() > 10 && bad.is_empty(), "{bad:#?}");
}

/// `src/cli` takes its types (the clap definitions, `Outcome`, the output helpers) from its
/// own files, not from the crate root: every `crate::` path in it goes on with `cli::`.
#[test]
fn the_command_line_owns_its_vocabulary() {
    let mut files = Vec::new();
    sources(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src/cli"),
        &mut files,
    );
    assert!(files.len() > 1, "no sources under src/cli");
    let mut bad = Vec::new();
    for (path, text) in files {
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            let mut rest = code;
            while let Some(i) = rest.find("crate::") {
                rest = &rest[i + "crate::".len()..];
                // `$crate::cli::…` in the output macros is the same rule.
                if !rest.starts_with("cli::") {
                    bad.push(format!("{path}:{}: {}", n + 1, line.trim()));
                }
            }
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

/// `main.rs` is the allocator, the log set-up and one call into `src/cli`: a command body
/// that lands there again would reach the library directly.
#[test]
fn main_only_hands_over_to_the_command_line() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/main.rs");
    let text = std::fs::read_to_string(&path).unwrap();
    let code: Vec<&str> = text
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect();
    let reaching: Vec<&&str> = code.iter().filter(|l| l.contains("dplab::")).collect();
    assert!(
        reaching.is_empty(),
        "main.rs uses the library: {reaching:#?}"
    );
    assert!(
        code.iter().any(|l| l.contains("cli::dispatch(")),
        "main.rs does not hand over to cli::dispatch"
    );
}
