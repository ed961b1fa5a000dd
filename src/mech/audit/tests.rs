use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;

use super::bound::{clopper_pearson_lower, clopper_pearson_upper};
use super::event::{Event, Feature, Projection};
use super::keep::Claim;
use super::*;
use crate::mech::exponential::ExponentialMechanism;
use crate::mech::laplace::Laplace;

/// One-sided Clopper–Pearson bounds (n, k, α, lower, upper), computed independently with
/// scipy 1.17.1 (`pip install scipy`), by:
///
/// ```text
/// from scipy.stats import beta
/// lo = 0.0 if k == 0 else beta.ppf(a, k, n-k+1)
/// hi = 1.0 if k == n else beta.ppf(1-a, k+1, n-k)
/// ```
const SCIPY: &[(u64, u64, f64, f64, f64)] = &[
    (10, 0, 0.025, 0.0, 0.3084971078187607),
    (10, 1, 0.025, 0.0025285785444617848, 0.4450161170281954),
    (10, 5, 0.025, 0.18708602844739855, 0.8129139715526015),
    (10, 10, 0.025, 0.6915028921812392, 1.0),
    (100, 3, 0.05, 0.008225829107652688, 0.07571079374983004),
    (1000, 0, 0.025, 0.0, 0.003682083896865671),
    (1000, 1000, 0.025, 0.9963179161031344, 1.0),
    (
        1000000,
        500000,
        0.025,
        0.49901951919531184,
        0.5009804808046882,
    ),
    (
        10000000,
        1,
        0.0125,
        1.2578782198948833e-09,
        6.380923981619189e-07,
    ),
    (50, 49, 0.001, 0.8297984734498509, 0.9999799901935271),
];

#[test]
fn clopper_pearson_matches_scipy() {
    for &(n, k, a, lo, hi) in SCIPY {
        let (l, h) = (
            clopper_pearson_lower(k, n, a),
            clopper_pearson_upper(k, n, a),
        );
        // statrs' incomplete beta is good to ~1.5e-8 relative at n = 10⁷, k = 1 (the others agree to 1e-12).
        let close = |x: f64, y: f64| (x - y).abs() <= 1e-7 * y.abs() || x == y;
        assert!(close(l, lo), "n {n} k {k} α {a}: lower {l}, scipy {lo}");
        assert!(close(h, hi), "n {n} k {k} α {a}: upper {h}, scipy {hi}");
    }
}

/// ε_LB is ln(LCB/UCB) with each bound at half the error; no evidence gives 0; δ lowers it.
#[test]
fn the_bound_takes_both_bounds_at_half_the_error_and_delta_off_p1() {
    let (lo, hi) = (
        clopper_pearson_lower(600, 1000, 0.025),
        clopper_pearson_upper(300, 1000, 0.025),
    );
    assert_eq!(
        epsilon_lower_bound(600, 1000, 300, 1000, 0.0, 0.95),
        (lo / hi).ln()
    );
    assert_eq!(
        epsilon_lower_bound(600, 1000, 300, 1000, 0.1, 0.95),
        ((lo - 0.1) / hi).ln()
    );
    assert_eq!(epsilon_lower_bound(300, 1000, 300, 1000, 0.0, 0.95), 0.0);
    assert_eq!(epsilon_lower_bound(0, 1000, 0, 1000, 0.0, 0.95), 0.0);
}

/// Chunk `d`'s generator in these tests: from the test's seed and the chunk's stream alone.
fn rng(seed: u64, d: Draw) -> Pcg64Mcg {
    Pcg64Mcg::seed_from_u64(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ d.stream())
}

fn plan(pairs: usize, search: u64, samples: u64, searches: Searches) -> Plan {
    Plan {
        inputs: (0..pairs).map(|p| [2 * p, 2 * p + 1]).collect(),
        search_samples: search,
        samples,
        chunk: 1 << 14,
        confidence: 0.95,
        points: vec![(0.0, 0.0)],
        searches,
        waits: false,
    }
}

/// An audit of the mechanism whose release on side `side` of pair `pair` is `release(pair,
/// side, rng)` (a vector of `dim` numbers).
fn audit_of(
    plan: &Plan,
    seed: u64,
    dim: usize,
    release: impl Fn(usize, usize, &mut Pcg64Mcg) -> Vec<f64> + Sync,
) -> Finding {
    let found = audit::<()>(plan, |d| {
        let mut r = rng(seed, d);
        let mut values = Vec::with_capacity(d.n as usize * dim);
        for _ in 0..d.n {
            values.extend(release(d.pair, d.side, &mut r));
        }
        Ok(Releases::draws(dim, values))
    });
    found.unwrap().expect("a search applies")
}

const SCALAR: Searches = Searches {
    discrete: false,
    scalar: true,
    linear: false,
    support: false,
    bits: false,
};

/// The Laplace mechanism on a counting query (Δ = 1), inputs 0 and 1, noise of `scale`.
fn laplace(scale: f64) -> impl Fn(usize, usize, &mut Pcg64Mcg) -> Vec<f64> + Sync {
    let l = Laplace::new(scale).unwrap();
    move |_, side, r| vec![side as f64 + l.sample(r)]
}

/// The power check of Tumult's test suite: with 2·10⁴ search and 2·10⁵ validation draws per
/// side, the correct Laplace mechanism is not flagged at ε ∈ {0.1, 1}, and one with 0.7× the
/// noise scale (true ε = ε/0.7) is, at both. (At ε = 0.1 the best event, `noisy ≥ 1`, has
/// p = ½ against ½e^(−0.143): the bounds' half-widths, ≈ 0.0025 each, leave ε_LB ≈ 0.13.)
#[test]
fn correct_laplace_passes_and_0_7_times_its_scale_is_flagged() {
    for (i, eps) in [0.1, 1.0].into_iter().enumerate() {
        let p = plan(1, 20_000, 200_000, SCALAR);
        let good = audit_of(&p, 11 + i as u64, 1, laplace(1.0 / eps));
        assert!(
            good.epsilon_lb <= eps,
            "ε {eps}: correct Laplace flagged: {good:?}"
        );
        assert!(good.epsilon_lb > 0.5 * eps, "ε {eps}: no power: {good:?}");
        let bad = audit_of(&p, 21 + i as u64, 1, laplace(0.7 / eps));
        assert!(
            bad.epsilon_lb > eps,
            "ε {eps}: 0.7× scale not flagged: {bad:?}"
        );
        assert!(
            bad.epsilon_lb <= eps / 0.7,
            "ε {eps}: above the truth: {bad:?}"
        );
    }
}

/// (b) The scalar search on its own finds Laplace with scale ε instead of Δ/ε (claimed ε =
/// 0.5: scale 0.5, true ε = 2), and writes the event in words.
#[test]
fn scalar_search_flags_scale_epsilon_instead_of_delta_over_epsilon() {
    let f = audit_of(&plan(1, 20_000, 100_000, SCALAR), 3, 1, laplace(0.5));
    assert!(f.epsilon_lb > 1.5 && f.epsilon_lb <= 2.0, "{f:?}");
    let text = f
        .event
        .describe(&|_| "noisy".into(), &|_, v| crate::text::significant(v, 4));
    assert!(
        text.starts_with("noisy") || text.contains("≤ noisy <"),
        "{text}"
    );
}

/// (a) The discrete search on its own flags the naive exponential mechanism, Pr ∝ exp(εu/Δ),
/// which is only 2ε-DP: at ε = 1 with 10 candidates and utilities [1, 0, …] against [0, 1, …]
/// (StatDP's "one below, rest above" from the first pair's view) the true loss of outcome r0
/// is ln(e·(1 + 9e)/(e + 9)) = 1.776; the correct exponential mechanism, exp(εu/2Δ), is not
/// flagged on the same pairs.
#[test]
fn discrete_search_flags_the_naive_exponential_mechanism() {
    let discrete = Searches {
        discrete: true,
        scalar: false,
        linear: false,
        support: false,
        bits: false,
    };
    let x = [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
    let x2 = [0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
    let mech = |coef: f64| {
        let m = [
            ExponentialMechanism::with_coefficient(&x, coef).unwrap(),
            ExponentialMechanism::with_coefficient(&x2, coef).unwrap(),
        ];
        move |_: usize, side: usize, r: &mut Pcg64Mcg| vec![m[side].sample(r) as f64]
    };
    let p = plan(1, 50_000, 500_000, discrete);
    let naive = audit_of(&p, 5, 1, mech(1.0));
    assert!(
        naive.epsilon_lb > 1.0 && naive.epsilon_lb <= 1.776,
        "{naive:?}"
    );
    let text = naive
        .event
        .describe(&|_| "candidate".into(), &|_, v| format!("r{v}"));
    assert!(text.starts_with("candidate ∈ {r0"), "{text}");
    let correct = audit_of(&p, 6, 1, mech(0.5));
    assert!(
        correct.epsilon_lb <= 1.0 && correct.epsilon_lb > 0.5,
        "{correct:?}"
    );
}

/// (c) Per-coordinate events find one leaky coordinate in a vector release: 4 answers, each
/// moved by at most 1, claimed 1-DP with Laplace noise of scale 4 (right for the four
/// together), but coordinate 2 gets scale 0.5 (a loss of 2 on its own). The pair moves
/// every answer (StatDP's "all above").
#[test]
fn per_coordinate_search_finds_a_leaky_coordinate() {
    let (wide, narrow) = (Laplace::new(4.0).unwrap(), Laplace::new(0.5).unwrap());
    let leaky = move |_: usize, side: usize, r: &mut Pcg64Mcg| {
        (0..4)
            .map(|j| {
                side as f64
                    + if j == 2 {
                        narrow.sample(r)
                    } else {
                        wide.sample(r)
                    }
            })
            .collect::<Vec<f64>>()
    };
    let f = audit_of(&plan(1, 20_000, 100_000, SCALAR), 8, 4, leaky);
    assert!(f.epsilon_lb > 1.5, "{f:?}");
    assert!(
        matches!(
            f.event,
            Event::Range {
                projection: Projection::Coordinate(2),
                ..
            }
        ),
        "{f:?}"
    );
}

/// (c) The linear score finds a loss no single coordinate shows: 8 answers, all moved by 1,
/// claimed 1-DP under "each answer moved by at most 1" but each with Gaussian noise of σ = 1
/// (a per-coordinate loss that would need σ ≈ 8 for the eight together). Each coordinate on
/// its own separates the inputs with a shift of 1σ; the sum, with a shift of √8 σ, much more:
/// the linear search flags it, and bounds it higher than the per-coordinate search does.
#[test]
fn linear_score_finds_a_loss_spread_over_coordinates() {
    use rand_distr::{Distribution, Normal};
    let n = Normal::new(0.0, 1.0).unwrap();
    let spread = move |_: usize, side: usize, r: &mut Pcg64Mcg| {
        (0..8)
            .map(|_| side as f64 + n.sample(r))
            .collect::<Vec<f64>>()
    };
    let linear = Searches {
        discrete: false,
        scalar: false,
        linear: true,
        support: false,
        bits: false,
    };
    let f = audit_of(&plan(1, 20_000, 100_000, linear), 9, 8, spread);
    assert!(f.epsilon_lb > 1.0, "{f:?}");
    let per_coordinate = audit_of(&plan(1, 20_000, 100_000, SCALAR), 9, 8, spread);
    assert!(
        per_coordinate.epsilon_lb < f.epsilon_lb,
        "{per_coordinate:?} vs {f:?}"
    );
    let Event::Range {
        projection: Projection::Linear { weights, .. },
        ..
    } = &f.event
    else {
        panic!("{f:?}")
    };
    // The score weighs the coordinates alike (they are exchangeable).
    let (lo, hi) = weights.iter().fold((f64::MAX, f64::MIN), |(a, b), &w| {
        (a.min(w.abs()), b.max(w.abs()))
    });
    assert!(hi < 1.5 * lo, "{weights:?}");
}

/// The search keeps the best of all pairs, and the result is the same, bit for bit, on 1 and
/// on 3 threads (each chunk has its own stream; counts are sums of integers).
#[test]
fn the_best_pair_is_chosen_and_threads_change_nothing() {
    let l = Laplace::new(1.0).unwrap();
    // Pair 0 differs by 0.1, pair 1 by 1: pair 1 separates better.
    let shift = [0.1, 1.0];
    let release = move |pair: usize, side: usize, r: &mut Pcg64Mcg| {
        vec![side as f64 * shift[pair] + l.sample(r)]
    };
    let p = Plan {
        chunk: 1000,
        ..plan(2, 10_000, 50_000, Searches::ALL)
    };
    let on = |threads: usize| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| audit_of(&p, 1, 1, release))
    };
    let (one, three) = (on(1), on(3));
    assert_eq!(one.pair, 1);
    assert_eq!(
        (one.k1, one.k2, one.epsilon_lb.to_bits(), &one.event),
        (three.k1, three.k2, three.epsilon_lb.to_bits(), &three.event)
    );
}

/// A mechanism whose draws wait on another process draws on the audit's own threads, never on
/// rayon's global workers (which the search keeps), and finds what it finds on them.
#[test]
fn waiting_draws_run_on_threads_of_their_own_and_change_nothing() {
    let l = Laplace::new(1.0).unwrap();
    let release = move |_: usize, side: usize, r: &mut Pcg64Mcg| vec![side as f64 + l.sample(r)];
    let plain = Plan {
        chunk: 1000,
        ..plan(2, 10_000, 50_000, Searches::ALL)
    };
    let waiting = Plan {
        waits: true,
        ..plain.clone()
    };
    let threads = std::sync::Mutex::new(std::collections::BTreeSet::new());
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .thread_name(|i| format!("global-{i}"))
        .build()
        .unwrap();
    let (a, b) = pool.install(|| {
        let a = audit_of(&plain, 1, 1, release);
        let b = audit_of(&waiting, 1, 1, |pair, side, r| {
            let name = std::thread::current().name().unwrap_or("").to_string();
            threads.lock().unwrap().insert(name);
            release(pair, side, r)
        });
        (a, b)
    });
    let threads = threads.into_inner().unwrap();
    assert!(
        !threads.is_empty() && threads.iter().all(|t| t.starts_with("audit-draw-")),
        "drawn on {threads:?}"
    );
    assert_eq!(
        (a.pair, a.k1, a.k2, a.epsilon_lb.to_bits(), &a.event),
        (b.pair, b.k1, b.k2, b.epsilon_lb.to_bits(), &b.event)
    );
}

/// The discrete search leaves continuous outputs alone: with 5000 draws a side, every draw its
/// own outcome, a set of side 0's outcomes would score ln(0.9993/0.00074) ≈ 7 on the search
/// split and hold nothing on the validation split (an external program's Laplace noise,
/// printed to 17 digits, did exactly that before this rule).
#[test]
fn the_discrete_search_leaves_continuous_outputs_alone() {
    let discrete = Searches {
        discrete: true,
        scalar: false,
        linear: false,
        support: false,
        bits: false,
    };
    let l = Laplace::new(1.0).unwrap();
    let draws = |side: f64, r: &mut Pcg64Mcg| {
        Releases::draws(1, (0..5000).map(|_| side + l.sample(r)).collect())
    };
    let mut r = Pcg64Mcg::seed_from_u64(4);
    let (a, b) = (draws(0.0, &mut r), draws(1.0, &mut r));
    assert!(search::best(&a, &b, discrete, 0.0, 0.95).is_none());
    assert!(search::best(&a, &b, SCALAR, 0.0, 0.95).is_some());
}

/// A histogram of releases (a count per outcome) is audited like the draws it stands for.
#[test]
fn counted_releases_count_as_their_draws() {
    let r = Releases {
        dim: 1,
        values: vec![0.0, 1.0, 2.0],
        counts: vec![5, 7, 11],
    };
    assert_eq!(r.rows().total(), 23);
    assert_eq!(r.count_in(&Event::outcomes(vec![vec![1.0], vec![2.0]])), 18);
    let ge = Event::Range {
        projection: Projection::Coordinate(0),
        lo: 1.0,
        hi: f64::INFINITY,
    };
    assert_eq!(r.count_in(&ge), 18);
    assert_eq!(
        ge.describe(&|_| "noisy".into(), &|_, v| v.to_string()),
        "noisy ≥ 1"
    );
    // A long set is listed in part, with its size.
    let many = Event::outcomes((0..20).map(|i| vec![i as f64]).collect());
    assert_eq!(
        many.describe(&|_| "k".into(), &|_, v| v.to_string()),
        "k ∈ {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, … (20 outcomes)}"
    );
    // −0 and 0 are one outcome.
    assert!(Event::outcomes(vec![vec![0.0]]).contains(&[-0.0]));
}

/// An event too rare for a small validation split is not chosen for it: side 0 has 30 of 10⁴
/// search draws on outcome 1 where side 1 has none (a bound of ~1.7 on the search split), and
/// 6000 against 3970 on outcome 2. With 10⁵ validation draws the rare outcome alone is the
/// event; with 10³ (where it would be seen about 3 times and give a bound of 0) the set of
/// both is, whose bound at 10³ draws is above 0.
#[test]
fn an_event_too_rare_for_the_validation_split_is_not_chosen() {
    let discrete = Searches {
        discrete: true,
        scalar: false,
        linear: false,
        support: false,
        bits: false,
    };
    let a = Releases {
        dim: 1,
        values: vec![1.0, 2.0, 3.0],
        counts: vec![30, 6000, 3970],
    };
    let b = Releases {
        dim: 1,
        values: vec![1.0, 2.0, 3.0],
        counts: vec![0, 3970, 6030],
    };
    let outcomes = |v: u64| match search::best_for(
        &a,
        &b,
        discrete,
        Claim {
            points: &[(0.0, 0.0)],
            confidence: 0.95,
            validation: v,
            bounds: &super::keep::Bounds::default(),
        },
    )
    .unwrap()
    .event
    {
        Event::Outcomes { outcomes, .. } => outcomes,
        e => panic!("{e:?}"),
    };
    assert_eq!(outcomes(100_000), [vec![1.0]]);
    assert_eq!(outcomes(1000), [vec![1.0], vec![2.0]]);
    // What the rare outcome would give at 10³ validation draws: 3 against 0.
    assert_eq!(super::epsilon_lower_bound(3, 1000, 0, 1000, 0.0, 0.95), 0.0);
    assert!(super::epsilon_lower_bound(603, 1000, 397, 1000, 0.0, 0.95) > 0.2);
}

/// (d) The support search on its own flags the textbook Laplace sampler fed a 24-bit uniform
/// (a single-precision one, as numpy's `random(dtype=float32)`): its outputs on 0 and on 1 are
/// two sparse sets that (almost) never meet, so an output set drawn under 0 measures p₂ = 0
/// under 1 and the bound is far above ε = 1. The same sampler with a 53-bit uniform is not
/// flagged: its outcomes never repeat, and the cross-fitted score finds nothing to choose.
#[test]
fn support_search_flags_a_single_precision_laplace_sampler() {
    let support = Searches {
        discrete: false,
        scalar: false,
        linear: false,
        support: true,
        bits: false,
    };
    let textbook = |bits: u32| {
        move |_: usize, side: usize, r: &mut Pcg64Mcg| {
            let mut u = 0.0f64;
            while u == 0.0 {
                u = (r.random::<u64>() >> (64 - bits)) as f64 * 2f64.powi(-(bits as i32));
            }
            let v = u - 0.5;
            vec![side as f64 - v.signum() * (1.0 - 2.0 * v.abs()).ln()]
        }
    };
    let p = plan(1, 60_000, 200_000, support);
    let single = audit_of(&p, 5, 1, textbook(24));
    assert!(single.epsilon_lb > 3.0, "{single:?}");
    assert_eq!(single.k2, 0, "{single:?}");
    let found = audit::<()>(&p, |d| {
        let mut r = rng(6, d);
        let f = textbook(53);
        let values = (0..d.n).flat_map(|_| f(d.pair, d.side, &mut r)).collect();
        Ok(Releases::draws(1, values))
    })
    .unwrap();
    assert!(
        found.as_ref().is_none_or(|f| f.epsilon_lb == 0.0),
        "{found:?}"
    );
    // Where the discrete search applies (few outcomes), the support search stands aside.
    let geometric = audit::<()>(&p, |d| {
        let mut r = rng(7, d);
        let values = (0..d.n)
            .map(|_| d.side as f64 + (r.random::<u64>() % 5) as f64)
            .collect();
        Ok(Releases::draws(1, values))
    })
    .unwrap();
    assert!(geometric.is_none(), "{geometric:?}");
}

/// A broken sparse-vector release in the shape of DP-Sniper's suite (Lyu, Su & Li 2017,
/// Algorithm 3's kind): 10 queries answering 0 on side 0 and 1 on side 1, noise Laplace(2/ε)
/// on the threshold 0, and the *noisy answer* released when it is above the noisy threshold,
/// else the code −1000; after c = 1 answer above, −2000. Claimed ε = 0.1-DP, but the answers
/// get noise of scale 2.5, so a released answer alone loses 0.4.
fn sparse_vector(pair: usize, side: usize, r: &mut Pcg64Mcg) -> Vec<f64> {
    let _ = pair;
    let on_threshold = Laplace::new(2.0 / 0.1).unwrap();
    let on_answers = Laplace::new(2.5).unwrap();
    let threshold = on_threshold.sample(r);
    let mut above = 0;
    (0..10)
        .map(|_| {
            if above >= 1 {
                return -2000.0;
            }
            let v = side as f64 + on_answers.sample(r);
            if v >= threshold {
                above += 1;
                v
            } else {
                -1000.0
            }
        })
        .collect()
}

/// The features of a release with codes (see the search module's doc): a coordinate holding
/// noisy values and the labels −1000 / −2000 keeps a value feature that reads the others'
/// mean for the labels, and gets an indicator per label; labels several coordinates hold get
/// a count; a coordinate of two codes only (0/1) one indicator and no value feature.
#[test]
fn codes_become_indicator_and_count_features() {
    let mut r = Pcg64Mcg::seed_from_u64(11);
    let mut side = |s: usize| {
        let releases: Vec<Vec<f64>> = (0..4000)
            .map(|i| {
                let mut x = sparse_vector(0, s, &mut r);
                x.push(((i + s) % 2) as f64);
                x
            })
            .collect();
        Releases::draws(11, releases.concat())
    };
    let (a, b) = (side(0), side(1));
    let Some(Projection::Linear { terms, .. }) = search::logistic_for_tests(&a, &b) else {
        panic!("no score");
    };
    let value = |j: usize| {
        terms.iter().find_map(|t| match t {
            Feature::Value { j: k, labels, fill } if *k == j => Some((labels.clone(), *fill)),
            _ => None,
        })
    };
    // The first answer is never after the cutoff: −1000 only.
    assert_eq!(value(0).expect("coordinate 0 keeps its value").0, [-1000.0]);
    let (labels, fill) = value(1).expect("coordinate 1 keeps its value");
    assert_eq!(labels, [-2000.0, -1000.0], "{terms:?}");
    assert!(
        fill.abs() < 100.0,
        "the labels' place holds the values' mean, not a label: {fill}"
    );
    for code in [-2000.0, -1000.0] {
        assert!(terms.contains(&Feature::Is { j: 1, code }), "{terms:?}");
        assert!(terms.contains(&Feature::Count { code }), "{terms:?}");
    }
    // The 0/1 coordinate: one indicator (the other is the intercept), no value feature.
    let of10: Vec<&Feature> = terms
        .iter()
        .filter(|t| matches!(t, Feature::Value { j: 10, .. } | Feature::Is { j: 10, .. }))
        .collect();
    assert_eq!(of10, [&Feature::Is { j: 10, code: 1.0 }], "{terms:?}");
}

/// Chosen on one half of the search split and scored on the other: when the two inputs give
/// the same distribution (nothing to find), what the audit reports of its choice is an honest
/// estimate — the score on the half that chose nothing is 0 or near it, never the flattering
/// bound of the best of thousands of candidates on the draws that picked it — and the
/// validation bound is 0.
#[test]
fn the_chosen_event_is_scored_on_draws_that_did_not_choose_it() {
    let same = |_: usize, _: usize, r: &mut Pcg64Mcg| {
        let l = Laplace::new(1.0).unwrap();
        (0..6).map(|_| l.sample(r)).collect::<Vec<f64>>()
    };
    for seed in 0..3 {
        let found = audit::<()>(&plan(1, 20_000, 20_000, Searches::ALL), |d| {
            let mut r = rng(seed, d);
            let values = (0..d.n)
                .flat_map(|_| same(d.pair, d.side, &mut r))
                .collect();
            Ok(Releases::draws(6, values))
        })
        .unwrap();
        if let Some(f) = found {
            assert!(f.search_score < 0.1, "{f:?}");
            assert!(f.epsilon_lb < 0.1, "{f:?}");
            assert_eq!(f.search_n, 10_000, "{f:?}");
        }
    }
}

/// The issue's test: more draws never lower the bound by more than its confidence allows. The
/// broken sparse vector above, audited with 10⁶ search draws (the kind's largest default) and
/// 10⁶ then 10⁷ validation draws per side, on two seeds: the bound at 10⁷ is never below the
/// bound at 10⁶ by more than that bound's own distance to its plug-in estimate ln(p̂₁/p̂₂) —
/// the width its 95 % confidence gives it — and both flag the claim ε = 0.1. (Scored for the
/// validation size only where that is the smaller split, the choice does not move with more
/// validation draws; with the old scoring a rarer event could be chosen and measure worse.)
#[test]
fn more_draws_never_lower_the_bound_beyond_its_confidence() {
    for seed in [1, 2] {
        let at = |n: u64| {
            let p = Plan {
                chunk: 1 << 17,
                ..plan(1, 1_000_000, n, Searches::ALL)
            };
            audit_of(&p, seed, 10, sparse_vector)
        };
        let (small, large) = (at(1_000_000), at(10_000_000));
        let width = (small.p1() / small.p2()).ln() - small.epsilon_lb;
        assert!(small.epsilon_lb > 0.1, "seed {seed}: {small:?}");
        assert!(large.epsilon_lb > 0.1, "seed {seed}: {large:?}");
        assert!(
            large.epsilon_lb >= small.epsilon_lb - width,
            "seed {seed}: 10⁶ {small:?}\n10⁷ {large:?}"
        );
    }
}

/// `detectable`: the loss at which the measured event would have been flagged — above the
/// claim, flagged there by construction, and smaller with more draws for the same p₂.
#[test]
fn detectable_says_what_these_draws_could_have_flagged() {
    let finding = |k2: u64, n: u64| Finding {
        pair: 0,
        forward: true,
        event: Event::outcomes(vec![vec![1.0]]),
        epsilon: 0.1,
        delta: 0.0,
        samples: n,
        k1: k2,
        k2,
        epsilon_lb: 0.0,
        delta_lb: 0.0,
        search_k1: 0,
        search_k2: 0,
        search_n: 0,
        search_score: 0.0,
    };
    let (few, many) = (finding(1_000, 1_000_000), finding(10_000, 10_000_000));
    let (d_few, d_many) = (
        detectable(&few, 0.1, 0.0, 0.95).unwrap(),
        detectable(&many, 0.1, 0.0, 0.95).unwrap(),
    );
    assert!(d_few > d_many && d_many > 0.1, "{d_few} {d_many}");
    let p1 = |eps: f64| ((eps.exp() * 1e-3) * 1e6).round() as u64;
    assert!(epsilon_lower_bound(p1(d_few), 1_000_000, 1_000, 1_000_000, 0.0, 0.95) > 0.1);
    assert!(epsilon_lower_bound(p1(d_few - 0.01), 1_000_000, 1_000, 1_000_000, 0.0, 0.95) <= 0.1);
    // An event so common that no loss could be seen beyond the claim: none.
    assert_eq!(
        detectable(&finding(950_000, 1_000_000), 0.1, 0.0, 0.95),
        None
    );
}

/// An input that several pairs hold (StatDP's x = (1, …, 1)) has its search split drawn once,
/// where it first appears, and every pair that holds it searches those draws: no search chunk
/// is asked of a later pair for it, and the finding is the one the pair would give alone when
/// it comes first.
#[test]
fn an_input_several_pairs_hold_is_drawn_once() {
    use std::sync::Mutex;
    let p = Plan {
        // Pair 0: inputs 0 vs 1; pair 1: 0 vs 2 (input 0 again); pair 2: 3 vs 0.
        inputs: vec![[0, 1], [0, 2], [3, 0]],
        ..plan(3, 8_000, 20_000, SCALAR)
    };
    let asked = Mutex::new(Vec::new());
    let l = Laplace::new(1.0).unwrap();
    let found = audit::<()>(&p, |d| {
        if d.split == Split::Search {
            asked.lock().unwrap().push((d.pair, d.side, d.chunk));
        }
        let mut r = rng(5, d);
        // Input 0 releases around 0, the others around their number.
        let input = p.inputs[d.pair][d.side] as f64;
        Ok(Releases::draws(
            1,
            (0..d.n).map(|_| input + l.sample(&mut r)).collect(),
        ))
    })
    .unwrap()
    .expect("a search applies");
    let mut asked = asked.into_inner().unwrap();
    asked.sort_unstable();
    // One chunk per side (8 000 draws): input 0 at (0, 0) only, once; 1 at (0, 1), 2 at
    // (1, 1), 3 at (2, 0).
    assert_eq!(asked, [(0, 0, 0), (0, 1, 0), (1, 1, 0), (2, 0, 0)]);
    // The pair of the inputs furthest apart (3 vs 0) is the one that separates them best.
    assert_eq!(found.pair, 2, "{found:?}");
}

/// The confidence, by simulation: mechanisms that keep their claim exactly are flagged in at
/// most (1 − confidence) of many seeded audits, curves as points. A Gaussian of σ = 1 at
/// Δ = 1 is exactly 1-GDP, audited along the whole GDP curve (the search picks the point);
/// the Laplace mechanism is exactly ε-DP; and "with probability δ release the input, else
/// randomised response" is exactly (ε, δ)-DP at its one point. 150 audits each at 90 %
/// confidence: at most 15 flags may pass as chance, and Clopper–Pearson is conservative, so
/// there are far fewer.
#[test]
fn tight_claims_are_flagged_at_most_as_often_as_the_confidence_allows() {
    use crate::mech::privacy::Privacy;
    use rand_distr::{Distribution, StandardNormal};
    const AUDITS: u64 = 150;
    let searches = Searches {
        discrete: true,
        scalar: true,
        linear: false,
        support: false,
        bits: false,
    };
    let plan_for = |points: Vec<(f64, f64)>| Plan {
        inputs: vec![[0, 1]],
        search_samples: 4_000,
        samples: 20_000,
        chunk: 1 << 12,
        confidence: 0.9,
        points,
        searches,
        waits: false,
    };
    let (eps, delta) = (0.5f64, 0.05f64);
    let keep = (eps.exp() / (1.0 + eps.exp())) * (1.0 - delta);
    type Release = Box<dyn Fn(usize, usize, &mut Pcg64Mcg) -> Vec<f64> + Sync>;
    let cases: Vec<(&str, Plan, Release)> = vec![
        (
            "1-GDP Gaussian",
            plan_for(Privacy::Gdp { mu: 1.0 }.points(None)),
            Box::new(|_, side, r: &mut Pcg64Mcg| {
                let z: f64 = StandardNormal.sample(r);
                vec![side as f64 + z]
            }),
        ),
        (
            "ε-DP Laplace",
            plan_for(vec![(1.0, 0.0)]),
            Box::new(laplace(1.0)),
        ),
        (
            "(ε, δ) randomised response",
            plan_for(vec![(eps, delta)]),
            Box::new(move |_, side, r: &mut Pcg64Mcg| {
                let u: f64 = r.random();
                let out = if u < delta {
                    2.0 + side as f64
                } else if u < delta + keep {
                    side as f64
                } else {
                    1.0 - side as f64
                };
                vec![out]
            }),
        ),
    ];
    for (name, plan, release) in &cases {
        let flagged = (0..AUDITS)
            .filter(|&seed| {
                let f = audit_of(plan, 1000 + seed, 1, release);
                f.epsilon_lb > f.epsilon
            })
            .count() as u64;
        assert!(
            flagged <= AUDITS / 10,
            "{name}: flagged in {flagged} of {AUDITS} audits at 90 % confidence"
        );
    }
}

/// A curve claim that does not hold is flagged: the Gaussian of σ = 1 at Δ = 2 is 2-GDP,
/// audited as 1-GDP, at a point the search chose (not the claim's δ = 0 end).
#[test]
fn a_curve_claim_that_fails_is_flagged_at_a_point_of_its_curve() {
    use crate::mech::privacy::Privacy;
    use rand_distr::{Distribution, StandardNormal};
    let mut p = plan(1, 20_000, 100_000, SCALAR);
    p.points = Privacy::Gdp { mu: 1.0 }.points(None);
    let f = audit_of(&p, 5, 1, |_, side, r| {
        let z: f64 = StandardNormal.sample(r);
        vec![2.0 * side as f64 + z]
    });
    assert!(f.epsilon_lb > f.epsilon && f.delta > 0.0, "{f:?}");
    assert!(f.delta_lb > f.delta, "{f:?}");
    let promised = Privacy::Gdp { mu: 1.0 }.delta_at(f.epsilon).unwrap();
    assert!(promised <= f.delta * (1.0 + 1e-9), "{promised} {f:?}");
}

/// Each search family keeps its own candidates: the geometric mechanism at ε = 0.1 on
/// inputs 2 apart (a true loss of 0.2) has a few hundred outcomes, whose sets, fitted to
/// noise, filled every shared slot, so no threshold was scored and nothing was flagged; with
/// slots of its own the scalar search's threshold is scored, and flags it.
#[test]
fn a_search_family_is_not_crowded_out_by_another() {
    let g = crate::mech::geometric::Geometric::for_privacy(0.1, 1.0).unwrap();
    let all = Searches {
        discrete: true,
        scalar: true,
        linear: true,
        support: true,
        bits: false,
    };
    let mut p = plan(1, 1_000_000, 1_000_000, all);
    p.points = vec![(0.1, 0.0)];
    let f = audit_of(&p, 3, 1, move |_, side, r| {
        vec![(2 * side) as f64 + g.sample(r) as f64]
    });
    assert!(f.epsilon_lb > 0.1, "{f:?}");
}

/// The bits search sees a floating-point sampler's holes: `x + Laplace` for x ∈ {0, 1} (the
/// textbook sampler, numpy's) releases near 0 only multiples of 2⁻⁵³ for x = 1, so an event
/// on the lowest set bit flags ε = 0.1; a snapped release (multiples of 16 for both) is not
/// flagged, and without the bits search neither is the textbook one.
#[test]
fn the_bits_search_flags_float_holes_and_not_a_snapped_release() {
    let bits = Searches {
        bits: true,
        support: true,
        ..SCALAR
    };
    let mut p = plan(1, 200_000, 200_000, bits);
    p.points = vec![(0.1, 0.0)];
    let textbook = audit_of(&p, 9, 1, laplace(10.0));
    assert!(textbook.epsilon_lb > 0.1, "{textbook:?}");
    let l = Laplace::new(10.0).unwrap();
    let snapped = audit_of(&p, 9, 1, move |_, side, r| {
        vec![((side as f64 + l.sample(r)) / 16.0).round() * 16.0]
    });
    assert!(snapped.epsilon_lb <= 0.1, "{snapped:?}");
    let mut p = p.clone();
    p.searches = Searches {
        bits: false,
        ..bits
    };
    let unseen = audit_of(&p, 9, 1, laplace(10.0));
    assert!(unseen.epsilon_lb <= 0.1, "{unseen:?}");
}

/// The draws that would flag a 10 % worse mechanism: a bound above ε at that many, and not
/// at half as many; more for a rarer event.
#[test]
fn draws_to_flag_is_the_power_of_the_event() {
    let finding = |k2: u64| Finding {
        pair: 0,
        forward: true,
        event: Event::outcomes(vec![vec![1.0]]),
        epsilon: 1.0,
        delta: 0.0,
        samples: 100_000,
        k1: 0,
        k2,
        epsilon_lb: 0.0,
        delta_lb: 0.0,
        search_k1: 0,
        search_k2: 0,
        search_n: 0,
        search_score: 0.0,
    };
    let (common, rare) = (finding(20_000), finding(200));
    let n = draws_to_flag(&common, 0.95).unwrap();
    let m = draws_to_flag(&rare, 0.95).unwrap();
    assert!(m > n, "{m} {n}");
    let p2 = 0.2;
    let p1 = (1.1f64).exp() * p2;
    let at = |n: u64| {
        epsilon_lower_bound(
            (p1 * n as f64).round() as u64,
            n,
            (p2 * n as f64).round() as u64,
            n,
            0.0,
            0.95,
        )
    };
    assert!(
        at(n) > 1.0 && at(n / 2) <= 1.0,
        "{n}: {} {}",
        at(n),
        at(n / 2)
    );
}
