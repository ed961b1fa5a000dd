//! Worker mode (`worker: true`), **worker protocol 1**: the program starts once per dplab
//! worker thread and serves instances one after another, so a Python program that imports
//! numpy pays for its start-up once per thread, not once per instance.
//!
//! The program starts in a private directory of its own (mode 0700, as an instance's; the
//! stage's `code:` and the Python helper are written there; it is its TMPDIR), contained like
//! any program ([`super::contain`]), with `DPLAB_WORKER=1` and `DPLAB_WORKER_ANSWERS` (the number
//! of a file descriptor open for writing) in its environment. For each instance, dplab prepares the instance's own private directory exactly
//! as protocol 1 does (`dplab.json`, `inputs/`, `output/`, `artifacts/`) and writes one line of
//! JSON to the program's stdin:
//!
//! ```json
//! {"worker": 1, "instance": "eps=0.5 rep=3", "dir": "<instance dir>", "json": "<instance dir>/dplab.json"}
//! ```
//!
//! The program computes the instance — its seed, parameters and inputs are in that
//! `dplab.json`, its frame goes to that `output/` — and answers with one line of JSON on the
//! descriptor `DPLAB_WORKER_ANSWERS` names: `{"ok": true}`, or `{"ok": false, "error": "<one line>"}` when the instance
//! failed (the program serves the next one). What it prints meanwhile on stdout and stderr is
//! that instance's log. dplab reads the frame and artifacts as protocol 1 does and removes the
//! instance's directory. When stdin ends, the program exits. The Python helper's
//! `serve(fn)` does all of this (and chdirs into each instance's directory while `fn` runs);
//! without `DPLAB_WORKER` it computes the one instance of protocol 1, so one program runs in
//! either mode.
//!
//! What holds as in protocol 1: keys on the code's content, consent, containment (a worker's
//! descendants end with it — at the latest when its dplab thread ends, as `PR_SET_PDEATHSIG`
//! and the PID namespace see to), `timeout` per instance (a worker that overruns it is
//! killed, the instance fails, and the next instance gets a new worker), shards (each process
//! has its own workers). A worker that exits or breaks the protocol fails the instance it was
//! serving and is replaced. State a program keeps from one instance to the next must not
//! change its results: `--verify` computes its instances again in a fresh worker that has
//! served nothing before (the `again` flag of [`run`]), so a result that depended on what came
//! before differs, and the run says so.
//!
//! Each dplab thread keeps at most one worker, of the stage it served last: the scheduler
//! takes ready instances in plan order, so a thread mostly serves one stage at a time, and at
//! most `--jobs` workers per pipeline are alive (a command runs at most three pipelines at
//! once, see `cli/run.rs`).

use std::cell::RefCell;
use std::ffi::OsString;
use std::io::{PipeReader, PipeWriter, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use super::error::ProgramError;
use super::process::{self, Log, Started};
use super::protocol::{self, Bounds, WorkDir};
use super::runner::{write_code, Instance, Produced, Program};

/// The version of the worker protocol above.
pub(crate) const WORKER_PROTOCOL: u32 = 1;

/// Longest answer line read: `{"ok": false, "error": …}` with a long error.
const MAX_ANSWER: usize = 64 << 10;

/// What makes two workers interchangeable: the same program, environment and code.
#[derive(Clone, PartialEq)]
struct WorkerKey {
    command: Vec<String>,
    pass_env: Vec<String>,
    threads: u32,
    /// The code's paths and bytes, as written into the worker's directory.
    code: Vec<(std::path::PathBuf, Vec<u8>)>,
}

/// A started worker: its process, the pipes to and from it, its directory.
struct Worker {
    key: WorkerKey,
    started: Started,
    requests: Option<PipeWriter>,
    answers: PipeReader,
    /// Bytes read from `answers` that do not end a line yet.
    pending: Vec<u8>,
    /// Its directory: removed after the process is gone (fields drop in order).
    _dir: WorkDir,
}

thread_local! {
    /// This thread's worker, if it has one.
    static WORKER: RefCell<Option<Worker>> = const { RefCell::new(None) };
}

/// Computes `instance` in a worker of `program`: this thread's, when it serves the same
/// program and code, else a new one. With `fresh`, in a worker started for this instance
/// alone (`--verify`'s second computation).
pub(crate) fn run(
    program: &Program,
    instance: &Instance,
    bounds: &Bounds,
    fresh: bool,
) -> Result<Produced, ProgramError> {
    let key = WorkerKey {
        command: program.command.clone(),
        pass_env: program.pass_env.clone(),
        threads: program.threads.max(1),
        code: instance
            .code
            .iter()
            .map(|(p, b)| (p.clone(), b.to_vec()))
            .collect(),
    };
    let (work, json) = super::runner::prepare(program, instance)?;
    let request = serde_json::json!({
        "worker": WORKER_PROTOCOL,
        "instance": instance.label,
        "dir": work.path(),
        "json": json,
    })
    .to_string()
        + "\n";
    let served = if fresh {
        let mut w = Worker::start(key, program, bounds)?;
        w.serve(&request, program, bounds)
    } else {
        WORKER.with(|slot| {
            let mut slot = slot.borrow_mut();
            // Another program's worker, or one that has exited, makes way.
            if slot
                .as_ref()
                .is_some_and(|w| w.key != key || w.started.exited())
            {
                *slot = None;
            }
            if slot.is_none() {
                *slot = Some(Worker::start(key, program, bounds).map_err(|e| (e, true))?);
            }
            let w = slot.as_mut().expect("started above");
            let served = w.serve(&request, program, bounds);
            // A worker that failed the protocol (or timed out, or died) is not used again.
            if matches!(served, Err((_, true))) {
                *slot = None;
            }
            served
        })
    };
    let log = served.map_err(|(e, _)| e)?;
    let (frame, artifacts) = protocol::collect(&work, bounds, &log.tail(process::TAIL_LINES))?;
    Ok(Produced {
        frame,
        artifacts,
        log,
    })
}

impl Worker {
    fn start(key: WorkerKey, program: &Program, bounds: &Bounds) -> Result<Worker, ProgramError> {
        let dir = WorkDir::create().map_err(|e| {
            ProgramError::Setup(format!(
                "creating a directory in {}: {e}",
                std::env::temp_dir().display()
            ))
        })?;
        let code: Vec<(std::path::PathBuf, &[u8])> = key
            .code
            .iter()
            .map(|(p, b)| (p.clone(), b.as_slice()))
            .collect();
        write_code(dir.path(), &code)?;
        std::fs::write(
            dir.path().join("dplab_external.py"),
            protocol::PYTHON_HELPER.as_bytes(),
        )
        .map_err(|e| ProgramError::Setup(format!("writing the helper: {e}")))?;
        super::runner::make_program_executable(dir.path(), &program.command)?;
        let mut env = process::environment(
            dir.path(),
            // No instance yet: each request names its own dplab.json.
            &dir.path().join("dplab.json"),
            dir.path(),
            key.threads,
            &program.pass_env,
        );
        let (answers, answers_w) =
            std::io::pipe().map_err(|e| ProgramError::Setup(format!("a pipe: {e}")))?;
        env.push((
            OsString::from("DPLAB_WORKER"),
            WORKER_PROTOCOL.to_string().into(),
        ));
        // The answers' descriptor keeps its number in the program.
        env.push((
            OsString::from("DPLAB_WORKER_ANSWERS"),
            answers_w.as_raw_fd().to_string().into(),
        ));
        let (requests_r, requests) =
            std::io::pipe().map_err(|e| ProgramError::Setup(format!("a pipe: {e}")))?;
        process::set_nonblocking(&answers)
            .map_err(|e| ProgramError::Setup(format!("a pipe: {e}")))?;
        let started = process::start(
            &process::Invocation {
                argv: &program.command,
                cwd: dir.path(),
                env,
                timeout: program.timeout,
                grace: bounds.grace,
                log_bytes: bounds.log_bytes,
            },
            OwnedFd::from(requests_r),
            Some(OwnedFd::from(answers_w)),
        )?;
        Ok(Worker {
            key,
            started,
            requests: Some(requests),
            answers,
            pending: Vec::new(),
            _dir: dir,
        })
    }

    /// Hands the worker one request and waits for its answer under the program's timeout.
    /// `Ok`: the instance's log. `Err((error, broken))`: the instance failed; when
    /// `broken`, the worker is unusable (exited, timed out, broke the protocol).
    fn serve(
        &mut self,
        request: &str,
        program: &Program,
        bounds: &Bounds,
    ) -> Result<Log, (ProgramError, bool)> {
        let command = process::command_text(&program.command);
        let mut log = Log::new(bounds.log_bytes);
        let start = Instant::now();
        let sent = self
            .requests
            .as_mut()
            .map(|w| w.write_all(request.as_bytes()).and_then(|()| w.flush()));
        if !matches!(sent, Some(Ok(()))) {
            // It closed its stdin: it has exited, or is about to.
            return Err((self.ended(&command, &mut log, bounds), true));
        }
        let deadline = start.checked_add(program.timeout);
        loop {
            self.started.pump(&mut log);
            match self.read_answer() {
                Ok(Some(line)) => {
                    return answer(&line, &command, &log)
                        .map(|()| log)
                        .map_err(|e| (e, false));
                }
                Ok(None) => {}
                Err(broken) => {
                    let e = match broken {
                        Some(why) => ProgramError::Worker {
                            command,
                            problem: why,
                            tail: log.tail(process::TAIL_LINES),
                        },
                        None => self.ended(&command, &mut log, bounds),
                    };
                    return Err((e, true));
                }
            }
            if self.started.exited() {
                // Whatever it answered before exiting is read first.
                if let Ok(Some(line)) = self.read_answer() {
                    return answer(&line, &command, &log)
                        .map(|()| log)
                        .map_err(|e| (e, true));
                }
                return Err((self.ended(&command, &mut log, bounds), true));
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                self.started.stop(bounds.grace, &mut log);
                return Err((
                    ProgramError::Timeout {
                        command,
                        seconds: program.timeout.as_secs_f64(),
                        tail: log.tail(process::TAIL_LINES),
                    },
                    true,
                ));
            }
            let left = deadline.map_or(Duration::from_secs(3600), |d| d - now);
            self.started.wait(
                &[self.answers.as_raw_fd()],
                left.min(Duration::from_secs(1)),
            );
        }
    }

    /// A whole answer line when there is one. `Err(None)`: the answers pipe ended (the worker
    /// exited); `Err(Some(why))`: it broke the protocol.
    fn read_answer(&mut self) -> Result<Option<String>, Option<String>> {
        let mut buf = [0u8; 4096];
        loop {
            if let Some(nl) = self.pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=nl).collect();
                return String::from_utf8(line)
                    .map(|l| Some(l.trim_end().to_string()))
                    .map_err(|_| Some("its answer is not UTF-8".into()));
            }
            if self.pending.len() > MAX_ANSWER {
                return Err(Some(format!(
                    "its answer runs past {MAX_ANSWER} bytes without a newline"
                )));
            }
            match self.answers.read(&mut buf) {
                Ok(0) => return Err(None),
                Ok(n) => self.pending.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(None),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Some(format!("reading its answer: {e}"))),
            }
        }
    }

    /// The error of a worker that exited while serving: its exit status and log.
    fn ended(&mut self, command: &str, log: &mut Log, bounds: &Bounds) -> ProgramError {
        self.requests = None;
        self.started.stop(bounds.grace, log);
        ProgramError::Worker {
            command: command.to_string(),
            problem: match self.started.status() {
                Some(s) => format!("it exited ({s}) before answering"),
                None => "it stopped answering".into(),
            },
            tail: log.tail(process::TAIL_LINES),
        }
    }
}

/// An answer line: `{"ok": true}`, or the instance's failure.
fn answer(line: &str, command: &str, log: &Log) -> Result<(), ProgramError> {
    #[derive(serde::Deserialize)]
    struct Answer {
        ok: bool,
        #[serde(default)]
        error: Option<String>,
    }
    let tail = log.tail(process::TAIL_LINES);
    match serde_json::from_str::<Answer>(line) {
        Ok(Answer { ok: true, .. }) => Ok(()),
        Ok(Answer { error, .. }) => Err(ProgramError::Served {
            command: command.to_string(),
            error: error.unwrap_or_else(|| "no reason given".into()),
            tail,
        }),
        Err(e) => Err(ProgramError::Worker {
            command: command.to_string(),
            problem: format!(
                "its answer {:?} is not worker protocol {WORKER_PROTOCOL} ({e})",
                crate::text::brief(line, 200)
            ),
            tail,
        }),
    }
}
