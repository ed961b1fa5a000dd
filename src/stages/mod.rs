//! Stage kinds: each turns input frames into an output frame, most by calling the mechanisms
//! of [`crate::mech`]; the `frame.*` kinds evaluate the expressions of [`crate::expr`], the
//! `external` kind runs a program in the sandbox of [`crate::program`]. Beside the kinds, only
//! their shared ground: [`param`] (ranges written once), [`columns`] (reading and building
//! frames), the [`registry`].
//!
//! A stage kind is one module holding its typed parameters (serde, `deny_unknown_fields`),
//! their validation, and a `run` that turns input frames into an output frame (and, for
//! plots and reports, files). The contract a kind implements ([`Stage`], [`Ctx`], [`KindInfo`])
//! is the engine's, in [`crate::kind`]; kinds register in [`registry`], a file above them
//! which the CLI hands to the engine, so adding a kind never touches the engine, and no kind
//! imports the engine or the registry. This file holds only what kinds share.

pub mod aggregate;
pub mod audit;
pub mod columns;
pub mod evaluate;
pub mod external;
pub mod frame;
pub(crate) mod kept;
pub mod load;
pub mod mechanism;
pub mod near_optimal;
pub mod normalise;
pub mod param;
pub mod plot;
pub mod point_set;
pub mod query;
pub mod registry;
pub mod report;

use serde_yaml_ng::Value;

pub use crate::kind::{
    build, distinct, params, rng_from_seed, substream, Artifact, Ctx, FileSource, Gather, KindInfo,
    Output, ParamError, Stage, StageRun, Unavailable,
};

/// The shared limit a size counts against (see [`crate::limits`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Limit {
    /// Random draws, Monte-Carlo trials, replicates, evaluations (`--max-draws`).
    Draws,
    /// Elements of one matrix, grid, candidate set or table (`--max-cells`).
    Cells,
}

/// The product of `factors`, or `None` when it does not fit in 64 bits (which exceeds
/// every limit): sizes are multiplied with this, never with `*`.
pub fn product(factors: &[u64]) -> Option<u64> {
    factors.iter().try_fold(1u64, |a, &b| a.checked_mul(b))
}

/// Checks a size set by parameters (or, in `run`, by input frames) against a shared limit.
/// `what` names the quantity as the user wrote it ("samples", "rows × samples (3 × 10)");
/// the message adds the value, the limit and the flag that raises it. `None` is a product
/// that overflowed.
pub(crate) fn check_size(limit: Limit, what: &str, value: Option<u64>) -> Result<(), String> {
    match (limit, value) {
        (Limit::Draws, Some(v)) => crate::limits::check_draws(what, v),
        (Limit::Cells, Some(v)) => crate::limits::check_cells(what, v),
        (_, None) => {
            let (max, flag) = match limit {
                Limit::Draws => (crate::limits::get().draws, "--max-draws"),
                Limit::Cells => (crate::limits::get().cells, "--max-cells"),
            };
            Err(format!(
                "{what} is more than 2^64, more than the limit of {max} (raise it with {flag} if you mean it)"
            ))
        }
    }
}

/// [`check_size`] located at the parameter `key` of `with:` (for `validate`).
pub(crate) fn check_size_at(
    key: &str,
    limit: Limit,
    what: &str,
    value: Option<u64>,
) -> Result<(), ParamError> {
    check_size(limit, what, value).map_err(|m| ParamError::at(key, m))
}

/// [`check_size`] for `run`, where a size depends on input frames.
pub(crate) fn check_size_run(limit: Limit, what: &str, value: Option<u64>) -> anyhow::Result<()> {
    check_size(limit, what, value).map_err(|m| anyhow::anyhow!(m))
}

/// A grid parameter at `key` (a list, `{from, to, step}`, `{linspace: …}`, `{logspace: …}`),
/// built: its number of points is checked against `--max-cells` first. For `run`; `validate`
/// uses [`check_grid_param`], which keeps no values.
pub(crate) fn grid_param(key: &str, v: &Value) -> Result<Vec<crate::axis::AxisValue>, ParamError> {
    let mut out = Vec::new();
    check_grid_param(key, v, &mut |x| {
        out.push(x);
        Ok(())
    })?;
    Ok(out)
}

/// Checks a grid parameter at `key` and hands each value to `each` without keeping them:
/// the number of points against `--max-cells`, then the grid's form. Returns the number of
/// points. A generated grid of any length is checked in constant memory.
pub(crate) fn check_grid_param(
    key: &str,
    v: &Value,
    each: &mut dyn FnMut(crate::axis::AxisValue) -> Result<(), ParamError>,
) -> Result<u64, ParamError> {
    if let Some(n) = crate::axis::grid_len(v) {
        check_size_at(
            key,
            Limit::Cells,
            &format!("the grid points of `{key}`"),
            Some(n),
        )?;
    }
    let mut failed: Option<ParamError> = None;
    let walked = crate::axis::walk_grid(v, crate::limits::get().cells, &mut |x| {
        each(x).map_err(|e| {
            failed = Some(e);
            (String::new(), String::new())
        })
    });
    match (walked, failed) {
        (_, Some(e)) => Err(e),
        (Ok(n), None) => Ok(n),
        (Err((sub, message)), None) => Err(ParamError {
            path: std::iter::once(key.to_string())
                .chain(sub.split('.').filter(|s| !s.is_empty()).map(str::to_string))
                .collect(),
            message,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_multiplied_without_overflow() {
        assert_eq!(product(&[3, 4, 5]), Some(60));
        assert_eq!(product(&[]), Some(1));
        assert_eq!(product(&[u64::MAX, 2]), None);
        let e = check_size(Limit::Cells, "a × b", product(&[1 << 40, 1 << 40])).unwrap_err();
        assert!(e.contains("2^64") && e.contains("--max-cells"), "{e}");
        let e = check_size(Limit::Draws, "samples", Some(u64::MAX)).unwrap_err();
        assert!(e.contains("samples = 18446744073709551615") && e.contains("--max-draws"));
        assert!(check_size(Limit::Draws, "samples", Some(1000)).is_ok());
    }

    #[test]
    fn grid_parameters_are_counted_before_they_are_built() {
        let v: Value = serde_yaml_ng::from_str("{from: 0, to: 1, step: 1e-300}").unwrap();
        let e = check_grid_param("values", &v, &mut |_| Ok(())).unwrap_err();
        assert_eq!(e.path, vec!["values"]);
        assert!(e.message.contains("--max-cells"), "{}", e.message);
        let v: Value = serde_yaml_ng::from_str("{linspace: {from: 0, to: 1, num: 1e3}}").unwrap();
        assert_eq!(grid_param("t", &v).unwrap().len(), 1000);
        // Equal neighbours of a generated grid are found without keeping the values.
        let v: Value = serde_yaml_ng::from_str("{linspace: {from: 1, to: 1, num: 3}}").unwrap();
        let e = check_grid_param("t", &v, &mut |_| Ok(())).unwrap_err();
        assert!(e.message.contains("twice"), "{}", e.message);
    }
}
