//! What the command-line test files share.

use assert_cmd::Command;

/// `dplab` with a fresh, empty instance store: no test passes because of work an earlier
/// command stored (tests of the store pass `--store` themselves).
pub fn dplab() -> Command {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let store = std::env::temp_dir().join(format!(
        "dplab-test-store-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let mut c = Command::cargo_bin("dplab").expect("binary built");
    c.env("DPLAB_STORE", store);
    c
}
