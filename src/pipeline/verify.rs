//! `dplab run --verify N`: is a program deterministic given its seed?
//!
//! The store takes an instance's frame as the one its key stands for: a second run reads it
//! back instead of computing it. That is sound for the built-in kinds, which draw only from
//! the seed the engine hands them, and the test suite checks them for byte-identity across
//! `--jobs` and shards. A program a stage runs (a kind that declares `runs_programs`) is
//! outside that proof: it may read a clock, a thread count, an unseeded generator. dplab
//! cannot see that, so it offers a check: `--verify N` picks N instances of such stages at
//! random and computes each again where the run reaches it (stored or just computed); the
//! two results must be the same bytes, frame and artifacts, or the instance fails with the
//! first difference, and the run exits 1. An instance checked is stored only once its two
//! results agree, and a stage found not deterministic loses every stored result, with the
//! stages computed from it (`exec`'s `forget_distrusted`): a later run must not take one draw
//! of many for the instance's result. Which instances are
//! checked is random on purpose (repeated checks cover more of the sweep); what is computed
//! never depends on it.

use polars::prelude::*;

use super::instance_store::InstanceResult;
use super::plan::Plan;

/// One flag per instance of the run (global ids, `offset[stage] + index`): whether to
/// compute it twice. At most `n` are set, among stages whose kind runs programs and whose seed
/// decides their output.
pub fn choose(plan: &Plan, offset: &[usize], n: usize) -> Vec<bool> {
    let total = offset.last().copied().unwrap_or(0);
    let mut chosen = vec![false; total];
    if n == 0 {
        return chosen;
    }
    let candidates: Vec<usize> = plan
        .stages
        .iter()
        .enumerate()
        // A program that cannot be seeded gives other bits each run: nothing to compare.
        .filter(|(_, s)| s.kind.runs_programs && !s.kept && s.seeded)
        .flat_map(|(si, s)| (0..s.instances.len()).map(move |ii| (si, ii)))
        .map(|(si, ii)| offset[si] + ii)
        .collect();
    let k = n.min(candidates.len());
    // Not the run's seed: which instances are checked changes nothing that is computed, and a
    // fixed choice would check the same few instances every time.
    let mut rng = rand::rng();
    for i in rand::seq::index::sample(&mut rng, candidates.len(), k) {
        chosen[candidates[i]] = true;
    }
    chosen
}

/// The first difference between two results of one instance, bit for bit (a NaN equals a
/// NaN of the same bits, `-0.0` differs from `0.0`), or `None` when they are the same.
pub(crate) fn first_difference(a: &InstanceResult, b: &InstanceResult) -> Option<String> {
    frame_difference(&a.frame, &b.frame).or_else(|| {
        let names = |r: &InstanceResult| -> Vec<String> {
            r.artifacts.iter().map(|x| x.ext.to_string()).collect()
        };
        if names(a) != names(b) {
            return Some(format!(
                "artifacts [{}], then [{}]",
                names(a).join(", "),
                names(b).join(", ")
            ));
        }
        a.artifacts
            .iter()
            .zip(&b.artifacts)
            .find(|(x, y)| x.bytes != y.bytes)
            .map(|(x, _)| format!("artifact `{}` has other bytes", x.ext))
    })
}

fn frame_difference(a: &DataFrame, b: &DataFrame) -> Option<String> {
    let cols = |f: &DataFrame| -> Vec<String> {
        f.columns()
            .iter()
            .map(|c| format!("{}: {}", c.name(), c.dtype()))
            .collect()
    };
    if cols(a) != cols(b) {
        return Some(format!(
            "columns [{}], then [{}]",
            cols(a).join(", "),
            cols(b).join(", ")
        ));
    }
    if a.height() != b.height() {
        return Some(format!("{} rows, then {}", a.height(), b.height()));
    }
    for (x, y) in a.columns().iter().zip(b.columns()) {
        for row in 0..a.height() {
            let (u, v) = (x.get(row).ok()?, y.get(row).ok()?);
            let same = match (&u, &v) {
                (AnyValue::Float64(p), AnyValue::Float64(q)) => p.to_bits() == q.to_bits(),
                (AnyValue::Float32(p), AnyValue::Float32(q)) => p.to_bits() == q.to_bits(),
                _ => u == v,
            };
            if !same {
                return Some(format!("column `{}`, row {row}: {u}, then {v}", x.name()));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(v: Vec<f64>) -> InstanceResult {
        InstanceResult {
            frame: df!("v" => v).unwrap(),
            artifacts: vec![],
            seconds: 0.0,
            digest: None,
            made: None,
        }
    }

    #[test]
    fn results_differ_at_the_first_changed_bit() {
        let a = result(vec![1.0, f64::NAN, 0.0]);
        assert_eq!(
            first_difference(&a, &result(vec![1.0, f64::NAN, 0.0])),
            None
        );
        assert_eq!(
            first_difference(&a, &result(vec![1.0, f64::NAN, -0.0])).as_deref(),
            Some("column `v`, row 2: 0.0, then -0.0")
        );
        assert_eq!(
            first_difference(&a, &result(vec![1.0])).as_deref(),
            Some("3 rows, then 1")
        );
        let mut b = result(vec![1.0, f64::NAN, 0.0]);
        b.frame.rename("v", "w".into()).unwrap();
        assert_eq!(
            first_difference(&a, &b).as_deref(),
            Some("columns [v: f64], then [w: f64]")
        );
    }
}
