//! Opening files named by users without trusting what they are: a FIFO would block the
//! open or the read forever, a device would never end, and a sparse file would claim
//! terabytes. Everything dplab reads from a path a user gave goes through here.

use std::fs::{File, Metadata};
use std::io::Read;
use std::path::Path;

/// Opens `path` for reading if it is a regular file (following links), without blocking on
/// a FIFO; errors say what the path is instead.
// The sanctioned opener of user-named paths: O_NONBLOCK and the file-type check below.
#[expect(clippy::disallowed_methods)]
pub fn open_regular(path: &Path) -> Result<(File, Metadata), String> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| format!("cannot read the file: {e}"))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read the file: {e}"))?;
    if !meta.is_file() {
        let what = file_type_name(&meta.file_type());
        return Err(format!("not a regular file (it is {what})"));
    }
    Ok((file, meta))
}

/// The bytes of a regular file of at most `max` bytes; errors say what the path is instead.
pub fn read_regular_file(path: &Path, max: u64) -> Result<Vec<u8>, String> {
    let (file, meta) = open_regular(path)?;
    if meta.len() > max {
        return Err(format!(
            "the file has {} bytes, more than the limit of {max}",
            meta.len()
        ));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    // `take` bounds the read even if the file grows after the check.
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read the file: {e}"))?;
    if bytes.len() as u64 > max {
        return Err(format!(
            "the file grew past the limit of {max} bytes while being read"
        ));
    }
    Ok(bytes)
}

fn file_type_name(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}
