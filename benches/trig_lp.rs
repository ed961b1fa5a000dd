//! The trigonometric mechanism's weight fit, `min ‖W u − b‖₁` over the simplex, by column
//! generation, single-threaded, for comparison with the peer ../shared/peers/bench_lp.py
//! (HiGHS simplex on the same construction) run in the same session.
//!
//! Instances follow the peer script: `a_k ~ U[−1, 1]^4` for the C candidate points, the
//! first R multi-indices of ℕ⁴ by total degree (ties reverse lexicographic),
//! `W[r, k] = Π_j cos(r_j · arccos(a_kj))`, `b = W u0 + Laplace(0, 0.01)` with
//! `u0 ~ Dirichlet(1)`. Our generator is PCG, not numpy's, so the instances are alike in
//! distribution, not bit-identical. (R, C) = (50, 10⁴), (102, 10⁴), (200, 10⁴).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use dplab::mech::trig::lp::{l1_simplex_fit, LpOptions};
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp1};
use rand_pcg::Pcg64Mcg;
use std::hint::black_box;

const D: usize = 4;
const NOISE: f64 = 0.01;

/// First `rows` multi-indices of ℕ^D by total degree, ties in reverse lexicographic order.
fn multi_indices(rows: usize) -> Vec<[usize; D]> {
    let mut out = Vec::new();
    let mut degree = 0;
    while out.len() < rows {
        let mut level: Vec<[usize; D]> = Vec::new();
        let mut idx = [0; D];
        loop {
            if idx.iter().sum::<usize>() == degree {
                level.push(idx);
            }
            let Some(k) = (0..D).rev().find(|&k| idx[k] < degree) else {
                break;
            };
            idx[k] += 1;
            idx[k + 1..].fill(0);
        }
        level.sort_by(|a, b| b.cmp(a));
        out.extend(level);
        degree += 1;
    }
    out.truncate(rows);
    out
}

/// Column-major W (column k = the R basis values at point a_k) and b.
fn instance(rows: usize, cols: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    let index = multi_indices(rows);
    let mut w = Vec::with_capacity(rows * cols);
    for _ in 0..cols {
        let theta: Vec<f64> = (0..D)
            .map(|_| rng.random_range(-1.0f64..=1.0).acos())
            .collect();
        w.extend(index.iter().map(|r| {
            r.iter()
                .zip(&theta)
                .map(|(&k, t)| (k as f64 * t).cos())
                .product::<f64>()
        }));
    }
    let gamma: Vec<f64> = (0..cols).map(|_| Exp1.sample(&mut rng)).collect();
    let total: f64 = gamma.iter().sum();
    let mut b = vec![0.0; rows];
    for (col, g) in w.chunks_exact(rows).zip(&gamma) {
        for (bi, x) in b.iter_mut().zip(col) {
            *bi += g / total * x;
        }
    }
    for bi in &mut b {
        let e: f64 = Exp1.sample(&mut rng);
        *bi += if rng.random::<bool>() { e } else { -e } * NOISE;
    }
    (w, b)
}

fn l1_fit(c: &mut Criterion) {
    let mut g = c.benchmark_group("trig_lp_column_generation");
    let opts = LpOptions::default();
    for (rows, cols, samples) in [(50, 10_000, 20), (102, 10_000, 10), (200, 10_000, 10)] {
        let (w, b) = instance(rows, cols, 0);
        g.sample_size(samples);
        g.bench_with_input(
            BenchmarkId::from_parameter(format!("R{rows}_C{cols}")),
            &(w, b),
            |bench, (w, b)| {
                bench.iter(|| l1_simplex_fit(black_box(w), rows, black_box(b), &opts).unwrap())
            },
        );
    }
    g.finish();
}

criterion_group!(benches, l1_fit);
criterion_main!(benches);
