//! `external`: a researcher's own program, in any language, run once per instance — her
//! mechanism, metric or data generator in the same sweeps, seeds, store, shards and report as
//! every built-in kind.
//!
//! The program is an argv (`command:`, never a shell); its code (`code:`, files and folders
//! relative to the pipeline file) is read when the pipeline is planned, enters every
//! instance's store key by content, and is written into the instance's working directory, so
//! what runs is what was hashed: editing a file reruns exactly the instances that run it,
//! touching one reruns nothing. What the code runs on is outside the files: a `probe:` command
//! (`[python3, -c, "import numpy; print(numpy.__version__)"]`) is run once when the pipeline
//! is planned, and its output joins the key too. The instance's parameters (`params:`, `$axis` substituted),
//! axis values, 128-bit seed and input frames reach it as files under the hand-off protocol of
//! [`protocol`] (version 1); it writes one frame (and any artifacts) back. The same seed must
//! give the same frame: dplab cannot check that a program keeps this promise, except by
//! running it again (`dplab run --verify`).
//!
//! A pipeline with an external stage is code: the engine lists its programs and the command
//! line runs them only with the user's consent (`--allow-exec`).
//!
//! What runs the program — its private directory, the hand-off protocol, the process and its
//! containment, the worker mode — is the sandbox of [`crate::program`]; this kind binds it to a
//! stage: its parameters, its probes, its instance's seed and inputs, its declared columns.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::kind::{Probe, Prober};
use crate::program::{
    self, process, worker, Bounds, Instance, Program, ProgramError, PROTOCOL, PYTHON_HELPER,
};
use crate::stages::param::{Between, Positive};
use crate::stages::{build, params, Artifact, Ctx, Gather, KindInfo, Output, ParamError, Stage};

pub const KIND: KindInfo = KindInfo {
    name: "external",
    version: 1,
    random: true,
    runs_programs: true,
    summary: "Runs your own program (any language) once per instance: its parameters, axis values, seed and input frames go to it as files (protocol 1, see docs/src/mechanism.md), it writes one frame back. Needs --allow-exec.",
    params: params::<External>,
    gather: Gather::Nothing,
    build: build::<External>,
    verdict: None,
};

/// Longest a program may run, in seconds (a week): a larger `timeout` is a typo.
const MAX_TIMEOUT: f64 = 7.0 * 24.0 * 3600.0;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct External {
    /// the program and its arguments, run without a shell in the instance's working directory (e.g. [python3, pf.py]); values go in `params`, never here
    command: Vec<String>,
    /// the program's files and folders, relative to the pipeline file: hashed by content into every instance's store key and copied into its working directory at the same paths
    #[serde(default)]
    code: Vec<PathBuf>,
    /// parameters passed to the program as they are (in dplab.json's `params`; `$axis` references substituted)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    params: Option<serde_json::Map<String, serde_json::Value>>,
    /// a command run once when the pipeline is planned (e.g. [python3, --version]), in the program's environment: what it prints joins every instance's store key, so another interpreter or library version reruns them
    #[serde(default, skip_serializing_if = "Option::is_none")]
    probe: Option<Vec<String>>,
    /// threads the program may use (DPLAB_THREADS, OMP_NUM_THREADS, …)
    #[serde(default = "one_thread")]
    threads: Between<1, 1024>,
    /// seconds the program may run before its whole process group is killed
    #[serde(default = "an_hour")]
    timeout: Positive,
    /// environment variables passed through to the program (nothing else of dplab's environment is, beside PATH, HOME and LANG)
    #[serde(default)]
    pass_env: Vec<String>,
    /// the columns the program writes, in order: checked against every frame it writes, and known to `validate` for the stages below
    #[serde(default, skip_serializing_if = "Option::is_none")]
    columns: Option<Vec<String>>,
    /// start the program once per dplab thread and hand it instances one after another (worker protocol 1; the Python helper's `serve(fn)`), instead of once per instance: what it keeps across instances must not change its results, which `--verify` checks
    #[serde(default)]
    worker: bool,
    /// false when the program draws from a source dplab's seed does not govern (a library that cannot be seeded, as python-dp's C++ sampler): its results are then not reproducible bit for bit, its audits say so, and `--verify` does not compare two runs of it
    #[serde(default = "yes")]
    seeded: bool,
}

fn yes() -> bool {
    true
}

impl External {
    /// The interpreter's version, asked unasked when the program is a Python, R or Julia
    /// interpreter (`python3`, `python3.12`, `/usr/bin/python`, `Rscript`, `julia`): a result
    /// should say what ran it. Recorded in the manifest, not keyed ([`Probe::keyed`]). Not
    /// when the pipeline gives a probe of its own with the same command.
    fn interpreter_version(&self) -> Option<Probe> {
        let program = self.command.first()?;
        // A probe runs in an empty directory: a bare name on PATH, or an absolute path.
        if program.contains('/') && !program.starts_with('/') {
            return None;
        }
        let name = Path::new(program).file_name()?.to_str()?;
        let interpreter = (name.starts_with("python")
            && name["python".len()..]
                .chars()
                .all(|c| c.is_ascii_digit() || c == '.'))
            || matches!(name, "Rscript" | "R" | "julia");
        let argv = vec![program.clone(), "--version".to_string()];
        (interpreter && self.probe.as_ref() != Some(&argv)).then(|| Probe {
            argv,
            pass_env: self.pass_env.clone(),
            keyed: false,
        })
    }
}

/// Whether two relative paths name the same file (`.` components ignored).
fn code_path_eq(a: &Path, b: &Path) -> bool {
    code_path(&a.to_string_lossy()) == b
}

fn one_thread() -> Between<1, 1024> {
    Between::of(1)
}
fn an_hour() -> Positive {
    Positive::of(3600.0)
}

/// A command line (`command`, `probe`): a program's name and its arguments, none holding a
/// NUL byte (it could not reach the program).
fn check_argv(param: &str, argv: &[String]) -> Result<(), ParamError> {
    match argv.first() {
        None => {
            return Err(ParamError::at(
                param,
                "give the program to run: [program, arguments…]",
            ))
        }
        Some(p) if p.is_empty() => {
            return Err(ParamError::at(
                &format!("{param}.0"),
                "the program's name is empty",
            ))
        }
        _ => {}
    }
    if let Some(i) = argv.iter().position(|a| a.contains('\0')) {
        return Err(ParamError::at(
            &format!("{param}.{i}"),
            "an argument holds a NUL byte",
        ));
    }
    Ok(())
}

/// `command[0]`: a bare name (found on `PATH` when the pipeline is planned) or a path inside
/// one of the `code:` entries, relative to the pipeline file like them, without `..` — what
/// runs is then the copy of that file in the instance's directory, hashed with the rest. A
/// path anywhere else (absolute, `../x.sh`, `./x.sh` outside `code:`) would run a file that
/// nothing checked, and a relative one would be resolved in the instance's directory, whose
/// parent is the shared temporary directory.
fn check_program(command: &[String], code: &[PathBuf]) -> Result<(), ParamError> {
    use std::path::Component;
    let program = &command[0];
    let refuse = |why: &str| {
        Err(ParamError::at(
            "command.0",
            format!("{program}: {why}: give a program's bare name, found on PATH (python3), or a file inside `code:`, relative to the pipeline file (code/run.sh)"),
        ))
    };
    if program == "." || program == ".." {
        return refuse("not a program");
    }
    if !program.contains('/') {
        return Ok(());
    }
    let p = Path::new(program);
    if !p
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return refuse(if p.is_absolute() {
            "an absolute path"
        } else {
            "a path that leaves the pipeline's directory"
        });
    }
    if !code.iter().any(|c| in_tree(p, c)) {
        return refuse("not inside `code:`");
    }
    Ok(())
}

/// Whether `path` is `tree` or inside it (both relative, `.` components ignored).
fn in_tree(path: &Path, tree: &Path) -> bool {
    use std::path::Component;
    let normal = |p: &Path| -> Vec<std::ffi::OsString> {
        p.components()
            .filter(|c| !matches!(c, Component::CurDir))
            .map(|c| c.as_os_str().to_owned())
            .collect()
    };
    normal(path).starts_with(&normal(tree))
}

/// The path of a `code:` program inside the instance's directory (`./code/x.sh` →
/// `code/x.sh`), as `code:` files are written there.
fn code_path(program: &str) -> PathBuf {
    Path::new(program)
        .components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .collect()
}

impl Stage for External {
    fn seeded(&self) -> bool {
        self.seeded
    }

    fn validate(&self) -> Result<(), ParamError> {
        check_argv("command", &self.command)?;
        if let Some(probe) = &self.probe {
            check_argv("probe", probe)?;
            if probe[0].contains('/') {
                return Err(ParamError::at(
                    "probe.0",
                    format!(
                        "{}: a probe runs in an empty directory, before any code is copied: give a program's bare name, found on PATH (python3)",
                        probe[0]
                    ),
                ));
            }
        }
        for (i, c) in self.code.iter().enumerate() {
            use std::path::Component;
            if c.as_os_str().is_empty()
                || !c
                    .components()
                    .all(|p| matches!(p, Component::Normal(_) | Component::CurDir))
            {
                return Err(ParamError::at(
                    &format!("code.{i}"),
                    format!(
                        "{}: give a path inside the pipeline's directory, relative to the pipeline file, without `..` (it is copied to the same path in the program's working directory)",
                        c.display()
                    ),
                ));
            }
        }
        crate::kind::distinct(
            "code",
            &self.code.iter().map(|c| c.display()).collect::<Vec<_>>(),
        )?;
        if *self.timeout > MAX_TIMEOUT {
            return Err(ParamError::at(
                "timeout",
                format!("{} s is more than a week ({MAX_TIMEOUT} s)", *self.timeout),
            ));
        }
        for (i, name) in self.pass_env.iter().enumerate() {
            process::check_pass_env(name)
                .map_err(|m| ParamError::at(&format!("pass_env.{i}"), m))?;
        }
        if let Some(cols) = &self.columns {
            crate::kind::distinct("columns", cols)?;
        }
        check_program(&self.command, &self.code)
    }

    /// The program is checked where it will be looked for: a `code:` file among those read,
    /// a bare name on `PATH` (as the probe's).
    fn check_files(&self, files: &dyn crate::kind::FileSource) -> Result<(), ParamError> {
        let probe = self.probe.as_ref().map(|p| &p[0]);
        for (at, name) in [("command.0", Some(&self.command[0])), ("probe.0", probe)] {
            let Some(name) = name else { continue };
            if name.contains('/') {
                let want = code_path(name);
                let found = self.code.iter().any(|c| {
                    files
                        .tree(c)
                        .is_some_and(|t| t.iter().any(|(p, _)| code_path_eq(p, &want)))
                });
                if !found {
                    return Err(ParamError::at(
                        at,
                        format!("{name}: no such file among the `code:` files"),
                    ));
                }
            } else if process::which(name).is_none() {
                return Err(ParamError::at(
                    at,
                    format!(
                        "{name}: no such program on PATH ({}; relative entries are not searched)",
                        std::env::var("PATH").unwrap_or_default()
                    ),
                ));
            }
        }
        Ok(())
    }

    fn trees(&self) -> Vec<(&'static str, &Path)> {
        self.code.iter().map(|c| ("code", c.as_path())).collect()
    }

    fn programs(&self) -> Vec<(String, Vec<String>)> {
        let mut all = vec![("command".to_string(), self.command.clone())];
        all.extend(self.probe.clone().map(|p| ("probe".to_string(), p)));
        // Consent covers what runs unasked too.
        all.extend(
            self.interpreter_version()
                .map(|p| ("command".to_string(), p.argv)),
        );
        all
    }

    fn probes(&self) -> Vec<Probe> {
        let asked = self.probe.iter().map(|argv| Probe {
            argv: argv.clone(),
            pass_env: self.pass_env.clone(),
            keyed: true,
        });
        asked.chain(self.interpreter_version()).collect()
    }

    fn recorded(&self) -> Vec<(String, String)> {
        vec![(
            "dplab_external.py".into(),
            format!(
                "protocol {PROTOCOL}, sha256 {}",
                &crate::text::hex(&<sha2::Sha256 as sha2::Digest>::digest(PYTHON_HELPER))[..12]
            ),
        )]
    }

    fn columns_out(&self, _: &[Option<Vec<String>>]) -> Option<Vec<String>> {
        self.columns.clone()
    }

    fn run(&self, ctx: &mut Ctx) -> Result<Output> {
        let params = serde_json::Value::Object(self.params.clone().unwrap_or_default());
        let axes: serde_json::Map<String, serde_json::Value> = ctx
            .axes
            .iter()
            .map(|(a, v)| Ok((a.to_string(), serde_json::to_value(v.to_yaml())?)))
            .collect::<Result<_, serde_json::Error>>()?;
        let mut code = Vec::new();
        for c in &self.code {
            code.extend(ctx.tree(c)?);
        }
        let program = Program {
            command: self.command.clone(),
            pass_env: self.pass_env.clone(),
            threads: *self.threads as u32,
            timeout: Duration::from_secs_f64(*self.timeout),
        };
        let instance = Instance {
            stage: ctx.stage,
            label: ctx.label,
            params: &params,
            axes: &axes,
            seed: ctx.seed,
            inputs: ctx.inputs,
            input_names: ctx.input_names,
            code: &code,
        };
        let produced = if self.worker {
            worker::run(&program, &instance, &Bounds::current(), ctx.again)?
        } else {
            program::run(&program, &instance, &Bounds::current())?
        };
        if let Some(declared) = &self.columns {
            let axes: Vec<&str> = ctx.axes.iter().map(|(a, _)| &**a).collect();
            check_columns(&produced.frame, declared, &axes)?;
        }
        let mut artifacts: Vec<Artifact> = produced
            .artifacts
            .into_iter()
            .map(|a| Artifact {
                ext: a.name.into(),
                bytes: a.bytes,
            })
            .collect();
        // What the program printed, kept with the instance (`<stage>.log`) when it printed
        // anything.
        let log = produced.log.bytes();
        if !log.is_empty() {
            artifacts.push(Artifact {
                ext: "log".into(),
                bytes: log,
            });
        }
        Ok(Output {
            frame: produced.frame,
            artifacts,
        })
    }
}

/// Longest a probe may run: it prints a version, it does not compute.
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs a stage's probe (e.g. `python3 --version`) once per process for each distinct probe,
/// under [`PROBE_TIMEOUT`] ([`program::run_probe`]). Given to the planner only with the
/// user's consent to run programs.
#[derive(Default)]
pub struct Probes {
    done: std::sync::Mutex<std::collections::HashMap<Probe, Result<Vec<u8>, String>>>,
}

impl Prober for Probes {
    fn probe(&self, probe: &Probe) -> Result<Vec<u8>, String> {
        let mut done = self.done.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = done.get(probe) {
            return r.clone();
        }
        let r = program::run_probe(&probe.argv, &probe.pass_env, PROBE_TIMEOUT)
            .map_err(|e| e.to_string());
        done.insert(probe.clone(), r.clone());
        r
    }
}

/// The program's frame against the stage's `columns:`, before the engine sees it: the engine
/// holds a kind to the columns it declares, and would call a difference a bug in the kind,
/// when here it is the program's (or the pipeline's). Axis columns are left out on both
/// sides: the engine puts the instance's axis values first, over any the program wrote.
fn check_columns(
    frame: &polars::prelude::DataFrame,
    declared: &[String],
    axes: &[&str],
) -> Result<(), ProgramError> {
    let data = |c: &&str| !axes.contains(c);
    let wrote: Vec<&str> = frame
        .get_column_names()
        .into_iter()
        .map(|c| c.as_str())
        .collect();
    let ours: Vec<&str> = wrote.iter().copied().filter(data).collect();
    let theirs: Vec<&str> = declared.iter().map(String::as_str).filter(data).collect();
    if ours == theirs {
        return Ok(());
    }
    let owned = |v: &[&str]| v.iter().map(|c| c.to_string()).collect::<Vec<_>>();
    let not_in = |a: &[&str], b: &[&str]| {
        let b: std::collections::HashSet<&str> = b.iter().copied().collect();
        a.iter()
            .filter(|c| !b.contains(*c))
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
    };
    Err(ProgramError::Columns {
        wrote: owned(&wrote),
        declared: declared.to_vec(),
        missing: not_in(&theirs, &ours),
        extra: not_in(&ours, &theirs),
    })
}

#[cfg(test)]
mod kind_tests {
    use super::KIND;
    use crate::kind::testing::{fails, floats, refused, run};

    /// The kind hands its input to the program and takes the frame back (here `sh` copying
    /// the CSV it was given), with the columns it declares checked; its parameters are refused
    /// where they could not run or could leave the working directory.
    #[test]
    fn the_program_gets_its_input_and_bad_parameters_are_refused() {
        let input = polars::df!("u" => [1.5, -2.0]).unwrap();
        let with = "{command: [sh, -c, 'cp inputs/*.csv output/out.csv'], columns: [u]}";
        let out = run(&KIND, with, &[&input], 3).unwrap().frame;
        assert_eq!(floats(&out, "u"), [1.5, -2.0]);
        for (with, says) in [
            ("{command: []}", "command: give the program to run"),
            (
                "{command: [''], code: [a.py]}",
                "command.0: the program's name is empty",
            ),
            (
                "{command: [sh], code: [../a.py]}",
                "code.0: ../a.py: give a path inside",
            ),
            (
                "{command: [sh], code: [/etc/passwd]}",
                "code.0: /etc/passwd: give a path inside",
            ),
            (
                "{command: [sh], timeout: 1e9}",
                "timeout: 1000000000 s is more than a week",
            ),
            (
                "{command: [sh], pass_env: [DPLAB_JSON]}",
                "pass_env.0: `DPLAB_JSON` is set by dplab",
            ),
            ("{command: [sh], threads: 0}", "threads"),
        ] {
            let got = refused(&KIND, with);
            assert!(got.contains(says), "{with}: {got}");
        }
    }

    /// A frame whose columns are not the declared ones is the program's error, and says
    /// which columns differ: missing, not declared, or only in another order; names the
    /// program chose reach the message escaped.
    #[test]
    fn columns_other_than_declared_are_the_program_s_error() {
        // `header` and a row of as many values.
        let write = |header: &str| {
            let row: Vec<String> = (1..=header.split(',').count())
                .map(|i| i.to_string())
                .collect();
            let row = row.join(",");
            format!("{{command: [sh, -c, 'printf \"{header}\\n{row}\\n\" > output/out.csv'], columns: [a, b]}}")
        };
        for (header, says) in [
            ("a,c", "the program wrote columns [a, c] but the stage declares `columns: [a, b]`: missing b, not declared c"),
            ("a", "the program wrote columns [a] but the stage declares `columns: [a, b]`: missing b"),
            ("a,b,c", "wrote columns [a, b, c] but the stage declares `columns: [a, b]`: not declared c"),
            ("b,a", "wrote columns [b, a] but the stage declares `columns: [a, b]`: the same columns in another order"),
            ("a,\\033[31mb", "wrote columns [a, \\u{1b}[31mb] but the stage declares `columns: [a, b]`: missing b, not declared \\u{1b}[31mb"),
        ] {
            let with = write(header);
            let got = fails(&KIND, &with, &[], 1);
            assert!(got.contains(says), "{header}: {got}");
            assert!(!got.contains("a bug in the kind") && !got.contains('\x1b'), "{got}");
        }
        let out = run(&KIND, &write("a,b"), &[], 1).unwrap().frame;
        assert_eq!(floats(&out, "b"), [2.0]);
    }
}
