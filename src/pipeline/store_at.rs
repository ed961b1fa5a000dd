//! Where the instance store is: one rule for every command, page of the book and `--help`.
//!
//! 1. `--store DIR`, else `$DPLAB_STORE` (when not empty);
//! 2. else the nearest `.dplab/store` found from the pipeline file's folder upward, as git
//!    finds `.git`;
//! 3. else the nearest one found from the current directory upward (a command that names no
//!    pipeline, such as `dplab store info`, starts here);
//! 4. else `.dplab/store` in the current directory, made by the first run.
//!
//! Why: the store was `.dplab/store` in the current directory, so the place a run looked
//! depended on where its user stood. `cd results/x/rerun && dplab run pipeline.as-run`, or a
//! run from the pipeline's parent folder, found an empty store and computed everything again —
//! harmless for 600 instances, not for an 8-minute audit. Searching upward from the pipeline
//! finds the project's store from any directory, a results directory's `rerun/` copy
//! included (it lies under the project). A store made by an older dplab in the directory its
//! user ran from is still found by step 3 when that is where the user stands, and by step 2
//! when that directory holds the pipeline: no store needs moving. Steps 2 and 3 take only a
//! store the user running dplab owns ([`upward`]). As with git, a store made high up (a run
//! from the home directory) serves every project below it that has none of its own. Every way the store was
//! found is said by `--dry-run` and `-v` ([`Found::describe`]).

use std::path::{Path, PathBuf};

/// The folder of a project that holds the store, and the store inside it.
pub const DOT_DIR: &str = ".dplab";
const STORE: &str = "store";

/// How the store was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum How {
    Flag,
    Env,
    /// Found upward from the pipeline file's folder.
    AbovePipeline,
    /// Found upward from the current directory.
    AboveHere,
    /// None found: the current directory's, made on first use.
    New,
}

/// The store a command uses and how it was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    pub root: PathBuf,
    pub how: How,
}

impl Found {
    /// `the store /p/.dplab/store (found above the pipeline's folder)`, as `-v` and
    /// `--dry-run` say it.
    pub fn describe(&self) -> String {
        let how = match self.how {
            How::Flag => "given by --store",
            How::Env => "given by DPLAB_STORE",
            How::AbovePipeline => "found from the pipeline's folder upward",
            How::AboveHere => "found from the current directory upward",
            How::New => "none found above the pipeline or here: made in the current directory",
        };
        format!("the store {} ({how})", self.root.display())
    }
}

/// The store for a command: `flag` (`--store`), `env` (`$DPLAB_STORE`), `pipeline` (the
/// pipeline file the command reads, if any), `here` (the current directory).
pub fn find(
    flag: Option<&Path>,
    env: Option<&Path>,
    pipeline: Option<&Path>,
    here: &Path,
) -> Found {
    if let Some(f) = flag {
        return Found {
            root: f.to_path_buf(),
            how: How::Flag,
        };
    }
    if let Some(e) = env.filter(|e| !e.as_os_str().is_empty()) {
        return Found {
            root: e.to_path_buf(),
            how: How::Env,
        };
    }
    let folder = pipeline.map(|p| {
        let abs = if p.is_absolute() {
            p.to_path_buf()
        } else {
            here.join(p)
        };
        abs.parent().map(Path::to_path_buf).unwrap_or(abs)
    });
    if let Some(root) = folder.as_deref().and_then(upward) {
        return Found {
            root,
            how: How::AbovePipeline,
        };
    }
    if let Some(root) = upward(here) {
        return Found {
            root,
            how: How::AboveHere,
        };
    }
    Found {
        root: PathBuf::from(DOT_DIR).join(STORE),
        how: How::New,
    }
}

/// The nearest `.dplab/store` directory at `from` or above it that belongs to the user running
/// dplab (a link to a directory counts: a store may live on another disk). A store is results
/// taken on trust, so one that another user made — a `/tmp/.dplab/store` or one in a shared
/// scratch folder above the pipeline — is passed over, as git passes over a `.git` it does not
/// own.
fn upward(from: &Path) -> Option<PathBuf> {
    from.ancestors()
        .map(|d| d.join(DOT_DIR).join(STORE))
        .find(|s| s.is_dir() && owned(s))
}

/// Whether the user running dplab owns `dir` (root owns everything it may use).
fn owned(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: getuid has no preconditions and cannot fail.
    let me = unsafe { libc::getuid() };
    std::fs::metadata(dir).is_ok_and(|m| m.uid() == me)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_store_is_found_from_the_pipeline_upward_then_here_then_made_here() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        let project = root.join("project");
        std::fs::create_dir_all(project.join(".dplab/store")).unwrap();
        std::fs::create_dir_all(project.join("results/x/rerun")).unwrap();
        std::fs::create_dir_all(root.join("elsewhere")).unwrap();
        let store = project.join(".dplab/store");
        // From the project, from the rerun copy, from a folder outside: the same store.
        for (pipeline, here) in [
            (project.join("p.yaml"), project.clone()),
            (
                project.join("results/x/rerun/pipeline.as-run"),
                project.join("results/x/rerun"),
            ),
            (project.join("p.yaml"), root.join("elsewhere")),
            (
                PathBuf::from("rerun/pipeline.as-run"),
                project.join("results/x"),
            ),
        ] {
            let f = find(None, None, Some(&pipeline), &here);
            assert_eq!((f.root, f.how), (store.clone(), How::AbovePipeline));
        }
        // No pipeline (`dplab store info`): from here upward.
        let f = find(None, None, None, &project.join("results"));
        assert_eq!((f.root, f.how), (store.clone(), How::AboveHere));
        // An older store where the user stood, not above the pipeline: still found.
        std::fs::create_dir_all(root.join("elsewhere/.dplab/store")).unwrap();
        let outside = root.join("outside/p.yaml");
        let f = find(None, None, Some(&outside), &root.join("elsewhere"));
        assert_eq!(f.how, How::AboveHere);
        // The flag, then the variable, win; an empty variable is none.
        let flag = Path::new("/s");
        assert_eq!(
            find(Some(flag), Some(Path::new("/e")), None, root).how,
            How::Flag
        );
        assert_eq!(find(None, Some(Path::new("/e")), None, root).how, How::Env);
        let f = find(
            None,
            Some(Path::new("")),
            Some(&outside),
            &root.join("outside"),
        );
        assert_eq!(f.how, How::New);
        assert!(f.describe().contains("made in the current directory"));
    }

    /// A store another user made above the pipeline is passed over (only where this test can
    /// give a folder away, as root).
    #[test]
    fn a_store_another_user_owns_is_passed_over() {
        // SAFETY: getuid has no preconditions.
        if unsafe { libc::getuid() } != 0 {
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let store = d.path().join(".dplab/store");
        std::fs::create_dir_all(&store).unwrap();
        let c = std::ffi::CString::new(store.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid path; 65534 is `nobody`.
        assert_eq!(unsafe { libc::chown(c.as_ptr(), 65534, 65534) }, 0);
        let here = d.path().join("p");
        std::fs::create_dir_all(&here).unwrap();
        let f = find(None, None, Some(&here.join("p.yaml")), &here);
        assert_eq!(f.how, How::New, "{f:?}");
    }
}
