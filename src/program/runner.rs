//! One program's instance from start to end: a working directory, the description and
//! inputs written into it, the program run, its frame and artifacts read back, the
//! directory removed. What the `external` kind calls from its `run`; and a probe run once.

use std::time::Duration;

use polars::prelude::DataFrame;

use super::error::ProgramError;
use super::process::{self, Invocation, Log};
use super::protocol::{self, Bounds, Facts, ProgramArtifact, WorkDir};

/// The program of a stage, as its parameters give it.
#[derive(Clone, Debug)]
pub(crate) struct Program {
    /// The argv, run without a shell. `command[0]` is looked up in the absolute entries of
    /// `PATH` unless it holds a `/`: then it is a file of the instance's `code:`, found in the
    /// working directory (the kind allows no other path). Other relative paths are relative
    /// to the working directory too.
    pub command: Vec<String>,
    /// Environment variables passed through from dplab's environment
    /// ([`process::check_pass_env`] says which names are allowed).
    pub pass_env: Vec<String>,
    /// Threads the program may use (≥ 1).
    pub threads: u32,
    pub timeout: Duration,
}

/// The instance a program runs for.
pub struct Instance<'a> {
    pub stage: &'a str,
    pub label: &'a str,
    /// The stage's `params:` after `$axis` substitution, as JSON.
    pub params: &'a serde_json::Value,
    /// The instance's axis values.
    pub axes: &'a serde_json::Map<String, serde_json::Value>,
    pub seed: u128,
    pub inputs: &'a [DataFrame],
    pub input_names: &'a [String],
    /// The program's code (the stage's `code:` trees as planning read them): each file is
    /// written into the working directory at its path, so what runs is what the store key
    /// hashed, whatever happens to the files meanwhile.
    pub code: &'a [(std::path::PathBuf, &'a [u8])],
}

/// What a program that succeeded produced.
#[derive(Debug)]
pub(crate) struct Produced {
    pub frame: DataFrame,
    /// Sorted by name.
    pub artifacts: Vec<ProgramArtifact>,
    /// The end of its stdout and stderr, interleaved.
    pub log: Log,
}

/// Runs `program` for `instance` under [`protocol`] version 1 and reads back what it wrote.
/// Every process it started is gone and its working directory removed when this returns
/// (or unwinds).
pub fn run(
    program: &Program,
    instance: &Instance,
    bounds: &Bounds,
) -> Result<Produced, ProgramError> {
    let (work, json) = prepare(program, instance)?;
    write_code(work.path(), instance.code)?;
    make_program_executable(work.path(), &program.command)?;
    let env = process::environment(
        work.path(),
        &json,
        work.path(),
        program.threads.max(1),
        &program.pass_env,
    );
    let ran = process::run(&Invocation {
        argv: &program.command,
        cwd: work.path(),
        env,
        timeout: program.timeout,
        grace: bounds.grace,
        log_bytes: bounds.log_bytes,
    })?;
    let (frame, artifacts) = protocol::collect(&work, bounds, &ran.log.tail(process::TAIL_LINES))?;
    Ok(Produced {
        frame,
        artifacts,
        log: ran.log,
    })
}

/// The instance's private working directory, prepared for protocol 1 (its description,
/// inputs, output and artifact folders); returns it and its `dplab.json`.
pub(super) fn prepare(
    program: &Program,
    instance: &Instance,
) -> Result<(WorkDir, std::path::PathBuf), ProgramError> {
    let work = WorkDir::create().map_err(|e| {
        ProgramError::Setup(format!(
            "creating a directory in {}: {e}",
            std::env::temp_dir().display()
        ))
    })?;
    let json = protocol::prepare(
        &work,
        &Facts {
            stage: instance.stage,
            label: instance.label,
            params: instance.params,
            axes: instance.axes,
            seed: instance.seed,
            threads: program.threads.max(1),
            inputs: instance.inputs,
            input_names: instance.input_names,
        },
    )?;
    Ok((work, json))
}

/// A `code:` file named as the program runs as one: its copy in `work` is made executable
/// (the kind checked that it is among the code files).
pub(super) fn make_program_executable(
    work: &std::path::Path,
    command: &[String],
) -> Result<(), ProgramError> {
    if let Some(program) = command.first().filter(|p| {
        p.contains('/')
            && std::path::Path::new(p).components().all(|c| {
                matches!(
                    c,
                    std::path::Component::Normal(_) | std::path::Component::CurDir
                )
            })
    }) {
        use std::os::unix::fs::PermissionsExt;
        let copy = work.join(program);
        if copy.is_file() {
            std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| ProgramError::Setup(format!("{}: {e}", copy.display())))?;
        }
    }
    Ok(())
}

/// Writes the program's code files into the working directory at their paths (relative, no
/// `..`: the kind refuses others when it is planned; checked again here, since a path that
/// left the directory would write outside it).
pub(super) fn write_code(
    work: &std::path::Path,
    code: &[(std::path::PathBuf, &[u8])],
) -> Result<(), ProgramError> {
    use std::path::Component;
    for (rel, bytes) in code {
        if !rel
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Err(ProgramError::Setup(format!(
                "code path {} is not a plain relative path",
                rel.display()
            )));
        }
        let to = work.join(rel);
        if let Some(dir) = to.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| ProgramError::Setup(format!("{}: {e}", dir.display())))?;
        }
        std::fs::write(&to, bytes)
            .map_err(|e| ProgramError::Setup(format!("{}: {e}", to.display())))?;
    }
    Ok(())
}

/// Runs a probe (`python3 --version`: `argv`, with `pass_env` passed through) in a fresh,
/// empty working directory, with the environment its programs get, under `timeout`; returns
/// what it printed (stdout and stderr, the end of it). Running past `timeout` is a
/// [`ProgramError::ProbeTimeout`]: unlike a program's, a probe's limit is not a parameter.
pub(crate) fn run_probe(
    argv: &[String],
    pass_env: &[String],
    timeout: Duration,
) -> Result<Vec<u8>, ProgramError> {
    let work = WorkDir::create().map_err(|e| {
        ProgramError::Setup(format!(
            "creating a directory in {}: {e}",
            std::env::temp_dir().display()
        ))
    })?;
    let bounds = Bounds::current();
    let env = process::environment(
        work.path(),
        &work.path().join("dplab.json"),
        work.path(),
        1,
        pass_env,
    );
    let ran = process::run(&Invocation {
        argv,
        cwd: work.path(),
        env,
        timeout,
        grace: bounds.grace,
        log_bytes: bounds.log_bytes,
    })
    .map_err(|e| match e {
        ProgramError::Timeout {
            command,
            seconds,
            tail,
        } => ProgramError::ProbeTimeout {
            command,
            seconds,
            tail,
        },
        e => e,
    })?;
    Ok(ran.log.bytes())
}
