//! Running one program: an argv (never a shell), in its working directory, with a minimal
//! environment, stdin from `/dev/null`, stdout and stderr captured together into a bounded
//! log, contained ([`super::contain`]: a PID namespace of its own where the system allows
//! it), under a timeout; and nothing left behind.
//!
//! The process dplab starts leads a process group of its own, which dplab signals: with
//! SIGKILL after the program exits, with SIGTERM and then SIGKILL when the timeout passes,
//! and with SIGKILL when dplab unwinds while it runs ([`Running`]'s `Drop`) or is told to
//! stop ([`kill_running`]). The group is always signalled while its leader is still unreaped,
//! so its id cannot have been reused by an unrelated group. What leaves the group (`setsid`,
//! a daemon) is ended by the containment: with the program's PID namespace, or, in the
//! fallback, when it is orphaned into dplab, a child subreaper (Linux), which also reaps
//! orphans where PID 1 reaps nothing (a container's init). The leader gets
//! `PR_SET_PDEATHSIG`, so a `kill -9` of dplab ends it, and with it the namespace.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::io::{self, PipeReader, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::error::ProgramError;

/// The last bytes a program wrote to stdout and stderr, interleaved as it wrote them.
#[derive(Debug, Default)]
pub(crate) struct Log {
    buf: VecDeque<u8>,
    cap: usize,
    dropped: u64,
}

impl Log {
    pub(crate) fn new(cap: usize) -> Log {
        Log {
            buf: VecDeque::with_capacity(cap.min(64 << 10)),
            cap,
            dropped: 0,
        }
    }

    fn push(&mut self, data: &[u8]) {
        self.buf.extend(data);
        if self.buf.len() > self.cap {
            let extra = self.buf.len() - self.cap;
            self.buf.drain(..extra);
            self.dropped += extra as u64;
        }
    }

    /// The bytes kept (the last `log_bytes` of them).
    pub fn bytes(&self) -> Vec<u8> {
        self.buf.iter().copied().collect()
    }

    /// How many earlier bytes were dropped to keep the log bounded (what the tests hold the
    /// bound to).
    #[cfg(test)]
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Its last `n` lines, as text (invalid UTF-8 replaced).
    pub fn tail(&self, n: usize) -> String {
        let bytes = self.bytes();
        let text = String::from_utf8_lossy(&bytes);
        let text = text.trim_end_matches('\n');
        let lines: Vec<&str> = text.split('\n').collect();
        let start = lines.len().saturating_sub(n);
        let mut out = lines[start..].join("\n");
        if start > 0 || self.dropped > 0 {
            out.insert_str(0, "…\n");
        }
        out
    }
}

/// Lines of output a failure message quotes.
pub(crate) const TAIL_LINES: usize = 20;

/// What [`run`] needs to start a program.
pub(crate) struct Invocation<'a> {
    pub argv: &'a [String],
    pub cwd: &'a Path,
    /// The whole environment of the program ([`environment`]).
    pub env: Vec<(OsString, OsString)>,
    pub timeout: Duration,
    /// Between SIGTERM and SIGKILL when the timeout passes.
    pub grace: Duration,
    pub log_bytes: usize,
}

/// Environment variables that dplab sets itself and a `pass_env` list may not name.
pub(crate) const SET_BY_DPLAB: &[&str] = &[
    "TMPDIR",
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
];

/// Checks a name of a `pass_env` list: a variable name that dplab does not set itself.
/// (`PATH`, `HOME` and `LANG` are passed anyway; `PYTHONPATH` is passed after the helper's
/// directory.)
pub(crate) fn check_pass_env(name: &str) -> Result<(), String> {
    if name.is_empty() || name.contains(['=', '\0']) {
        return Err(format!(
            "{name:?} is not an environment variable name (no `=`, not empty)"
        ));
    }
    if name.starts_with("DPLAB_") || SET_BY_DPLAB.contains(&name) {
        return Err(format!(
            "`{name}` is set by dplab for every external program and cannot be passed through"
        ));
    }
    Ok(())
}

/// The program's whole environment: `PATH`, `HOME` and `LANG` as dplab has them (`PATH`
/// `/usr/local/bin:/usr/bin:/bin` and `LANG` `C.UTF-8` when unset), `TMPDIR` = its working
/// directory, `DPLAB_JSON` = the description, `DPLAB_THREADS` and the thread counts of
/// OpenMP, OpenBLAS and MKL = `threads`, `PYTHONPATH` led by `helper_dir` (where
/// `dplab_external.py` is), and the variables `pass_env` names that dplab's own environment
/// has. Nothing else is inherited.
pub(crate) fn environment(
    work: &Path,
    json: &Path,
    helper_dir: &Path,
    threads: u32,
    pass_env: &[String],
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = Vec::new();
    let mut set = |k: &str, v: OsString| {
        env.retain(|(name, _)| name != k);
        env.push((k.into(), v));
    };
    set(
        "PATH",
        std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into()),
    );
    if let Some(home) = std::env::var_os("HOME") {
        set("HOME", home);
    }
    set(
        "LANG",
        std::env::var_os("LANG").unwrap_or_else(|| "C.UTF-8".into()),
    );
    for name in pass_env {
        if check_pass_env(name).is_ok() {
            if let Some(v) = std::env::var_os(name) {
                set(name, v);
            }
        }
    }
    let mut pythonpath = helper_dir.as_os_str().to_owned();
    if let Some(user) = pass_env
        .iter()
        .find(|n| *n == "PYTHONPATH")
        .and_then(std::env::var_os)
    {
        pythonpath.push(":");
        pythonpath.push(user);
    }
    set("PYTHONPATH", pythonpath);
    set("TMPDIR", work.into());
    set("DPLAB_JSON", json.into());
    let n = OsString::from(threads.to_string());
    for k in [
        "DPLAB_THREADS",
        "OMP_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "MKL_NUM_THREADS",
    ] {
        set(k, n.clone());
    }
    env
}

/// The program a bare name runs: the first executable regular file of that name in an
/// absolute directory of dplab's `PATH` (which the program's environment keeps).
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|d| d.is_absolute())
        .map(|d| d.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                && access_x(p)
        })
}

/// The program file `argv[0]` names, found as `execvp` would find it but in the absolute
/// entries of the program's `PATH` only (a relative entry — empty, `.`, `..` — would be
/// searched in the instance's directory or the shared temporary directory above it); a
/// path (a `code:` file) against the working directory, where its copy is. So that "not
/// found" and "not executable" are told apart and said clearly instead of as an errno.
fn resolve(program: &str, path_var: Option<&OsStr>, cwd: &Path) -> Result<PathBuf, ProgramError> {
    let not_executable = |p: &Path, reason: &str| ProgramError::NotExecutable {
        program: program.into(),
        reason: format!("{} {reason}", p.display()),
    };
    let check = |p: &Path| -> Result<(), ProgramError> {
        let meta = std::fs::metadata(p).map_err(|_| not_found(program, None))?;
        if meta.is_dir() {
            return Err(not_executable(p, "is a directory"));
        }
        if !meta.is_file() {
            return Err(not_executable(p, "is not a regular file"));
        }
        if meta.permissions().mode() & 0o111 == 0 || !access_x(p) {
            return Err(not_executable(
                p,
                &format!(
                    "has no execute permission: `chmod +x` it, or name its interpreter first (command: [python3, {program}])"
                ),
            ));
        }
        Ok(())
    };
    if program.is_empty() {
        return Err(not_found(program, None));
    }
    if program.contains('/') {
        let p = cwd.join(program);
        check(&p)?;
        return Ok(p);
    }
    let path_var = path_var.unwrap_or_default();
    let mut first_error = None;
    for dir in std::env::split_paths(path_var).filter(|d| d.is_absolute()) {
        let p = dir.join(program);
        if std::fs::symlink_metadata(&p).is_err() {
            continue;
        }
        match check(&p) {
            Ok(()) => return Ok(p),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    Err(first_error
        .unwrap_or_else(|| not_found(program, Some(path_var.to_string_lossy().into_owned()))))
}

fn not_found(program: &str, path: Option<String>) -> ProgramError {
    ProgramError::NotFound {
        program: program.into(),
        path,
    }
}

/// Whether this process may execute `p` (permission bits are not the whole story: ACLs, a
/// `noexec` mount).
fn access_x(p: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(p.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a valid NUL-terminated path.
    unsafe { libc::access(c.as_ptr(), libc::X_OK) == 0 }
}

/// Process groups of programs running now, so that [`kill_running`] can end them.
static LIVE: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// Set by [`stop_programs`], read under [`LIVE`]'s lock: once dplab is stopping, no program
/// starts (a worker may be about to spawn one when Ctrl-C arrives).
static STOPPING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// dplab is stopping (Ctrl-C, SIGTERM, SIGHUP): no program starts from now on, and every
/// running one is killed with its group (and so its namespace, see [`super::contain`]), and
/// every working directory is removed. The programs run in process groups of their own,
/// which a terminal's Ctrl-C does not reach: without this they would outlive the run, and
/// their directories stay behind.
pub fn stop_programs() {
    let live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    STOPPING.store(true, std::sync::atomic::Ordering::SeqCst);
    drop(live);
    kill_running();
    if super::contain::containment() == super::contain::Containment::Group {
        super::contain::kill_escaped(&[]);
    }
    super::protocol::remove_live();
}

/// Whether [`stop_programs`] was called: dplab is ending of a signal.
pub fn stopping() -> bool {
    STOPPING.load(std::sync::atomic::Ordering::SeqCst)
}

/// Kills (SIGKILL) the process group of every program this process is running. For the
/// engine's interrupt handling (Ctrl-C, SIGTERM): call it from an ordinary thread, not from
/// inside a signal handler (it takes a lock). Each `run` then returns an error.
pub(crate) fn kill_running() {
    let live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    for &pgid in live.iter() {
        // SAFETY: signalling a process group whose leader is unreaped (it is deregistered
        // before it is reaped), so the id is still this group's.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
    }
}

/// Makes this process a child subreaper once (Linux), so that the orphans of a program's
/// group are reparented here and reaped by [`reap_group`]. Whether it worked.
fn subreaper() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        #[cfg(target_os = "linux")]
        {
            // SAFETY: a plain prctl on this process.
            unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0 }
        }
        #[cfg(not(target_os = "linux"))]
        {
            false
        }
    })
}

/// A started program: its process group is killed and it is reaped when this is dropped
/// (on an error or a panic in dplab while it runs), unless [`Running::finish`] did so.
pub(crate) struct Running {
    child: Child,
    pgid: i32,
    reaped: bool,
    pidfd: Option<OwnedFd>,
}

impl Running {
    /// Starts `cmd` (already given its process group, stdio and environment) and registers
    /// its group in [`LIVE`]. `keep`: a descriptor the program gets under the same number
    /// (a worker's answers, see [`start`]).
    fn spawn(cmd: &mut Command, keep: Option<std::os::fd::RawFd>) -> io::Result<Running> {
        subreaper();
        let parent = std::process::id() as libc::pid_t;
        let prepared = super::contain::Prepared::new(super::contain::containment());
        // SAFETY: only async-signal-safe calls (prctl, getppid, and those of
        // `contain::child`) between fork and exec.
        #[cfg(target_os = "linux")]
        unsafe {
            cmd.pre_exec(move || {
                // A `kill -9` of dplab ends the process it started, and with it the program's
                // namespace (see `contain`).
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
                if libc::getppid() != parent {
                    return Err(io::Error::from_raw_os_error(libc::ESRCH));
                }
                if let Some(fd) = keep {
                    let flags = libc::fcntl(fd, libc::F_GETFD);
                    if flags < 0 || libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0 {
                        return Err(io::Error::last_os_error());
                    }
                }
                super::contain::child(&prepared)
            });
        }
        // Registered under the lock so that `kill_running` never misses a started program.
        let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        if STOPPING.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(io::Error::new(
                io::ErrorKind::Interrupted,
                "dplab is stopping: no program starts",
            ));
        }
        let child = cmd.spawn()?;
        let pgid = child.id() as i32;
        live.push(pgid);
        drop(live);
        Ok(Running {
            pidfd: pidfd_open(pgid),
            child,
            pgid,
            reaped: false,
        })
    }

    /// Whether the program has exited (it stays unreaped, so its group id stays its own).
    fn exited(&self) -> bool {
        // SAFETY: `waitid` with WNOWAIT only reads the state of our own child.
        unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let r = libc::waitid(
                libc::P_PID,
                self.pgid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            );
            r == 0 && info.si_pid() != 0
        }
    }

    fn signal(&self, sig: libc::c_int) {
        if !self.reaped {
            // SAFETY: the leader is unreaped, so `pgid` is still this program's group.
            unsafe { libc::kill(-self.pgid, sig) };
        }
    }

    /// Kills what is left of the group, reaps the program and then the group's orphans.
    fn finish(&mut self) -> io::Result<ExitStatus> {
        self.signal(libc::SIGKILL);
        LIVE.lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|&g| g != self.pgid);
        let status = self.child.wait();
        self.reaped = true;
        reap_group(self.pgid);
        if super::contain::containment() == super::contain::Containment::Group {
            let live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
            super::contain::kill_escaped(&live);
        }
        status
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if !self.reaped {
            let _ = self.finish();
        }
    }
}

/// Reaps the members of a killed group that were reparented to this process, until the
/// group is empty (bounded: a member whose parent is not this process cannot be waited for).
fn reap_group(pgid: i32) {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        loop {
            let mut status = 0;
            // SAFETY: reaping only children in this group, never another caller's child.
            let r = unsafe { libc::waitpid(-pgid, &mut status, libc::WNOHANG) };
            if r <= 0 {
                break;
            }
        }
        // SAFETY: probing with signal 0 sends nothing.
        let gone = unsafe { libc::kill(-pgid, 0) } != 0;
        if gone || !subreaper() || Instant::now() >= deadline {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A descriptor that becomes readable when the process exits (Linux 5.3+), so that the wait
/// for a program is one `poll` on it and its output, with no polling interval.
fn pidfd_open(pid: i32) -> Option<OwnedFd> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: the raw syscall returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        // SAFETY: a fresh descriptor nobody else owns.
        (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) })
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = pid;
        None
    }
}

/// Reads what is available from the program's output without blocking; at its end, drops it.
fn pump(reader: &mut Option<PipeReader>, log: &mut Log) {
    let mut buf = [0u8; 16 << 10];
    while let Some(r) = reader.as_mut() {
        match r.read(&mut buf) {
            Ok(0) => *reader = None,
            Ok(n) => log.push(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(_) => *reader = None,
        }
    }
}

/// Waits until the output or the pid descriptor is ready, or `wait` passed (or 10 ms when
/// there is no pid descriptor to tell when the program exits).
fn wait_event(reader: Option<&PipeReader>, pidfd: Option<&OwnedFd>, wait: Duration) {
    let wait = if pidfd.is_some() {
        wait
    } else {
        wait.min(Duration::from_millis(10))
    };
    let ms = wait.as_millis().clamp(1, i32::MAX as u128) as i32;
    let mut fds: Vec<libc::pollfd> = [reader.map(|r| r.as_raw_fd()), pidfd.map(|p| p.as_raw_fd())]
        .into_iter()
        .flatten()
        .map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    if fds.is_empty() {
        std::thread::sleep(Duration::from_millis(ms as u64));
    } else {
        // SAFETY: `fds` is a valid array of its length; EINTR just returns early.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
    }
}

/// The command as a person would type it, for messages.
pub(crate) fn command_text(argv: &[String]) -> String {
    shlex::try_join(argv.iter().map(String::as_str)).unwrap_or_else(|_| argv.join(" "))
}

/// What a program left: its log.
pub(crate) struct Ran {
    pub log: Log,
}

/// Runs a program to its end: `Ok` when it exited 0, else the error (with the tail of its
/// log). Its process group is gone and every member reaped when this returns or unwinds.
pub(crate) fn run(inv: &Invocation) -> Result<Ran, ProgramError> {
    let (mut running, reader) = launch(inv, Stdio::null(), None)?;
    let mut reader = Some(reader);
    let mut log = Log::new(inv.log_bytes);
    let start = Instant::now();
    let deadline = start.checked_add(inv.timeout);
    let timed_out = loop {
        pump(&mut reader, &mut log);
        if running.exited() {
            break false;
        }
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            break true;
        }
        let left = deadline.map_or(Duration::from_secs(3600), |d| d - now);
        wait_event(reader.as_ref(), running.pidfd.as_ref(), left);
    };
    if timed_out {
        running.signal(libc::SIGTERM);
        let grace_end = Instant::now() + inv.grace;
        while !running.exited() && Instant::now() < grace_end {
            pump(&mut reader, &mut log);
            wait_event(
                reader.as_ref(),
                running.pidfd.as_ref(),
                grace_end.saturating_duration_since(Instant::now()),
            );
        }
    }
    let status = running
        .finish()
        .map_err(|e| ProgramError::Setup(format!("waiting for the program: {e}")))?;
    // The group is dead, so the pipe ends unless a process that left the group holds it:
    // read what is left for at most a moment.
    let drain_end = Instant::now() + Duration::from_millis(100);
    while reader.is_some() && Instant::now() < drain_end {
        pump(&mut reader, &mut log);
        if reader.is_some() {
            wait_event(reader.as_ref(), None, drain_end - Instant::now());
        }
    }
    let command = command_text(inv.argv);
    let tail = log.tail(TAIL_LINES);
    if timed_out {
        return Err(ProgramError::Timeout {
            command,
            seconds: inv.timeout.as_secs_f64(),
            tail,
        });
    }
    match (status.code(), status.signal()) {
        (Some(0), _) => Ok(Ran { log }),
        (Some(code), _) => Err(ProgramError::Exit {
            command,
            code,
            tail,
        }),
        (None, signal) => Err(ProgramError::Signal {
            command,
            signal: signal.unwrap_or(0),
            tail,
        }),
    }
}

/// A program started to keep running ([`start`]): a worker ([`super::worker`]) that serves
/// instances over its stdin and an answer pipe. Its process group is killed and it is reaped
/// when this is dropped, like any program's.
pub(crate) struct Started {
    running: Running,
    output: Option<PipeReader>,
    status: Option<ExitStatus>,
}

impl Started {
    /// Moves what it printed so far into `log`.
    pub(crate) fn pump(&mut self, log: &mut Log) {
        pump(&mut self.output, log);
    }

    /// Whether it has exited.
    pub(crate) fn exited(&self) -> bool {
        self.running.reaped || self.running.exited()
    }

    /// Waits until one of `fds` is readable, it prints, or it exits; at most `wait`.
    pub(crate) fn wait(&self, fds: &[std::os::fd::RawFd], wait: Duration) {
        let ms = wait.as_millis().clamp(1, i32::MAX as u128) as i32;
        let mut polled: Vec<libc::pollfd> = fds
            .iter()
            .copied()
            .chain(self.output.as_ref().map(|r| r.as_raw_fd()))
            .chain(self.running.pidfd.as_ref().map(|p| p.as_raw_fd()))
            .map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // Without a pidfd, an exit is seen at the next look.
        let ms = if self.running.pidfd.is_some() {
            ms
        } else {
            ms.min(10)
        };
        // SAFETY: `polled` is a valid array of its length; EINTR just returns early.
        unsafe { libc::poll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, ms) };
    }

    /// Ends it: SIGTERM, up to `grace` for it to exit, SIGKILL of its group, reaped (what it
    /// printed meanwhile goes to `log`).
    pub(crate) fn stop(&mut self, grace: Duration, log: &mut Log) {
        if self.running.reaped {
            return;
        }
        self.running.signal(libc::SIGTERM);
        let end = Instant::now() + grace;
        while !self.running.exited() && Instant::now() < end {
            self.pump(log);
            wait_event(
                self.output.as_ref(),
                self.running.pidfd.as_ref(),
                end.saturating_duration_since(Instant::now()),
            );
        }
        self.status = self.running.finish().ok();
        self.pump(log);
    }

    /// How it ended, once [`Self::stop`] reaped it: `exit status 1`, `signal 9 (SIGKILL)`.
    pub(crate) fn status(&self) -> Option<String> {
        let s = self.status?;
        Some(match (s.code(), s.signal()) {
            (Some(c), _) => format!("exit status {c}"),
            (None, sig) => {
                let sig = sig.unwrap_or(0);
                format!("signal {sig} ({})", super::error::signal_name(sig))
            }
        })
    }
}

/// Starts a program that keeps running: its stdin is `stdin`, and `extra` is passed on
/// besides stdout and stderr, under the same number. See [`Started`].
pub(crate) fn start(
    inv: &Invocation,
    stdin: OwnedFd,
    extra: Option<OwnedFd>,
) -> Result<Started, ProgramError> {
    let (running, reader) = launch(inv, Stdio::from(stdin), extra)?;
    Ok(Started {
        running,
        output: Some(reader),
        status: None,
    })
}

/// Starts `inv`'s program with `stdin`, its stdout and stderr into one non-blocking pipe
/// (returned), and `keep` passed on under its own number; for [`run`] and [`start`].
fn launch(
    inv: &Invocation,
    stdin: Stdio,
    keep: Option<OwnedFd>,
) -> Result<(Running, PipeReader), ProgramError> {
    let Some(program) = inv.argv.first() else {
        return Err(not_found("", None));
    };
    let path_var = inv
        .env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_os_str());
    let file = resolve(program, path_var, inv.cwd)?;
    let (reader, writer) = std::io::pipe().map_err(|e| ProgramError::Setup(e.to_string()))?;
    let writer2 = writer
        .try_clone()
        .map_err(|e| ProgramError::Setup(e.to_string()))?;
    set_nonblocking(&reader).map_err(|e| ProgramError::Setup(e.to_string()))?;
    let mut cmd = Command::new(&file);
    cmd.arg0(program)
        .args(&inv.argv[1..])
        .current_dir(inv.cwd)
        .env_clear()
        .envs(inv.env.iter().map(|(k, v)| (k, v)))
        .stdin(stdin)
        .stdout(writer)
        .stderr(writer2)
        .process_group(0);
    let spawned = Running::spawn(&mut cmd, keep.as_ref().map(|fd| fd.as_raw_fd()));
    // dplab's copies of the pipes' program ends: without dropping them, neither the output
    // nor a worker's answers would ever end.
    drop(cmd);
    drop(keep);
    let running = spawned.map_err(|e| spawn_error(program, &file, e))?;
    Ok((running, reader))
}

pub(crate) fn set_nonblocking(reader: &PipeReader) -> io::Result<()> {
    let fd = reader.as_raw_fd();
    // SAFETY: reading and setting the flags of a descriptor we own.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// A failed `exec`, said as what the user can fix.
// The program file's first line, for its `#!` interpreter: only 256 bytes of it are read,
// and only for this message (a FIFO or a device there fails the `exec` before this).
#[expect(clippy::disallowed_methods)]
fn spawn_error(program: &str, file: &Path, e: io::Error) -> ProgramError {
    let mut head = Vec::new();
    let _ = std::fs::File::open(file).and_then(|f| f.take(256).read_to_end(&mut head));
    let interpreter = Some(head).filter(|b| b.starts_with(b"#!")).map(|b| {
        let line = b.split(|&c| c == b'\n').next().unwrap_or_default();
        String::from_utf8_lossy(&line[..line.len().min(200)]).into_owned()
    });
    match (e.raw_os_error(), interpreter) {
        (Some(libc::ENOENT), Some(line)) => ProgramError::NotExecutable {
            program: program.into(),
            reason: format!("its first line `{line}` names an interpreter that does not exist"),
        },
        (Some(libc::ENOENT), None) => not_found(program, None),
        (Some(libc::EACCES), _) => ProgramError::NotExecutable {
            program: program.into(),
            reason: format!("{}: permission denied", file.display()),
        },
        (Some(libc::ENOEXEC), _) => ProgramError::NotExecutable {
            program: program.into(),
            reason: format!(
                "{} is not a program the system can start (a script needs a first line such as `#!/bin/sh`)",
                file.display()
            ),
        },
        _ => ProgramError::NotExecutable {
            program: program.into(),
            reason: e.to_string(),
        },
    }
}

#[cfg(test)]
// Tests read the pid files their programs wrote.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    /// When dplab unwinds while a program runs (a panic in the thread that waits for it),
    /// `Running`'s `Drop` kills the program's group and reaps it: nothing is left.
    #[test]
    fn unwinding_kills_the_running_group() {
        let dir =
            std::env::temp_dir().join(format!("dplab-external-unwind-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (main, child) = (dir.join("main"), dir.join("child"));
        let script = format!(
            "{}hostpid > '{}'; (hostpid > '{}'; exec sleep 1000) & wait",
            super::super::tests::HOST_PID,
            main.display(),
            child.display()
        );
        let r = std::panic::catch_unwind(|| {
            let mut cmd = Command::new("sh");
            cmd.args(["-c", &script])
                .stdin(Stdio::null())
                .process_group(0);
            let _running = Running::spawn(&mut cmd, None).unwrap();
            let start = Instant::now();
            while std::fs::read_to_string(&child)
                .unwrap_or_default()
                .trim()
                .is_empty()
            {
                assert!(start.elapsed() < Duration::from_secs(20));
                std::thread::sleep(Duration::from_millis(10));
            }
            panic!("dplab fails while the program runs");
        });
        assert!(r.is_err());
        for f in [&main, &child] {
            let pid: i32 = std::fs::read_to_string(f).unwrap().trim().parse().unwrap();
            let end = Instant::now() + Duration::from_secs(1);
            // SAFETY: signal 0 only probes.
            while unsafe { libc::kill(pid, 0) } == 0 {
                assert!(Instant::now() < end, "process {pid} left after unwinding");
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
