//! Build script: the commit dplab is built from, for the manifest's `build` (provenance of
//! every result). Only `git rev-parse HEAD`: uncommitted changes are not seen here, which is
//! why the manifest also gives the binary's own sha256.

use std::process::Command;

fn main() {
    // Again when HEAD moves (a commit, a checkout): the branch file HEAD names, and packed refs.
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/packed-refs");
    // The repository's own HEAD file, not a path a user named.
    #[expect(
        clippy::disallowed_methods,
        reason = "reads .git/HEAD of this repository"
    )]
    let head = std::fs::read_to_string(".git/HEAD");
    if let Ok(head) = head {
        if let Some(branch) = head.strip_prefix("ref: ") {
            println!("cargo:rerun-if-changed=.git/{}", branch.trim());
        }
    }
    let commit = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    println!("cargo:rustc-env=DPLAB_BUILD_COMMIT={commit}");
}
