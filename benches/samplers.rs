//! Sampler throughput, single-threaded, for comparison with the peers in ../shared/peers
//! (bench_noise.py, bench_expmech.py) run in the same session.
//!
//! - Laplace / Gaussian: 10^7 draws into a preallocated buffer (numpy: `rng.laplace(0, 1, 10**7)`).
//! - Geometric (discrete Laplace): 10^6 draws.
//! - Exponential mechanism: 10^4 draws from one utility vector, including the softmax and the
//!   cumulative table (numpy: `rng.choice(R, size=10**4, p=softmax)`), |R| = 10^3 and 10^6,
//!   utilities U[0, 10] as in the peer script, ε = Δu = 1.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use dplab::mech::exponential::ExponentialMechanism;
use dplab::mech::gaussian::Gaussian;
use dplab::mech::geometric::Geometric;
use dplab::mech::laplace::Laplace;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use std::hint::black_box;

fn noise(c: &mut Criterion) {
    let n = 10_000_000;
    let mut buf = vec![0.0; n];
    let mut g = c.benchmark_group("noise");
    g.throughput(Throughput::Elements(n as u64));
    g.sample_size(20);
    let mut rng = Pcg64Mcg::seed_from_u64(1);
    let lap = Laplace::new(1.0).unwrap();
    g.bench_function("laplace_fill_1e7", |b| {
        b.iter(|| lap.fill(&mut rng, black_box(&mut buf)))
    });
    let gauss = Gaussian::new(1.0).unwrap();
    g.bench_function("gaussian_fill_1e7", |b| {
        b.iter(|| gauss.fill(&mut rng, black_box(&mut buf)))
    });
    g.finish();
    let mut g = c.benchmark_group("noise_discrete");
    let m = 1_000_000;
    g.throughput(Throughput::Elements(m as u64));
    let geo = Geometric::for_privacy(1.0, 1.0).unwrap();
    g.bench_function("geometric_1e6", |b| {
        b.iter(|| (0..m).map(|_| geo.sample(&mut rng)).sum::<i64>())
    });
    g.finish();
}

fn exponential_mechanism(c: &mut Criterion) {
    let mut g = c.benchmark_group("exponential_mechanism_1e4_draws");
    g.sample_size(20);
    for r in [1_000usize, 1_000_000] {
        let mut init = Pcg64Mcg::seed_from_u64(42);
        let u: Vec<f64> = (0..r).map(|_| init.random::<f64>() * 10.0).collect();
        let mut rng = Pcg64Mcg::seed_from_u64(2);
        let mut out = vec![0usize; 10_000];
        g.bench_with_input(BenchmarkId::from_parameter(r), &u, |b, u| {
            b.iter(|| {
                let em = ExponentialMechanism::new(u, 1.0, 1.0).unwrap();
                em.sample_into(&mut rng, &mut out);
                black_box(&out);
            })
        });
        g.bench_with_input(BenchmarkId::new("construction_only", r), &u, |b, u| {
            b.iter(|| ExponentialMechanism::new(u, 1.0, 1.0).unwrap())
        });
    }
    g.finish();
}

criterion_group!(benches, noise, exponential_mechanism);
criterion_main!(benches);
