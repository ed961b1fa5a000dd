//! Reading what a program left in its working directory without following anything it
//! planted there. The program runs as the user and may replace any file or directory in its
//! working directory by a symbolic link (to `/etc/passwd`, to `$HOME`), or even rename the
//! directory itself; so every open here is relative to a directory descriptor dplab opened
//! itself when it created the directory (`openat`), with `O_NOFOLLOW` at every step, and a
//! file counts only when `fstat` of the opened descriptor says it is a regular file with one
//! link. What dplab reads is then provably the program's own output, whatever the paths
//! point to by then.
//!
//! Hand-written on `libc` (already a dependency) because `std` has no `openat`.

use std::ffi::{CStr, CString, OsStr, OsString};
use std::fs::{File, Metadata};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// An open directory.
pub(crate) struct Dir {
    fd: OwnedFd,
}

const DIR_FLAGS: libc::c_int =
    libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;

fn c_name(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

fn owned(fd: libc::c_int) -> io::Result<OwnedFd> {
    if fd < 0 {
        Err(io::Error::last_os_error())
    } else {
        // SAFETY: `fd` was just returned by a successful open and is owned by nobody else.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }
}

impl Dir {
    /// Opens a directory dplab itself created (refusing a symbolic link in its place).
    pub(crate) fn open(path: &Path) -> io::Result<Dir> {
        let c = c_name(path.as_os_str())?;
        // SAFETY: `c` is a valid NUL-terminated string for the duration of the call.
        let fd = owned(unsafe { libc::open(c.as_ptr(), DIR_FLAGS) })?;
        Ok(Dir { fd })
    }

    /// The directory `name` inside this one, not following a symbolic link.
    pub(crate) fn dir(&self, name: &str) -> Result<Dir, String> {
        let c = c_name(OsStr::new(name)).map_err(|e| e.to_string())?;
        // SAFETY: a valid directory descriptor and a NUL-terminated name.
        let fd = unsafe { libc::openat(self.fd.as_raw_fd(), c.as_ptr(), DIR_FLAGS) };
        match owned(fd) {
            Ok(fd) => Ok(Dir { fd }),
            // With O_DIRECTORY, a symbolic link fails as "not a directory": ask what it is.
            Err(e) => Err(match e.raw_os_error() {
                Some(libc::ELOOP | libc::ENOTDIR) if self.is_link(&c) => {
                    "a symbolic link where dplab made a directory".into()
                }
                Some(libc::ENOTDIR) => "a file where dplab made a directory".into(),
                Some(libc::ENOENT) => "nothing: the directory dplab made is gone".into(),
                _ => format!("which cannot be opened ({e})"),
            }),
        }
    }

    /// Whether `name` in this directory is a symbolic link (not following it).
    fn is_link(&self, name: &CString) -> bool {
        // SAFETY: `st` is written by a successful fstatat and read only then.
        unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            libc::fstatat(
                self.fd.as_raw_fd(),
                name.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            ) == 0
                && st.st_mode & libc::S_IFMT == libc::S_IFLNK
        }
    }

    /// Whether anything is called `name` in this directory (a symbolic link too: it is not
    /// followed). One `fstatat`, whatever else the directory holds.
    pub(crate) fn has(&self, name: &OsStr) -> io::Result<bool> {
        let c = c_name(name)?;
        // SAFETY: a valid directory descriptor, a NUL-terminated name, and `st` only written.
        let found = unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            libc::fstatat(
                self.fd.as_raw_fd(),
                c.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            ) == 0
        };
        if found {
            return Ok(true);
        }
        match io::Error::last_os_error() {
            e if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
            e => Err(e),
        }
    }

    /// The regular file `name` inside this one, opened for reading without following a
    /// symbolic link or blocking on a FIFO; an error says what it is instead.
    pub(crate) fn file(&self, name: &OsStr) -> Result<(File, Metadata), String> {
        let c = c_name(name).map_err(|e| e.to_string())?;
        let flags =
            libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;
        // SAFETY: a valid directory descriptor and a NUL-terminated name.
        let fd = unsafe { libc::openat(self.fd.as_raw_fd(), c.as_ptr(), flags) };
        let file = File::from(owned(fd).map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => "a symbolic link".to_string(),
            Some(libc::ENXIO) => "a socket".to_string(),
            _ => format!("which cannot be opened ({e})"),
        })?);
        let meta = file
            .metadata()
            .map_err(|e| format!("which cannot be read ({e})"))?;
        let kind = meta.file_type();
        if kind.is_dir() {
            return Err("a directory".into());
        }
        if !kind.is_file() {
            return Err("not a regular file (a FIFO or a device)".into());
        }
        // A second name of a file elsewhere (`ln /etc/passwd x`) is not the program's output.
        if meta.nlink() != 1 {
            return Err(format!("a hard link ({} names)", meta.nlink()));
        }
        Ok((file, meta))
    }

    /// The names in this directory (without `.` and `..`), sorted, at most `max + 1` of
    /// them (so that a caller with a bound of `max` sees it exceeded without reading a
    /// million names).
    pub(crate) fn names(&self, max: usize) -> io::Result<Vec<OsString>> {
        // `fdopendir` takes ownership of its descriptor: give it a duplicate.
        // SAFETY: duplicating a valid descriptor.
        let dup = owned(unsafe { libc::fcntl(self.fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) })?;
        let raw = std::os::fd::IntoRawFd::into_raw_fd(dup);
        // SAFETY: `raw` is a valid directory descriptor that `fdopendir` now owns.
        let stream = unsafe { libc::fdopendir(raw) };
        if stream.is_null() {
            let e = io::Error::last_os_error();
            // SAFETY: on failure the descriptor is still ours to close.
            unsafe { libc::close(raw) };
            return Err(e);
        }
        let mut out = Vec::new();
        loop {
            // SAFETY: `stream` is a valid open directory stream used by this thread only.
            let entry = unsafe { libc::readdir(stream) };
            if entry.is_null() {
                break;
            }
            // SAFETY: `d_name` of an entry `readdir` returned is a NUL-terminated string.
            let name = unsafe { CStr::from_ptr((*entry).d_name.as_ptr()) }.to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            out.push(OsString::from_vec(name.to_vec()));
            if out.len() > max {
                break;
            }
        }
        // SAFETY: closes the stream (and its descriptor) once.
        unsafe { libc::closedir(stream) };
        out.sort();
        Ok(out)
    }
}
