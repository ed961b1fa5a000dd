//! (c) The linear score: a logistic regression telling the two inputs' releases apart, on
//! features of the releases.
//!
//! # Features of a release
//! The linear score (c) is learnt on features of the release, not its raw numbers: a value
//! that recurs in at least [`CODE_SHARE`] of a coordinate's draws is a *code* (a sparse-vector
//! mechanism's −1000 for ⊥, 0/1 answers) and gets an indicator feature; a code outside the
//! range of the coordinate's other values is a label, not a magnitude, and the coordinate's
//! value feature reads the others' mean in its place (else −1000 would swamp every weight); a
//! label code in several coordinates also gets a count feature (how many answers were ⊥) —
//! DP-Sniper's feature map for such outputs (Bichsel et al., S&P'21, §VI).

use std::collections::HashMap;

use foldhash::fast::FixedState;
use nalgebra::{DMatrix, DVector};
use rayon::prelude::*;

use super::super::event::{Feature, Projection};
use super::Rows;

/// Dimensions beyond which the linear score is not learnt (Newton's method is cubic in them).
pub(crate) const MAX_LINEAR_DIM: usize = 256;

/// Releases the logistic regression is trained on, at most (the first ones of the split).
const MAX_TRAIN: usize = 200_000;

/// Rows per block of the logistic regression's sums (fixed, so that the sums are the same on
/// any number of threads).
const BLOCK: usize = 4096;

/// Share of a coordinate's draws at which a value that recurs is a code (see the module doc).
pub(crate) const CODE_SHARE: f64 = 0.01;

/// Codes per coordinate, at most (the commonest).
const MAX_CODES: usize = 8;

/// The features of releases like `rows` (see the module doc): per coordinate its value (its
/// label codes read as the others' mean) unless every value is a code, an indicator per code,
/// and a count per label code that several coordinates hold. `None` beyond
/// [`MAX_LINEAR_DIM`] features.
fn features(rows: &[(&[f64], f64, f64)], d: usize) -> Option<Vec<Feature>> {
    let total: f64 = rows.iter().map(|r| r.2).sum();
    let mut out = Vec::new();
    let mut label_in: Vec<(u64, usize)> = Vec::new();
    for j in 0..d {
        let mut seen: HashMap<u64, f64, FixedState> = HashMap::default();
        for (x, _, w) in rows {
            *seen.entry((x[j] + 0.0).to_bits()).or_default() += w;
        }
        let mut codes: Vec<(f64, f64)> = seen
            .iter()
            .filter(|(_, &w)| w >= CODE_SHARE * total)
            .map(|(&b, &w)| (f64::from_bits(b), w))
            .collect();
        // The commonest first, then by value: the same codes whatever the hash's order.
        codes.sort_by(|p, q| q.1.total_cmp(&p.1).then(p.0.total_cmp(&q.0)));
        codes.truncate(MAX_CODES);
        let mut codes: Vec<f64> = codes.into_iter().map(|c| c.0).collect();
        codes.sort_by(f64::total_cmp);
        let others = || {
            rows.iter()
                .map(|r| (r.0[j], r.2))
                .filter(|(v, _)| !codes.contains(v))
        };
        let (lo, hi, sum, weight) = others().fold(
            (f64::INFINITY, f64::NEG_INFINITY, 0.0, 0.0),
            |(lo, hi, s, n), (v, w)| (lo.min(v), hi.max(v), s + w * v, n + w),
        );
        if weight > 0.0 {
            let labels: Vec<f64> = codes
                .iter()
                .copied()
                .filter(|&c| c < lo || c > hi)
                .collect();
            for &c in &labels {
                match label_in.iter_mut().find(|(b, _)| *b == c.to_bits()) {
                    Some((_, n)) => *n += 1,
                    None => label_in.push((c.to_bits(), 1)),
                }
            }
            out.push(Feature::Value {
                j,
                labels,
                fill: sum / weight,
            });
        }
        // A coordinate of codes only needs one indicator fewer than it has codes.
        let skip = usize::from(weight == 0.0);
        out.extend(codes.iter().skip(skip).map(|&code| Feature::Is { j, code }));
    }
    out.extend(
        label_in
            .iter()
            .filter(|(_, n)| *n >= 2)
            .map(|(b, _)| Feature::Count {
                code: f64::from_bits(*b),
            }),
    );
    (out.len() <= MAX_LINEAR_DIM && !out.is_empty()).then_some(out)
}

/// [`logistic`], for the tests of the features it learns on.
#[cfg(test)]
pub(crate) fn logistic_for_tests(a: &super::Releases, b: &super::Releases) -> Option<Projection> {
    logistic(a.rows(), b.rows())
}

/// (c) A linear score telling side 0 from side 1: a logistic regression on the standardised
/// [`features`] of the releases, fitted by Newton's method with a small ridge (which keeps it
/// finite when the sides separate), written back in the features' own units. Hand-written: a
/// few lines on nalgebra, where a machine-learning crate would bring a tree of dependencies
/// for one fit.
pub(super) fn logistic(a: Rows, b: Rows) -> Option<Projection> {
    let raw: Vec<(&[f64], f64, f64)> = [(a, 1.0), (b, 0.0)]
        .into_iter()
        .flat_map(|(r, y)| {
            (0..r.len().min(MAX_TRAIN / 2)).map(move |i| (r.row(i), y, r.counts[i] as f64))
        })
        .collect();
    if raw.iter().any(|(x, _, _)| x.iter().any(|v| !v.is_finite())) {
        return None;
    }
    let terms = features(&raw, a.dim)?;
    let d = terms.len();
    let w_total: f64 = raw.iter().map(|r| r.2).sum();
    // The features of every row, once, row after row.
    let mut x: Vec<f64> = Vec::with_capacity(raw.len() * d);
    for (r, _, _) in &raw {
        x.extend(terms.iter().map(|t| t.at(r)));
    }
    let mut mean = vec![0.0; d];
    let mut sd = vec![0.0; d];
    for (row, (_, _, w)) in x.chunks_exact(d).zip(&raw) {
        for j in 0..d {
            mean[j] += w * row[j] / w_total;
        }
    }
    for (row, (_, _, w)) in x.chunks_exact(d).zip(&raw) {
        for j in 0..d {
            sd[j] += w * (row[j] - mean[j]).powi(2) / w_total;
        }
    }
    let sd: Vec<f64> = sd
        .iter()
        .map(|v| if v.sqrt() > 0.0 { v.sqrt() } else { 1.0 })
        .collect();
    // Standardised, with the intercept's 1 last: row i is z[i·e .. (i+1)·e].
    let e = d + 1;
    let mut z: Vec<f64> = Vec::with_capacity(raw.len() * e);
    for row in x.chunks_exact(d) {
        z.extend((0..d).map(|k| (row[k] - mean[k]) / sd[k]));
        z.push(1.0);
    }
    drop(x);
    let labels: Vec<(f64, f64)> = raw.iter().map(|r| (r.1, r.2)).collect();
    let ridge = 1e-6 * w_total;
    let mut beta = DVector::<f64>::zeros(e);
    for _ in 0..50 {
        // The gradient and the Hessian's lower triangle, summed over blocks of rows side by
        // side, then block after block in order: the same sums on any number of threads.
        let parts: Vec<(Vec<f64>, Vec<f64>)> = z
            .par_chunks(BLOCK * e)
            .zip(labels.par_chunks(BLOCK))
            .map(|(zs, ys)| {
                let mut g = vec![0.0; e];
                let mut h = vec![0.0; e * e];
                for (row, (y, w)) in zs.chunks_exact(e).zip(ys) {
                    let eta: f64 = row.iter().zip(beta.iter()).map(|(a, b)| a * b).sum();
                    let p = 1.0 / (1.0 + (-eta).exp());
                    let v = w * p * (1.0 - p);
                    let r = w * (y - p);
                    for k in 0..e {
                        g[k] += r * row[k];
                        let vk = v * row[k];
                        let hk = &mut h[k * e..k * e + k + 1];
                        for (hl, zl) in hk.iter_mut().zip(&row[..=k]) {
                            *hl += vk * zl;
                        }
                    }
                }
                (g, h)
            })
            .collect();
        let mut h = DMatrix::<f64>::zeros(e, e);
        let mut g = DVector::<f64>::zeros(e);
        for (pg, ph) in &parts {
            for k in 0..e {
                g[k] += pg[k];
                for l in 0..=k {
                    h[(k, l)] += ph[k * e + l];
                }
            }
        }
        for k in 0..e {
            for l in 0..k {
                h[(l, k)] = h[(k, l)];
            }
            if k < d {
                h[(k, k)] += ridge;
                g[k] -= ridge * beta[k];
            }
        }
        let step = h.cholesky()?.solve(&g);
        beta += &step;
        if step.amax() < 1e-9 {
            break;
        }
    }
    let weights: Vec<f64> = (0..d).map(|j| beta[j] / sd[j]).collect();
    let offset = beta[d] - (0..d).map(|j| beta[j] * mean[j] / sd[j]).sum::<f64>();
    (weights.iter().all(|w| w.is_finite()) && weights.iter().any(|&w| w != 0.0)).then_some(
        Projection::Linear {
            terms,
            weights,
            offset,
        },
    )
}
