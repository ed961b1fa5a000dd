//! Files a pipeline's parameters name (`load.table {path: …}`, `report.table {paper: …}`).
//!
//! A pipeline reads only inside its own directory, unless the user allows more on the
//! command line (`--allow-read DIR`): every path is resolved against the pipeline file's
//! directory, made canonical (so `..` and symbolic links are followed to where they really
//! lead) and refused unless it lies under an allowed directory. The engine reads each file
//! once, at planning, and hands the stages those bytes: what was checked is what is parsed,
//! and `validate` already fails, located, on a missing or unreadable file.
//!
//! A kind may also name trees (a program's code: a file or a folder, [`crate::kind::Stage::trees`]):
//! a folder is read whole — every regular file under it, in name order, each confined like a
//! file — and its digest covers each file's path and content, so the store key changes when
//! any of them does and not when one is only touched.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A file named by a parameter larger than this is refused (paper tables and inline data
/// are small; datasets go through the registry).
pub(crate) const MAX_FILE_BYTES: u64 = 256 << 20;

/// Most files a tree may hold, and most bytes all of them together (a code folder is a few
/// files; a tree of a dataset's size is a mistake to report, not to hash).
pub(crate) const MAX_TREE_FILES: usize = 4096;
pub(crate) const MAX_TREE_BYTES: u64 = 256 << 20;
/// Deepest folder nesting a tree may have.
pub(crate) const MAX_TREE_DEPTH: usize = 32;

/// What to tell a user whose path was refused.
pub(crate) const HINT: &str = "paths are relative to the pipeline file and stay inside its directory; allow another directory with --allow-read DIR";

/// The files of one plan, by the path as written in the parameters.
#[derive(Default, Clone)]
pub struct InputFiles {
    by_path: HashMap<PathBuf, Arc<[u8]>>,
    /// Trees by the path as written: their files (paths relative to the tree's parent, as
    /// written plus the part under it) in name order.
    trees: HashMap<PathBuf, (Arc<[PathBuf]>, String)>,
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

    /// Every file the plan read, by the path as written, in path order.
    pub fn all(&self) -> Vec<(&Path, &[u8])> {
        let mut all: Vec<(&Path, &[u8])> = self
            .by_path
            .iter()
            .map(|(p, b)| (p.as_path(), &b[..]))
            .collect();
        all.sort();
        all
    }

    /// The bytes of a file the plan read, by the path as written.
    pub fn get(&self, rel: &Path) -> Option<&[u8]> {
        self.by_path.get(rel).map(|b| &b[..])
    }

    /// Checks and reads the tree `rel` (a file, or a folder and every regular file under
    /// it), once per distinct path.
    pub(crate) fn add_tree(
        &mut self,
        base: &Path,
        rel: &Path,
        allow: &[PathBuf],
    ) -> Result<(), String> {
        if self.trees.contains_key(rel) {
            return Ok(());
        }
        let full = base.join(rel);
        let meta = std::fs::metadata(&full).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                format!(
                    "{}: no such file or folder ({})",
                    rel.display(),
                    full.display()
                )
            }
            _ => format!("{}: {e}", rel.display()),
        })?;
        let mut files = Vec::new();
        if meta.is_dir() {
            let mut bytes = 0u64;
            walk(
                base,
                rel,
                allow,
                0,
                &mut files,
                &mut bytes,
                &mut self.by_path,
            )?;
        } else {
            self.add(base, rel, allow)?;
            files.push(rel.to_path_buf());
        }
        let digest = self.digest(rel, &files);
        self.trees.insert(rel.to_path_buf(), (files.into(), digest));
        Ok(())
    }

    /// The files of a tree the plan read, each with its bytes, in name order.
    pub fn tree(&self, rel: &Path) -> Option<Vec<(PathBuf, &[u8])>> {
        let (files, _) = self.trees.get(rel)?;
        files
            .iter()
            .map(|f| Some((f.clone(), self.get(f)?)))
            .collect()
    }

    /// A tree's digest (see [`InputFiles::digest`]), worked out once when it was read.
    pub(crate) fn tree_digest(&self, rel: &Path) -> Option<&str> {
        self.trees.get(rel).map(|(_, d)| d.as_str())
    }

    /// sha256 over each file's path (below the tree) and sha256, in name order; the file's
    /// own sha256 for a tree that is one file. What the store key holds of a tree.
    fn digest(&self, rel: &Path, files: &[PathBuf]) -> String {
        use sha2::{Digest, Sha256};
        let bytes = |f: &Path| self.get(f).unwrap_or_default();
        if let [only] = files {
            if only == rel {
                return crate::text::hex(&Sha256::digest(bytes(only)));
            }
        }
        let mut h = Sha256::new();
        for path in files {
            let below = path.strip_prefix(rel).unwrap_or(path).to_string_lossy();
            h.update((below.len() as u64).to_le_bytes());
            h.update(below.as_bytes());
            h.update(Sha256::digest(bytes(path)));
        }
        crate::text::hex(&h.finalize())
    }
}

/// Reads every regular file under the folder `rel` into `by_path` (confined like a file),
/// appending their paths to `files` in name order.
fn walk(
    base: &Path,
    rel: &Path,
    allow: &[PathBuf],
    depth: usize,
    files: &mut Vec<PathBuf>,
    bytes: &mut u64,
    by_path: &mut HashMap<PathBuf, Arc<[u8]>>,
) -> Result<(), String> {
    if depth > MAX_TREE_DEPTH {
        return Err(format!(
            "{}: folders nest deeper than {MAX_TREE_DEPTH}",
            rel.display()
        ));
    }
    let full = base.join(rel);
    let mut names: Vec<std::ffi::OsString> = std::fs::read_dir(&full)
        .map_err(|e| format!("{}: {e}", rel.display()))?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: {e}", rel.display()))?;
    names.sort();
    for name in names {
        let child = rel.join(&name);
        // Not followed: a link in a code folder could lead anywhere, and a link to a folder
        // above could make the walk endless.
        let meta = std::fs::symlink_metadata(base.join(&child))
            .map_err(|e| format!("{}: {e}", child.display()))?;
        if meta.file_type().is_symlink() {
            return Err(format!(
                "{}: a symbolic link in a code folder (name the file it leads to instead)",
                child.display()
            ));
        }
        if meta.is_dir() {
            walk(base, &child, allow, depth + 1, files, bytes, by_path)?;
            continue;
        }
        if files.len() >= MAX_TREE_FILES {
            return Err(format!(
                "{}: more than {MAX_TREE_FILES} files under it",
                rel.display()
            ));
        }
        let data = read_confined(base, &child, allow)?;
        *bytes += data.len() as u64;
        if *bytes > MAX_TREE_BYTES {
            return Err(format!(
                "{}: its files hold more than {} MiB",
                rel.display(),
                MAX_TREE_BYTES >> 20
            ));
        }
        by_path.insert(child.clone(), data.into());
        files.push(child);
    }
    Ok(())
}

impl crate::kind::FileSource for InputFiles {
    fn file(&self, path: &Path) -> Option<&[u8]> {
        self.get(path)
    }
    fn tree(&self, path: &Path) -> Option<Vec<(PathBuf, &[u8])>> {
        InputFiles::tree(self, path)
    }
}

/// Reads `base/rel` if its canonical path lies under `base` or one of `allow`.
pub(crate) fn read_confined(base: &Path, rel: &Path, allow: &[PathBuf]) -> Result<Vec<u8>, String> {
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

    /// A code folder is read whole and in name order; its digest follows every file's path
    /// and content and nothing else (touching a file leaves it, editing or renaming one
    /// changes it); links and paths out of the pipeline's directory are refused.
    #[test]
    fn a_tree_is_read_whole_and_its_digest_follows_content_only() {
        let root = tempfile::tempdir().unwrap();
        let pipe = root.path().join("p");
        std::fs::create_dir_all(pipe.join("code/lib")).unwrap();
        std::fs::write(pipe.join("code/main.py"), "print(1)\n").unwrap();
        std::fs::write(pipe.join("code/lib/b.py"), "B = 2\n").unwrap();
        std::fs::write(pipe.join("code/lib/a.py"), "A = 1\n").unwrap();
        let read = || {
            let mut f = InputFiles::default();
            f.add_tree(&pipe, Path::new("code"), &[]).unwrap();
            f
        };
        let f = read();
        let names: Vec<String> = f
            .tree(Path::new("code"))
            .unwrap()
            .iter()
            .map(|(p, _)| p.display().to_string())
            .collect();
        assert_eq!(names, ["code/lib/a.py", "code/lib/b.py", "code/main.py"]);
        let d0 = f.tree_digest(Path::new("code")).unwrap().to_string();
        // Touched (written again with the same bytes): the same digest.
        std::fs::write(pipe.join("code/lib/a.py"), "A = 1\n").unwrap();
        assert_eq!(read().tree_digest(Path::new("code")).unwrap(), d0);
        // Edited: another digest.
        std::fs::write(pipe.join("code/lib/a.py"), "A = 3\n").unwrap();
        let d1 = read().tree_digest(Path::new("code")).unwrap().to_string();
        assert_ne!(d1, d0);
        // Renamed with the same content: another digest.
        std::fs::rename(pipe.join("code/lib/b.py"), pipe.join("code/lib/c.py")).unwrap();
        assert_ne!(read().tree_digest(Path::new("code")).unwrap(), d1);
        // A single file is a tree of itself, its digest its sha256.
        let mut one = InputFiles::default();
        one.add_tree(&pipe, Path::new("code/main.py"), &[]).unwrap();
        assert_eq!(
            one.tree_digest(Path::new("code/main.py")).unwrap(),
            crate::text::hex(&sha2::Digest::finalize(sha2::Digest::chain_update(
                <sha2::Sha256 as sha2::Digest>::new(),
                b"print(1)\n"
            )))
        );
        // A link inside, a folder outside, a missing path: refused with the path.
        std::os::unix::fs::symlink("/etc", pipe.join("code/etc")).unwrap();
        let e = InputFiles::default()
            .add_tree(&pipe, Path::new("code"), &[])
            .unwrap_err();
        assert!(e.contains("code/etc") && e.contains("symbolic link"), "{e}");
        std::fs::create_dir_all(root.path().join("out")).unwrap();
        std::fs::write(root.path().join("out/x.py"), "x").unwrap();
        let e = InputFiles::default()
            .add_tree(&pipe, Path::new("../out"), &[])
            .unwrap_err();
        assert!(e.contains("outside"), "{e}");
        let e = InputFiles::default()
            .add_tree(&pipe, Path::new("nothing"), &[])
            .unwrap_err();
        assert!(e.contains("no such file or folder"), "{e}");
    }
}
