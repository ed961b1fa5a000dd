//! Auditing the Laplace mechanism (ε = 1, Δ = 1) through `audit.epsilon`, sampling included:
//! `mechanism.noise` is run on the pair 0 vs 1 in chunks, 10⁵ search draws and 10⁷ validation
//! draws per side (the target: under 5 s on 2 cores). The figure to compare with
//! DP-Sniper's 18 s at 10.7 M draws per side in Python.

use criterion::{criterion_group, criterion_main, Criterion};
use dplab::kind::{rng_from_seed, Ctx, FileSource};
use std::path::Path;

struct NoFiles;

impl FileSource for NoFiles {
    fn file(&self, _: &Path) -> Option<&[u8]> {
        None
    }
}

fn laplace(c: &mut Criterion) {
    let kind = dplab::stages::registry::find("audit.epsilon").unwrap();
    let with: serde_yaml_ng::Value = serde_yaml_ng::from_str(
        "{mechanism: {kind: mechanism.noise, with: {column: value, noise: laplace, epsilon: 1}},
          output: [noisy], claim: {epsilon: 1},
          neighbours: {column: value, relation: l1, pairs: [[[0], [1]]]},
          samples: 10000000, search_samples: 100000}",
    )
    .unwrap();
    let audit = (kind.build)(&with).unwrap_or_else(|e| panic!("{}", e.message));
    let mut g = c.benchmark_group("audit");
    g.sample_size(10);
    g.bench_function("laplace_1e7_per_side", |b| {
        b.iter(|| {
            let mut ctx = Ctx {
                inputs: &[],
                input_names: &[],
                rng: rng_from_seed(1),
                seed: 1,
                files: &NoFiles,
                axis_names: &[],
                stage: "audit",
                label: "",
                axes: &[],
                again: false,
            };
            audit.run(&mut ctx).unwrap()
        })
    });
    g.finish();
}

criterion_group!(benches, laplace);
criterion_main!(benches);
