//! Which dplab made a result: its version, the commit it was built from (the build script's
//! `git rev-parse HEAD`) and the sha256 of the executable that ran — the commit alone would not
//! tell apart two builds of one commit with different uncommitted changes.
//!
//! Hashing a 50 MB executable takes tens of milliseconds: it starts on a thread of its own
//! when a run starts ([`start`]) and is waited for only when the manifest is written.

use std::sync::OnceLock;

use sha2::{Digest, Sha256};

use super::manifest::Build;
use crate::text::hex;

static BINARY: OnceLock<String> = OnceLock::new();

/// Starts hashing the executable in the background (once per process).
pub fn start() {
    if BINARY.get().is_none() {
        std::thread::spawn(|| {
            BINARY.get_or_init(binary_sha256);
        });
    }
}

/// This build of dplab (waits for the executable's hash).
pub fn build() -> Build {
    Build {
        version: env!("CARGO_PKG_VERSION").into(),
        commit: env!("DPLAB_BUILD_COMMIT").into(),
        binary_sha256: BINARY.get_or_init(binary_sha256).clone(),
    }
}

/// sha256 of the running executable, streamed; empty when it cannot be read.
fn binary_sha256() -> String {
    use std::io::Read;
    let Ok(exe) = std::env::current_exe() else {
        return String::new();
    };
    // dplab's own executable, not a path a user named.
    #[expect(clippy::disallowed_methods, reason = "opens dplab's own executable")]
    let Ok(mut f) = std::fs::File::open(&exe) else {
        return String::new();
    };
    let mut sha = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => sha.update(&buf[..n]),
            Err(_) => return String::new(),
        }
    }
    hex(&sha.finalize())
}
