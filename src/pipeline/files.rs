//! Files a pipeline's parameters name (`load.table {path: …}`, `report.table {paper: …}`).
//!
//! A pipeline reads only inside its own directory, unless the user allows more on the
//! command line (`--allow-read DIR`): every path is resolved against the pipeline file's
//! directory, made canonical (so `..` and symbolic links are followed to where they really
//! lead) and refused unless it lies under an allowed directory. The engine reads each file
//! once, at planning, and hands the stages those bytes: what was checked is what is parsed,
//! and `validate` already fails, located, on a missing or unreadable file.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A file named by a parameter larger than this is refused (paper tables and inline data
/// are small; datasets go through the registry).
pub const MAX_FILE_BYTES: u64 = 256 << 20;

/// What to tell a user whose path was refused.
pub const HINT: &str = "paths are relative to the pipeline file and stay inside its directory; allow another directory with --allow-read DIR";

/// The files of one plan, by the path as written in the parameters.
#[derive(Default, Clone)]
pub struct InputFiles {
    by_path: HashMap<PathBuf, Arc<[u8]>>,
}

impl InputFiles {
    /// Checks and reads `rel` (relative to `base`), once per distinct path.
    pub fn add(&mut self, base: &Path, rel: &Path, allow: &[PathBuf]) -> Result<(), String> {
        if self.by_path.contains_key(rel) {
            return Ok(());
        }
        let bytes = read_confined(base, rel, allow)?;
        self.by_path.insert(rel.to_path_buf(), bytes.into());
        Ok(())
    }

    /// The bytes of a file the plan read, by the path as written.
    pub fn get(&self, rel: &Path) -> Option<&[u8]> {
        self.by_path.get(rel).map(|b| &b[..])
    }
}

impl crate::kind::FileSource for InputFiles {
    fn file(&self, path: &Path) -> Option<&[u8]> {
        self.get(path)
    }
}

/// Reads `base/rel` if its canonical path lies under `base` or one of `allow`.
pub fn read_confined(base: &Path, rel: &Path, allow: &[PathBuf]) -> Result<Vec<u8>, String> {
    let shown = rel.display();
    let full = base.join(rel);
    let real = full.canonicalize().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!("{shown}: no such file ({})", full.display()),
        _ => format!("{shown}: {e}"),
    })?;
    let roots: Vec<PathBuf> = std::iter::once(base)
        .chain(allow.iter().map(PathBuf::as_path))
        .filter_map(|d| d.canonicalize().ok())
        .collect();
    if !roots.iter().any(|r| real.starts_with(r)) {
        return Err(format!(
            "{shown} leads to {}, outside the pipeline's directory{}",
            real.display(),
            if allow.is_empty() {
                String::new()
            } else {
                " and the --allow-read directories".to_string()
            }
        ));
    }
    crate::pipeline::spec::read_regular_file(&real, MAX_FILE_BYTES)
        .map_err(|e| format!("{shown}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_inside_and_refuses_outside() {
        let root = tempfile::tempdir().unwrap();
        let pipe = root.path().join("p");
        let other = root.path().join("other");
        std::fs::create_dir_all(pipe.join("sub")).unwrap();
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(pipe.join("sub/t.csv"), "a\n1\n").unwrap();
        std::fs::write(other.join("secret.csv"), "s\n").unwrap();
        std::os::unix::fs::symlink(other.join("secret.csv"), pipe.join("link.csv")).unwrap();
        let ok = |rel: &str, allow: &[PathBuf]| read_confined(&pipe, Path::new(rel), allow);
        assert_eq!(ok("sub/t.csv", &[]).unwrap(), b"a\n1\n");
        assert_eq!(ok("sub/../sub/t.csv", &[]).unwrap(), b"a\n1\n");
        for bad in [
            "../other/secret.csv",
            "link.csv",
            "/etc/hostname",
            "sub/../../other/secret.csv",
        ] {
            let e = ok(bad, &[]).unwrap_err();
            assert!(
                e.contains("outside") || e.contains("no such file"),
                "{bad}: {e}"
            );
        }
        assert!(ok("../other/secret.csv", std::slice::from_ref(&other)).is_ok());
        assert!(ok("link.csv", std::slice::from_ref(&other)).is_ok());
        assert!(ok("missing.csv", &[]).unwrap_err().contains("no such file"));
        assert!(ok("sub", &[]).unwrap_err().contains("not a regular file"));
    }
}
