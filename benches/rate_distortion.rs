//! Blahut–Arimoto λ sweeps, single-threaded, for comparison with ../shared/peers/bench_ba.py
//! run in the same session: Hamming distortion, the peer's own source vectors p ∝ Uniform(0.5,
//! 1.5)^M (numpy's default_rng(0) draws, saved in ba_sources.txt), 200 λ in linspace(0.5, 10),
//! each λ from a cold uniform start, stop when the MI changes by less than 10⁻⁸ bits;
//! M = 7, 100, 1000. The total number of iterations of each sweep is printed once (the peer
//! prints its own: equal counts mean equal work).

// A benchmark reports what it measured (iterations per sweep) on stderr.
#![expect(clippy::print_stderr)]

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use dplab::mech::rate_distortion::{blahut_arimoto, Distortion};
use std::hint::black_box;

fn source(m: usize) -> Vec<f64> {
    let text = include_str!("ba_sources.txt");
    let p: Vec<f64> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            l.split_whitespace()
                .map(|v| v.parse().expect("a number"))
                .collect::<Vec<f64>>()
        })
        .find(|v| v.len() == m)
        .expect("a source of this size");
    let s: f64 = p.iter().sum();
    p.into_iter().map(|v| v / s).collect()
}

fn sweep(p: &[f64]) -> (usize, f64) {
    let mut iters = 0;
    let mut acc = 0.0;
    for k in 0..200 {
        let lambda = 0.5 + 9.5 * k as f64 / 199.0;
        let r = blahut_arimoto(p, &Distortion::Hamming, lambda, 1e-8, 1).expect("valid input");
        iters += r.iterations;
        acc += r.mi;
    }
    (iters, acc)
}

/// The same sweep with the λ values spread over all cores, as `dplab run` spreads a λ axis.
fn sweep_parallel(p: &[f64]) -> f64 {
    use rayon::prelude::*;
    (0..200)
        .into_par_iter()
        .map(|k| {
            let lambda = 0.5 + 9.5 * k as f64 / 199.0;
            blahut_arimoto(p, &Distortion::Hamming, lambda, 1e-8, 1)
                .expect("valid input")
                .mi
        })
        .sum()
}

fn ba(c: &mut Criterion) {
    let mut g = c.benchmark_group("blahut_arimoto_sweep_200");
    g.sample_size(10);
    for m in [7usize, 100, 1000] {
        let p = source(m);
        let (iters, _) = sweep(&p);
        eprintln!("M = {m}: {iters} iterations over the 200-λ sweep");
        g.bench_with_input(BenchmarkId::new("one_core", m), &p, |b, p| {
            b.iter(|| black_box(sweep(p)))
        });
        g.bench_with_input(BenchmarkId::new("all_cores", m), &p, |b, p| {
            b.iter(|| black_box(sweep_parallel(p)))
        });
    }
    g.finish();
}

criterion_group!(benches, ba);
criterion_main!(benches);
