//! Sizes a user controls, and the limits that keep a typo (`repeat: 1e12`, a step of 1e-9)
//! from exhausting memory. Every limit is checked before anything of that size is
//! allocated, in `validate` as in `run`, and exceeding one is a located input error (exit 2)
//! that names the value, the limit and the flag that raises it.
//!
//! The limits are read by the engine (instances) and by stage kinds (draws, cells) in their
//! parameter checks, so they live below both layers. The CLI sets them once at start-up.

use std::sync::RwLock;

/// The limits in force.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Stage instances in one pipeline (the product of the axes a stage varies over, summed
    /// over stages). Flag `--max-instances`.
    pub instances: u64,
    /// Random draws or Monte-Carlo trials one stage instance may make (`samples`,
    /// replicates, …). Flag `--max-draws`.
    pub draws: u64,
    /// Elements of one matrix, grid or table a stage instance may build (channel matrices,
    /// candidate sets, synthetic data). Flag `--max-cells`.
    pub cells: u64,
}

impl Limits {
    pub const DEFAULT: Limits = Limits {
        instances: 2_000_000,
        draws: 10_000_000_000,
        cells: 200_000_000,
    };
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

static CURRENT: RwLock<Limits> = RwLock::new(Limits::DEFAULT);

/// The limits in force (the defaults unless the CLI set others).
pub fn get() -> Limits {
    *CURRENT.read().unwrap_or_else(|e| e.into_inner())
}

/// Sets the limits for this process (the CLI, once, from its flags).
pub fn set(limits: Limits) {
    *CURRENT.write().unwrap_or_else(|e| e.into_inner()) = limits;
}

/// Checks one size against a limit: `Err` names the quantity, the value, the limit and the
/// flag that raises it.
pub fn check(what: &str, value: u64, limit: u64, flag: &str) -> Result<(), String> {
    if value <= limit {
        Ok(())
    } else {
        Err(format!(
            "{what} = {value} is more than the limit of {limit} (raise it with {flag} if you mean it)"
        ))
    }
}

/// `draws` against [`Limits::draws`].
pub fn check_draws(what: &str, value: u64) -> Result<(), String> {
    check(what, value, get().draws, "--max-draws")
}

/// `cells` against [`Limits::cells`].
pub fn check_cells(what: &str, value: u64) -> Result<(), String> {
    check(what, value, get().cells, "--max-cells")
}
