//! Containment: every process a program starts ends with its instance, and with dplab, whatever
//! it does — a child in the background, a double fork, a daemon in a session of its own
//! (`setsid`), a new process group — including when dplab itself is killed with `kill -9`.
//!
//! # The choice
//!
//! A process group (what dplab signals) is left by one `setsid`; the child subreaper catches
//! what is reparented to dplab, but not across a `kill -9` of dplab, and it cannot tell whose
//! orphan it caught. What a process cannot leave is its **PID namespace**: when the first
//! process of a namespace (its init) dies, the kernel kills every other process in it. So each
//! program runs in a PID namespace of its own, created unprivileged through a user namespace
//! (mapping the user to itself: files, permissions and groups are as before) where the kernel
//! allows it, and directly when dplab runs as root. The chain per instance is:
//!
//! ```text
//! dplab ─ keeper (outside, the group leader dplab waits for)
//!           └─ init (PID 1 of the new namespace: reaps orphans, reports the program's status)
//!                └─ the program (the argv), and whatever it starts
//! ```
//!
//! Each link dies with the one above it: the keeper and the init by `PR_SET_PDEATHSIG`
//! (checked after it is set, so a parent that died before cannot be missed), the program and
//! everything it started with the init, by the kernel. A `kill -9` of dplab therefore ends
//! the keeper, the init, and so the whole namespace. When the program ends, its init ends with
//! it and takes the rest along; the keeper then ends the way the program ended (its exit
//! status, or its signal), so dplab reports the program as before. The program itself is not
//! init: a program that signals itself (`kill -9 $$`, `abort()`) dies of it, as it would
//! outside. It sees itself as PID 2 and its parent as PID 1.
//!
//! A cgroup v2 per instance (`cgroup.kill`) would contain as well, but only where a writable
//! delegated subtree exists (not on this project's machines, whose cgroup v2 hierarchy is not
//! delegated to users), and a `kill -9` of dplab would leave the cgroup's processes running
//! until someone removed it; the namespace needs no such cleanup, so it is the one used.
//!
//! Where neither namespace can be made (a kernel or a sandbox that forbids user namespaces),
//! the fallback is the **process group with the child subreaper**: the group is killed, and
//! processes that left it are reparented to dplab when their parent dies and killed then
//! (at the end of the instance during which they were orphaned, or of another one running at
//! that moment). A `kill -9` of dplab is not contained then: its programs' grandchildren run
//! on. dplab says so once per run that runs programs.
//!
//! Not contained in any case ("Isolation" in docs/src/mechanism.md): what a program reads or writes with
//! the user's rights (other files, the network, `/proc` of the user's other processes), which
//! is why running programs needs the user's consent.
//!
//! `DPLAB_CONTAIN=user|pid|group` forces one of the three (for tests, and to compare their
//! costs); a forced one that is not available fails each program with the reason.

use std::io;
use std::sync::OnceLock;

/// How programs are contained in this process (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Containment {
    /// A PID namespace per program, made through a user namespace (unprivileged).
    UserPidNamespace,
    /// A PID namespace per program, made directly (dplab runs as root).
    PidNamespace,
    /// The process group and the child subreaper: the weakest.
    Group,
}

impl Containment {
    /// One line for `--dry-run`, `validate` and `-v`.
    pub fn describe(self) -> &'static str {
        match self {
            Containment::UserPidNamespace => "each program in a PID namespace of its own (through an unprivileged user namespace): everything it starts ends with it, and with dplab, also on `kill -9` of dplab",
            Containment::PidNamespace => "each program in a PID namespace of its own: everything it starts ends with it, and with dplab, also on `kill -9` of dplab",
            Containment::Group => "only the weakest containment is available here (this kernel or sandbox allows no PID namespace): each program in a process group of its own, and what leaves the group is killed when it is orphaned; a `kill -9` of dplab leaves its programs' children running",
        }
    }

    fn namespace_flags(self) -> Option<libc::c_int> {
        match self {
            Containment::UserPidNamespace => Some(libc::CLONE_NEWUSER | libc::CLONE_NEWPID),
            Containment::PidNamespace => Some(libc::CLONE_NEWPID),
            Containment::Group => None,
        }
    }
}

/// The containment in force, found once per process: the strongest that works here, or the
/// one `DPLAB_CONTAIN` forces.
pub fn containment() -> Containment {
    static FOUND: OnceLock<Containment> = OnceLock::new();
    *FOUND.get_or_init(|| {
        let forced = std::env::var("DPLAB_CONTAIN").ok();
        match forced.as_deref() {
            Some("user") => return Containment::UserPidNamespace,
            Some("pid") => return Containment::PidNamespace,
            Some("group") => return Containment::Group,
            Some(other) => {
                tracing::warn!("DPLAB_CONTAIN={other:?} is not one of user, pid, group: ignored")
            }
            None => {}
        }
        // SAFETY: geteuid cannot fail.
        let root = unsafe { libc::geteuid() } == 0;
        let order: &[Containment] = if root {
            &[Containment::PidNamespace, Containment::UserPidNamespace]
        } else {
            &[Containment::UserPidNamespace]
        };
        order
            .iter()
            .copied()
            .find(|&c| works(c))
            .unwrap_or(Containment::Group)
    })
}

/// Says once per process, as a warning, when only the weakest containment is available.
pub fn warn_if_weak() {
    static SAID: std::sync::Once = std::sync::Once::new();
    if containment() == Containment::Group {
        SAID.call_once(|| tracing::warn!("{}", Containment::Group.describe()));
    }
}

/// What the child side needs, prepared before the fork (nothing may be allocated after it).
pub(crate) struct Prepared {
    flags: Option<libc::c_int>,
    user: bool,
    uid_map: [u8; 48],
    uid_len: usize,
    gid_map: [u8; 48],
    gid_len: usize,
}

impl Prepared {
    pub(crate) fn new(c: Containment) -> Prepared {
        // SAFETY: getuid and getgid cannot fail.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let mut p = Prepared {
            flags: c.namespace_flags(),
            user: c == Containment::UserPidNamespace,
            uid_map: [0; 48],
            uid_len: 0,
            gid_map: [0; 48],
            gid_len: 0,
        };
        p.uid_len = fill(&mut p.uid_map, &format!("{uid} {uid} 1\n"));
        p.gid_len = fill(&mut p.gid_map, &format!("{gid} {gid} 1\n"));
        p
    }
}

fn fill(buf: &mut [u8; 48], s: &str) -> usize {
    let n = s.len().min(buf.len());
    buf[..n].copy_from_slice(&s.as_bytes()[..n]);
    n
}

/// Whether `c` can be set up here: a child tries it (namespaces and a process inside them)
/// and reports.
fn works(c: Containment) -> bool {
    let prepared = Prepared::new(c);
    // SAFETY: the child calls only async-signal-safe functions and ends with `_exit`.
    unsafe {
        let pid = libc::fork();
        if pid == 0 {
            let ok = enter(&prepared).is_ok() && {
                let inner = libc::fork();
                if inner == 0 {
                    libc::_exit(0);
                }
                inner > 0 && wait_for(inner).is_some_and(|s| libc::WIFEXITED(s))
            };
            libc::_exit(if ok { 0 } else { 1 });
        }
        if pid < 0 {
            return false;
        }
        wait_for(pid).is_some_and(|s| libc::WIFEXITED(s) && libc::WEXITSTATUS(s) == 0)
    }
}

/// `waitpid` until it reports `pid` (or fails other than by an interrupt): its status.
///
/// # Safety
/// Async-signal-safe: for use between fork and exec.
unsafe fn wait_for(pid: libc::pid_t) -> Option<libc::c_int> {
    loop {
        let mut status = 0;
        let r = libc::waitpid(pid, &mut status, 0);
        if r == pid {
            return Some(status);
        }
        if r < 0 && *libc::__errno_location() != libc::EINTR {
            return None;
        }
    }
}

/// Makes the namespaces (and the user mapping) for the calling process's children.
///
/// # Safety
/// Async-signal-safe: for use between fork and exec.
unsafe fn enter(p: &Prepared) -> io::Result<()> {
    let Some(flags) = p.flags else {
        return Ok(());
    };
    if libc::unshare(flags) != 0 {
        return Err(io::Error::last_os_error());
    }
    if p.user {
        write_file(c"/proc/self/setgroups", b"deny")?;
        write_file(c"/proc/self/gid_map", &p.gid_map[..p.gid_len])?;
        write_file(c"/proc/self/uid_map", &p.uid_map[..p.uid_len])?;
    }
    Ok(())
}

/// # Safety
/// Async-signal-safe: for use between fork and exec.
unsafe fn write_file(path: &std::ffi::CStr, bytes: &[u8]) -> io::Result<()> {
    let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let n = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
    let err = io::Error::last_os_error();
    libc::close(fd);
    if n != bytes.len() as isize {
        return Err(err);
    }
    Ok(())
}

/// Closes every descriptor from 3 up but `keep` (sorted): a process that never executes
/// would otherwise hold the spawning side's descriptors (the pipe on which the standard
/// library learns whether the program started, which it reads to its end).
///
/// # Safety
/// Async-signal-safe: for use between fork and exec.
unsafe fn close_all_but(keep: &[libc::c_int]) {
    let mut from: libc::c_uint = 3;
    for &k in keep {
        let k = k as libc::c_uint;
        if k > from {
            close_range(from, k - 1);
        }
        from = from.max(k + 1);
    }
    close_range(from, libc::c_uint::MAX);
}

/// # Safety
/// Async-signal-safe.
unsafe fn close_range(first: libc::c_uint, last: libc::c_uint) {
    if libc::syscall(libc::SYS_close_range, first, last, 0) == 0 {
        return;
    }
    // Before Linux 5.9: one by one, up to the descriptor limit.
    let mut lim: libc::rlimit = std::mem::zeroed();
    let max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
        lim.rlim_cur.min(1 << 20) as libc::c_uint
    } else {
        1024
    };
    let mut fd = first;
    while fd <= last && fd < max {
        libc::close(fd as libc::c_int);
        fd += 1;
    }
}

/// The child side, run between fork and exec in the process dplab started (the keeper; see
/// the module doc). Returns in the process that is to become the program (which then
/// executes it); the keeper and the init never return.
///
/// # Safety
/// Async-signal-safe: call only from a `pre_exec` closure.
pub(crate) unsafe fn child(p: &Prepared) -> io::Result<()> {
    if p.flags.is_none() {
        return Ok(());
    }
    enter(p)?;
    // init → keeper: the program's wait status (4 bytes); keeper → init: nothing, but its
    // end closes when the keeper dies, which the init checks once it has its death signal.
    let mut status = [0 as libc::c_int; 2];
    let mut alive = [0 as libc::c_int; 2];
    if libc::pipe2(status.as_mut_ptr(), libc::O_CLOEXEC) != 0
        || libc::pipe2(alive.as_mut_ptr(), libc::O_CLOEXEC) != 0
    {
        return Err(io::Error::last_os_error());
    }
    match libc::fork() {
        -1 => Err(io::Error::last_os_error()),
        0 => init(status[1], alive[0]),
        init_pid => keeper(init_pid, status[0], alive[1]),
    }
}

/// PID 1 of the namespace: starts the program (returns in it), reaps every orphan until the
/// program ends, hands its status to the keeper and ends, which ends the namespace.
unsafe fn init(status_w: libc::c_int, alive_r: libc::c_int) -> io::Result<()> {
    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
        libc::_exit(126);
    }
    // The keeper may have died before the death signal was set: its end is then closed.
    let mut fd = libc::pollfd {
        fd: alive_r,
        events: libc::POLLIN,
        revents: 0,
    };
    if libc::poll(&mut fd, 1, 0) != 0 {
        libc::_exit(126);
    }
    let program = libc::fork();
    if program == 0 {
        // The program: the descriptors above are close-on-exec.
        return Ok(());
    }
    close_all_but(&[status_w]);
    if program < 0 {
        libc::_exit(126);
    }
    let st = loop {
        let mut st = 0;
        let r = libc::waitpid(-1, &mut st, 0);
        if r == program {
            break st;
        }
        if r < 0 && *libc::__errno_location() != libc::EINTR {
            libc::_exit(126);
        }
    };
    libc::write(
        status_w,
        (&st as *const libc::c_int).cast(),
        size_of::<libc::c_int>(),
    );
    libc::_exit(0)
}

/// Outside the namespace, the process dplab started and waits for: ends the way the program
/// ended.
unsafe fn keeper(init_pid: libc::pid_t, status_r: libc::c_int, alive_w: libc::c_int) -> ! {
    close_all_but(&[status_r.min(alive_w), status_r.max(alive_w)]);
    // Signals to the group (a timeout's SIGTERM) are for the program: the keeper stays to
    // report how it ended. SIGKILL still ends it, and with it the namespace.
    for sig in [
        libc::SIGINT,
        libc::SIGTERM,
        libc::SIGHUP,
        libc::SIGQUIT,
        libc::SIGPIPE,
    ] {
        libc::signal(sig, libc::SIG_IGN);
    }
    let _ = wait_for(init_pid);
    let mut st: libc::c_int = 0;
    let n = loop {
        let n = libc::read(
            status_r,
            (&mut st as *mut libc::c_int).cast(),
            size_of::<libc::c_int>(),
        );
        if n >= 0 || *libc::__errno_location() != libc::EINTR {
            break n;
        }
    };
    if n != size_of::<libc::c_int>() as isize {
        // The init was killed before it could say: the program was killed with it.
        st = libc::SIGKILL;
    }
    if libc::WIFEXITED(st) {
        libc::_exit(libc::WEXITSTATUS(st));
    }
    let sig = libc::WTERMSIG(st);
    // Die of the same signal, without a core file of the keeper.
    let no_core = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    libc::setrlimit(libc::RLIMIT_CORE, &no_core);
    libc::signal(sig, libc::SIG_DFL);
    let mut set: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut set);
    libc::sigaddset(&mut set, sig);
    libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    libc::kill(libc::getpid(), sig);
    libc::_exit(128 + sig)
}

/// In the fallback ([`Containment::Group`]): kills and reaps this process's children that
/// left their program's group and were orphaned into this subreaper — processes whose parent
/// is dplab but which are in none of dplab's own group and `live` groups (the programs
/// running now, whose leaders are children of dplab too). Call with the lock of `live` held,
/// so that no program is being started meanwhile.
///
/// A killed escapee's own children are orphaned into dplab in turn: the search repeats until
/// it finds none (a tree of escapees is killed level by level).
pub(crate) fn kill_escaped(live: &[i32]) {
    for _ in 0..64 {
        if !kill_escaped_once(live) {
            return;
        }
    }
}

/// One pass of [`kill_escaped`]: whether it killed any.
// The kernel's process table (`/proc/<pid>/stat`), not a path a user named.
#[expect(clippy::disallowed_methods)]
fn kill_escaped_once(live: &[i32]) -> bool {
    // SAFETY: getpid and getpgrp cannot fail.
    let (me, my_group) = unsafe { (libc::getpid(), libc::getpgrp()) };
    let mut killed = false;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        // `/proc/<pid>/stat`: pid (comm) state ppid pgrp …; comm may hold spaces and `)`.
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let mut f = rest.split_whitespace().skip(1);
        let (Some(Ok(ppid)), Some(Ok(pgrp))) = (
            f.next().map(str::parse::<i32>),
            f.next().map(str::parse::<i32>),
        ) else {
            continue;
        };
        if ppid == me && pgrp != my_group && !live.contains(&pgrp) {
            // SAFETY: `pid` is our child and unreaped (we reap only here and in the
            // runner), so the id is still its own.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                let mut st = 0;
                libc::waitpid(pid, &mut st, 0);
            }
            killed = true;
        }
    }
    killed
}
