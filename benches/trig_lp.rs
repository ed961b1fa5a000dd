//! The trigonometric mechanism (Huang 2014): its weight fit `min ‖W u − b‖₁` over the
//! simplex by column generation, single-threaded, for comparison with the peer
//! ../shared/peers/bench_lp.py (HiGHS simplex on the same construction) run in the same
//! session; and one whole synthesis (improved mechanism I) per dataset shape of chapter 3.
//!
//! LP instances follow the peer script: `a_k ~ U[−1, 1]^4` for the C candidate points, the
//! first R basis functions in the thesis's order (total degree, ties reverse lexicographic —
//! [`basis::lowest_order`]), `W[r, k] = φ_r(a_k)`, `b = W u0 + Laplace(0, 0.01)` with
//! `u0 ~ Dirichlet(1)`. Our generator is PCG, not numpy's, so the instances are alike in
//! distribution, not bit-identical. (R, C) = (50, 10⁴), (102, 10⁴), (200, 10⁴).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use dplab::mech::trig::basis;
use dplab::mech::trig::data::Data;
use dplab::mech::trig::ellipsoid::EllipsoidSampler;
use dplab::mech::trig::lp::{l1_simplex_fit, LpOptions};
use dplab::mech::trig::mechanism::{
    improved_trigonometric, Calibration, Exact, Improvement, Privacy, Settings, Synthetic,
};
use dplab::mech::trig::psi::LaplaceScale;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp1};
use rand_pcg::Pcg64Mcg;
use std::hint::black_box;

const D: usize = 4;
const NOISE: f64 = 0.01;

/// Column-major W (column k = the R basis values at point a_k) and b.
fn instance(rows: usize, cols: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    let bases = basis::lowest_order(D, rows as u32, rows).expect("enough basis functions");
    let points: Vec<f64> = (0..cols * D)
        .map(|_| rng.random_range(-1.0f64..=1.0))
        .collect();
    let w = basis::basis_matrix(&bases, &points, D);
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

/// One synthesis of improved mechanism I (ε = 1, σ = 4, R = 50, C = 10⁴, k = 2, 10 PCA
/// iterations, κ = 7) on data of each chapter-3 dataset's shape after cleaning (uniform
/// values: the datasets themselves are not available to a benchmark).
fn synthesis(c: &mut Criterion) {
    let mut g = c.benchmark_group("trig_synthesis_improved_I");
    g.sample_size(10);
    let settings = Settings {
        privacy: Privacy::Pure { epsilon: 1.0 },
        smoothness: 16.0,
        calibration: Calibration::ReplaceOne,
        lattice: true,
        synthetic: Synthetic::Sample { size: None },
        lp: LpOptions::default(),
        exact: Exact::default(),
    };
    let improvement = Improvement {
        bases: 50,
        candidates: 10_000,
        pca_dim: 2,
        pca_iterations: 10,
        kappa: 7.0,
        sampler: EllipsoidSampler::Uniform,
        pca_noise: LaplaceScale::Text,
    };
    for (name, n, d) in [
        ("CRM", 1993, 101),
        ("CSN", 99_762, 8),
        ("CTG", 2126, 27),
        ("PKS", 5875, 19),
        ("WDBC", 569, 30),
    ] {
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        let points: Vec<f64> = (0..n * d).map(|_| rng.random_range(-1.0..=1.0)).collect();
        // One database for every iteration, as a sweep's runs share it: its covariance and
        // exact basis answers are computed by the first run, and the figure is a run's cost.
        let data = Data::new(points, d).unwrap();
        g.bench_function(
            BenchmarkId::from_parameter(format!("{name}_{n}x{d}")),
            |bench| {
                bench.iter(|| {
                    improved_trigonometric(black_box(&data), &settings, &improvement, &mut rng)
                        .unwrap()
                })
            },
        );
    }
    g.finish();
}

criterion_group!(benches, l1_fit, synthesis);
criterion_main!(benches);
