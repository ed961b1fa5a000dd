//! Claims: a shard about to compute an instance other shards need too (a dataset, a solve
//! every repetition reads) says so in the store, so the others wait for its result instead
//! of computing it again at the same time. Without them, 4 shards started together each
//! computed h14-fig3.1's 100-second root solve, and two shards took 5× longer than the rest.
//!
//! A claim is a file `claims/<key>` created with `O_EXCL` (atomic on local file systems and
//! on NFS v3+), holding the claimer's host and PID. Nothing waits on a claim forever:
//! - its holder touches it every [`HEARTBEAT`]; a claim whose modification time has not
//!   changed for [`STALE`] (on the waiter's own clock, so clocks of different nodes need
//!   not agree) is broken: its holder was killed or lost its node;
//! - a claim from this host whose process is gone is broken at once (a cancelled shard
//!   resubmitted on the same node does not wait a minute).
//!
//! Claims only save work: two shards that both compute an instance (a claim broken while its
//! holder still ran) store byte-identical entries and the store keeps one.
//!
//! The pipelines of one command run at once (one scheduler for the run, see `exec`), and two
//! of them often need the same instance (a dataset, the true answers fig3.1 and table 3.2
//! share). Within one process a claim is a key in memory ([`Claims::claim_here`]): no file,
//! and what its holder stores, even in a pack, is seen by the waiter's next look at once.

use std::collections::HashMap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use super::key::Key;

/// How often a holder touches its claims.
pub(crate) const HEARTBEAT: Duration = Duration::from_secs(10);
/// A claim untouched this long is broken (six missed heartbeats: a busy NFS server can delay a
/// few).
pub(crate) const STALE: Duration = Duration::from_secs(60);

/// The claims of one store, and the ones this process holds.
pub struct Claims {
    dir: PathBuf,
    /// What this process writes in a claim: `host pid`.
    me: String,
    host: String,
    held: Mutex<HashMap<Key, PathBuf>>,
    /// Keys an instance of this process is computing now ([`Claims::claim_here`]).
    here: Mutex<std::collections::HashSet<Key>>,
    /// Other processes' claims as last seen: modification time, and when it was first seen
    /// with that time.
    seen: Mutex<HashMap<Key, (SystemTime, Instant)>>,
    last_beat: Mutex<Option<Instant>>,
}

/// The outcome of [`Claims::claim`].
pub enum Claimed<'a> {
    /// This process computes it; dropping the guard ends the claim (after storing).
    Mine(Claim<'a>),
    /// Another live process is computing it: wait, then look in the store.
    Theirs,
}

/// A claim this process holds, removed when dropped.
pub struct Claim<'a> {
    claims: &'a Claims,
    key: Key,
    /// `None` when the claim could not be written (a read-only or full store): the instance
    /// is computed without one, as before claims existed.
    path: Option<PathBuf>,
    /// A claim within this process only ([`Claims::claim_here`]).
    here: bool,
}

impl Claim<'_> {
    /// Whether other processes wait for this claim, and so look for the result in an entry
    /// file of its own rather than in this process's open pack.
    pub fn across_processes(&self) -> bool {
        !self.here
    }
}

impl Drop for Claim<'_> {
    // The claim file this process created (create_new) under the store's claims/.
    #[expect(clippy::disallowed_methods)]
    fn drop(&mut self) {
        if self.here {
            self.claims.lock_here().remove(&self.key);
            return;
        }
        let Some(path) = &self.path else { return };
        self.claims.lock_held().remove(&self.key);
        // Only our own: a waiter that broke it (thinking it stale) may have claimed it since.
        if fs::read_to_string(path).is_ok_and(|c| c == self.claims.me) {
            let _ = fs::remove_file(path);
        }
    }
}

impl Claims {
    pub fn new(store_root: &std::path::Path) -> Claims {
        let host = hostname();
        Claims {
            dir: store_root.join("claims"),
            me: format!("{host} {}", std::process::id()),
            host,
            held: Mutex::default(),
            here: Mutex::default(),
            seen: Mutex::default(),
            last_beat: Mutex::default(),
        }
    }

    fn lock_here(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<Key>> {
        self.here.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Claims `key` among the instances this process runs: `Theirs` while another of them
    /// (of another pipeline of the same command, or a twin in the same one) computes it.
    pub fn claim_here(&self, key: &Key) -> Claimed<'_> {
        if !self.lock_here().insert(*key) {
            return Claimed::Theirs;
        }
        Claimed::Mine(Claim {
            claims: self,
            key: *key,
            path: None,
            here: true,
        })
    }

    fn lock_held(&self) -> std::sync::MutexGuard<'_, HashMap<Key, PathBuf>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Claims `key`, or says another process holds it. A stale claim is broken and taken.
    // Creates (create_new) a claim file dplab names by key under the store's claims/.
    #[expect(clippy::disallowed_methods)]
    pub fn claim(&self, key: &Key) -> Claimed<'_> {
        let path = self.dir.join(key.to_string());
        for _ in 0..3 {
            let created = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
                .or_else(|e| {
                    if e.kind() != std::io::ErrorKind::NotFound {
                        return Err(e);
                    }
                    fs::create_dir_all(&self.dir)?;
                    fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .open(&path)
                });
            match created {
                Ok(mut f) => {
                    let path = f.write_all(self.me.as_bytes()).is_ok().then_some(path);
                    if let Some(p) = &path {
                        self.lock_held().insert(*key, p.clone());
                    }
                    return Claimed::Mine(Claim {
                        claims: self,
                        key: *key,
                        path,
                        here: false,
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    if !self.stale(key, &path) {
                        return Claimed::Theirs;
                    }
                    tracing::info!(
                        "breaking the stale claim {} (its holder is gone or stopped touching it)",
                        path.display()
                    );
                    let _ = fs::remove_file(&path);
                }
                Err(e) => {
                    tracing::debug!("cannot claim {}: {e}", path.display());
                    break;
                }
            }
        }
        Claimed::Mine(Claim {
            claims: self,
            key: *key,
            path: None,
            here: false,
        })
    }

    /// Whether the claim at `path` (not ours) is dead: from this host by a process that is
    /// gone, or untouched for [`STALE`].
    // A claim file under the store's claims/, written by a dplab process.
    #[expect(clippy::disallowed_methods)]
    fn stale(&self, key: &Key, path: &std::path::Path) -> bool {
        let Ok(modified) = fs::metadata(path).and_then(|m| m.modified()) else {
            // Gone meanwhile: its holder finished; try again.
            return true;
        };
        if let Ok(text) = fs::read_to_string(path) {
            if let Some((host, pid)) = text.split_once(' ') {
                if host == self.host && text != self.me && !alive(pid) {
                    return true;
                }
            }
        }
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        match seen.get(key) {
            Some(&(t, since)) if t == modified => now.duration_since(since) >= STALE,
            _ => {
                seen.insert(*key, (modified, now));
                false
            }
        }
    }

    /// Touches the claims this process holds, at most every [`HEARTBEAT`] (call it often).
    // Touches this process's own claim files (O_NOFOLLOW), under the store's claims/.
    #[expect(clippy::disallowed_methods)]
    pub fn heartbeat(&self) {
        {
            let mut last = self.last_beat.lock().unwrap_or_else(|e| e.into_inner());
            if last.is_some_and(|t| t.elapsed() < HEARTBEAT) {
                return;
            }
            *last = Some(Instant::now());
        }
        let paths: Vec<PathBuf> = self.lock_held().values().cloned().collect();
        for p in paths {
            // Not through a link: a claim replaced by one must not touch what it points to.
            if let Err(e) = fs::OpenOptions::new()
                .append(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&p)
                .and_then(|f| f.set_modified(SystemTime::now()))
            {
                tracing::debug!("cannot touch the claim {}: {e}", p.display());
            }
        }
    }
}

/// Whether process `pid` (text from a claim) exists on this host.
fn alive(pid: &str) -> bool {
    let Ok(pid) = pid.trim().parse::<libc::pid_t>() else {
        // Not a claim of ours: leave it to the modification-time rule.
        return true;
    };
    if pid <= 0 {
        return true;
    }
    // SAFETY: signal 0 only checks that the process exists and may be signalled.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; the name is NUL-terminated when it fits.
    let r = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if r != 0 {
        return "unknown-host".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    // A space would split `host pid` wrongly.
    String::from_utf8_lossy(&buf[..end]).replace(' ', "_")
}

#[cfg(test)]
// The tests read the claim files they made.
#[expect(clippy::disallowed_methods)]
mod tests {
    use super::*;

    fn key(b: u8) -> Key {
        Key([b; 32])
    }

    #[test]
    fn a_second_claimer_waits_and_the_claim_ends_with_its_guard() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (Claims::new(dir.path()), Claims::new(dir.path()));
        let Claimed::Mine(g) = a.claim(&key(1)) else {
            panic!("the first claim is taken")
        };
        assert!(g.path.is_some());
        // Same PID, so not "gone": b must wait.
        assert!(matches!(b.claim(&key(1)), Claimed::Theirs));
        assert!(matches!(b.claim(&key(2)), Claimed::Mine(_)));
        drop(g);
        assert!(!dir.path().join("claims").join(key(1).to_string()).exists());
        assert!(matches!(b.claim(&key(1)), Claimed::Mine(_)));
    }

    #[test]
    fn a_claim_of_a_dead_process_on_this_host_is_broken() {
        let dir = tempfile::tempdir().unwrap();
        let c = Claims::new(dir.path());
        fs::create_dir_all(dir.path().join("claims")).unwrap();
        let path = dir.path().join("claims").join(key(3).to_string());
        // PIDs above the kernel's pid_max (at most 2²²) never exist.
        fs::write(&path, format!("{} {}", c.host, 1 << 23)).unwrap();
        let Claimed::Mine(g) = c.claim(&key(3)) else {
            panic!("a dead process's claim is broken")
        };
        assert_eq!(fs::read_to_string(&path).unwrap(), c.me);
        drop(g);
        // Another host's claim is not judged by PID: it waits for the modification time.
        fs::write(&path, format!("elsewhere.example {}", 1 << 23)).unwrap();
        assert!(matches!(c.claim(&key(3)), Claimed::Theirs));
    }

    #[test]
    fn a_holder_touches_its_claims_so_waiters_see_them_alive() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (Claims::new(dir.path()), Claims::new(dir.path()));
        let Claimed::Mine(_g) = a.claim(&key(5)) else {
            panic!("the first claim is taken")
        };
        let path = dir.path().join("claims").join(key(5).to_string());
        let old = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        fs::File::options()
            .append(true)
            .open(&path)
            .unwrap()
            .set_modified(old)
            .unwrap();
        a.heartbeat();
        assert!(fs::metadata(&path).unwrap().modified().unwrap() > old);
        // A waiter that saw the claim long ago with another modification time starts over.
        let long_ago = Instant::now().checked_sub(STALE + Duration::from_secs(1));
        if let Some(t) = long_ago {
            b.seen.lock().unwrap().insert(key(5), (old, t));
            assert!(matches!(b.claim(&key(5)), Claimed::Theirs));
        }
    }

    #[test]
    fn a_claim_untouched_for_too_long_is_broken() {
        let dir = tempfile::tempdir().unwrap();
        let c = Claims::new(dir.path());
        fs::create_dir_all(dir.path().join("claims")).unwrap();
        let path = dir.path().join("claims").join(key(4).to_string());
        fs::write(&path, "elsewhere.example 7").unwrap();
        assert!(matches!(c.claim(&key(4)), Claimed::Theirs));
        // Pretend it was first seen long ago with this modification time.
        let m = fs::metadata(&path).unwrap().modified().unwrap();
        let long_ago = Instant::now().checked_sub(STALE + Duration::from_secs(1));
        if let Some(t) = long_ago {
            c.seen.lock().unwrap().insert(key(4), (m, t));
            assert!(matches!(c.claim(&key(4)), Claimed::Mine(_)));
        }
    }
}
