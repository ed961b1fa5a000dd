//! Build script: the commit dplab is built from, for the manifest's `build` (provenance of
//! every result). Only `git rev-parse HEAD`: uncommitted changes are not seen here, which is
//! why the manifest also gives the binary's own sha256.
//!
//! Cargo reruns a build script whose `rerun-if-changed` file does not exist on *every* build,
//! and a rerun recompiles the whole dplab crate (minutes on two cores). So the files that say
//! where HEAD points are asked from git itself (`--git-path`: right in a worktree, where `.git`
//! is a file, and in a checkout without packed refs) and named only when they exist.

use std::path::Path;
use std::process::Command;

/// What `git <args>` prints, trimmed; `None` outside a repository or without git.
fn git(args: &[&str]) -> Option<String> {
    Command::new("git")
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
}

/// Ask Cargo to rerun when `file` changes, if it exists (see the module doc).
fn watch(file: &str) {
    if Path::new(file).exists() {
        println!("cargo:rerun-if-changed={file}");
    }
}

fn main() {
    // Nothing but these files: without any `rerun-if-changed`, Cargo would rerun on every change
    // of the package's sources, which the compiler already tracks.
    println!("cargo:rerun-if-changed=build.rs");
    // Again when HEAD moves (a commit, a checkout): HEAD, the branch file it names, packed refs.
    if let Some(head) = git(&["rev-parse", "--git-path", "HEAD"]) {
        watch(&head);
    }
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        if let Some(file) = git(&["rev-parse", "--git-path", &branch]) {
            watch(&file);
        }
    }
    if let Some(packed) = git(&["rev-parse", "--git-path", "packed-refs"]) {
        watch(&packed);
    }
    let commit = git(&["rev-parse", "HEAD"]).unwrap_or_default();
    println!("cargo:rustc-env=DPLAB_BUILD_COMMIT={commit}");
}
