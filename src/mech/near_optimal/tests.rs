use super::*;
use crate::mech::staircase::Staircase;
use crate::mech::stats::ks_statistic;
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;

fn opts(keep: bool) -> Options {
    Options {
        keep_sets: keep,
        ..Options::default()
    }
}

/// Definition 2 checked on the built sets agrees with the widest-gap prediction
/// (see [`NeighbourSet::steps_by_gap_formula`]) on both sides of every threshold.
#[test]
fn convergence_step_matches_the_gap_formula() {
    for &(a, b, c) in &[
        (1, 100, 101),
        (1, 40, 41),
        (5, 60, 63),
        (3, 20, 24),
        (2, 9, 10),
    ] {
        let v = NeighbourSet::two_intervals(a as f64, b as f64, c as f64).unwrap();
        for two_delta in [
            0,
            1,
            3,
            8,
            25,
            b - a,
            c - 1,
            c,
            2 * c,
            2 * c + 1,
            2 * (b - a),
        ] {
            let delta = two_delta as f64 / 2.0;
            let l = construct(&v, delta, opts(false)).unwrap();
            assert_eq!(
                Some(l.steps()),
                v.steps_by_gap_formula(delta),
                "V = {v}, δ = {delta}"
            );
            assert_eq!(l.a_n(), (l.steps() as f64 - 1.0) * c as f64 + delta);
        }
    }
    // Touching pieces kept apart: only a shell assembled from touching widened pieces
    // (at δ = (b − a)/2 the widened [−a, a] and [b, c] meet inside R_1) converges later.
    let v = NeighbourSet::two_intervals(1.0, 10.0, 11.0).unwrap();
    let separate = Options {
        touching: Touching::Separate,
        ..opts(false)
    };
    for (delta, merged, apart) in [(0.0, 11, 11), (2.0, 7, 7), (4.5, 1, 2), (4.0, 3, 3)] {
        assert_eq!(construct(&v, delta, opts(false)).unwrap().steps(), merged);
        assert_eq!(
            construct(&v, delta, separate).unwrap().steps(),
            apart,
            "δ = {delta}"
        );
    }
    // A single interval converges at once: R_1 = ±[δ, δ + c] (or R_0 already).
    let v = NeighbourSet::interval(7.0).unwrap();
    for (delta, n) in [(2.0, 1), (3.5, 0), (7.0, 0), (7.5, 1)] {
        let l = construct(&v, delta, opts(false)).unwrap();
        assert_eq!((l.steps(), l.a_n()), (n, (n as f64 - 1.0) * 7.0 + delta));
        assert_eq!(v.steps_by_gap_formula(delta), Some(n));
    }
}

/// Step 3 as written equals `B_i = A_i ⊕ [−δ, δ]` (the identity behind the privacy
/// proof), checked exactly on random neighbour sets and δ.
#[test]
fn level_sets_are_dilated_reachable_sets() {
    let mut rng = Pcg64Mcg::seed_from_u64(5);
    for _ in 0..60 {
        let a = rng.random_range(1..6) as f64;
        let b = a + rng.random_range(1..30) as f64;
        let c = b + rng.random_range(1..6) as f64;
        let delta = rng.random_range(0..12) as f64 / 4.0;
        let v = NeighbourSet::two_intervals(a, b, c).unwrap();
        let l = construct(&v, delta, opts(true)).unwrap();
        let scale = l.scale();
        let d = scale.units(Decimal::from_f64("delta", delta).unwrap());
        let mut seq = MinimalSequence::new(&v, scale, Touching::Merge);
        let mut prev = IntervalSet::empty(Touching::Merge);
        for i in 0..=l.steps() {
            let b_i = seq.reached().dilate(d);
            let r_i = b_i.difference(&prev);
            assert_eq!(
                r_i.non_negative_half(),
                l.level_set(i).unwrap(),
                "V = {v}, δ = {delta}, i = {i}"
            );
            prev = b_i;
            seq.advance();
        }
    }
}

#[test]
fn the_density_integrates_to_one() {
    for (v, delta, eps) in [
        (
            NeighbourSet::two_intervals(1.0, 30.0, 31.0).unwrap(),
            0.5,
            0.3,
        ),
        (
            NeighbourSet::two_intervals(4.0, 17.0, 19.0).unwrap(),
            2.25,
            1.7,
        ),
        (NeighbourSet::interval(10.0).unwrap(), 3.0, 0.8),
    ] {
        let l = construct(&v, delta, opts(true)).unwrap();
        let s = l.summary(eps).unwrap();
        // Through the position-sorted partition, independently of the per-level sums.
        let sc = l.scale();
        let parts = l.partition().unwrap();
        let mut edge = 0;
        let mut mass = 0.0;
        for &(p, lvl) in parts {
            assert_eq!(p.lo, edge, "gap or overlap at {}", sc.to_f64(p.lo));
            edge = p.hi;
            mass += 2.0 * sc.to_f64(p.length()) * (-(lvl as f64) * eps).exp();
        }
        assert_eq!(sc.to_f64(edge), l.a_n() + l.sensitivity());
        let tail: f64 = (l.steps() + 1..l.steps() + 4000)
            .map(|i| 2.0 * l.sensitivity() * (-(i as f64) * eps).exp())
            .sum();
        assert!(((mass + tail) / s.alpha - 1.0).abs() < 1e-12, "V = {v}");
    }
}

/// For V = [0, Δ], Algorithm 1 with δ is the staircase with γ = δ/Δ: same density
/// everywhere, same E|X|; at δ = Δ/(1 + e^(ε/2)) the rate is exactly 1.
#[test]
fn single_interval_is_the_staircase() {
    let df = 10.0;
    for (delta, eps) in [(2.5, 0.6), (7.0, 2.0), (0.5, 1.0)] {
        let l = construct(&NeighbourSet::interval(df).unwrap(), delta, opts(true)).unwrap();
        let m = l.mechanism(eps).unwrap();
        let st = Staircase::new(eps, df, delta / df).unwrap();
        for k in 0..4000 {
            let x = -60.0 + k as f64 * 0.0301;
            let (p, q) = (m.density(x).unwrap(), st.density(x));
            assert!((p / q - 1.0).abs() < 1e-12, "x = {x}: {p} vs {q}");
        }
        assert!((m.summary().mean_abs / st.mean_abs() - 1.0).abs() < 1e-12);
    }
    for eps in [0.2, 1.0, 3.0] {
        let delta = df / (1.0 + (eps / 2.0f64).exp());
        let delta = (delta * 1e6).round() / 1e6;
        let l = construct(&NeighbourSet::interval(df).unwrap(), delta, opts(false)).unwrap();
        assert!((l.summary(eps).unwrap().rate - 1.0).abs() < 1e-9);
    }
}

/// Neighbouring outputs differ by at most one level, exactly, at random points and at
/// every boundary, for shifts at the endpoints of ±V and inside it.
#[test]
fn levels_move_by_at_most_one_under_any_shift() {
    let v = NeighbourSet::two_intervals(2.0, 23.0, 25.0).unwrap();
    let l = construct(&v, 1.5, opts(true)).unwrap();
    let sc = l.scale();
    let u = |x: f64| sc.units(Decimal::from_f64("x", x).unwrap());
    let shifts: Vec<Int> = [0.0, 1.0, 2.0, 23.0, 24.2, 25.0]
        .iter()
        .flat_map(|&s| [u(s), -u(s)])
        .collect();
    let mut points: Vec<Int> = l
        .partition()
        .unwrap()
        .iter()
        .flat_map(|(p, _)| [p.lo, p.hi, -p.lo, -p.hi, p.lo + 1, p.hi - 1])
        .collect();
    let mut rng = Pcg64Mcg::seed_from_u64(8);
    let reach = 3 * (l.a_n() as i64 + 50) * sc.den() as i64;
    points.extend((0..20_000).map(|_| rng.random_range(-reach..reach) as Int));
    let mut max_step = 0;
    for &r in &points {
        let lr = l.level_units(r).unwrap() as i64;
        for &s in &shifts {
            let d = (lr - l.level_units(r - s).unwrap() as i64).abs();
            max_step = max_step.max(d);
        }
    }
    assert_eq!(max_step, 1);
}

/// Algorithm 2 against the density: KS on 2·10^5 draws of |X| (0.1% critical value
/// 1.95/sqrt(n) ≈ 0.0044), for both geometric conventions on a set with a heavy tail;
/// only trials-to-first-success passes.
#[test]
fn sampler_follows_the_density() {
    let v = NeighbourSet::interval(4.0).unwrap();
    let l = construct(&v, 1.0, opts(true)).unwrap();
    let eps = 0.4;
    let m = l.mechanism(eps).unwrap();
    assert!(m.summary().tail_mass > 0.5);
    // CDF of |X| from the levels: exact on each piece (uniform within a level).
    let cdf_abs = |x: f64| -> f64 {
        let mut acc = 0.0;
        let sc = l.scale();
        for &(p, lvl) in l.partition().unwrap() {
            let (lo, hi) = (sc.to_f64(p.lo), sc.to_f64(p.hi));
            let w = 2.0 * (-(lvl as f64) * eps).exp() / m.alpha();
            acc += w * (x.min(hi) - lo).max(0.0);
        }
        let (edge, df) = (l.a_n() + l.sensitivity(), l.sensitivity());
        let mut k = l.steps() + 1;
        let mut start = edge;
        while start < x {
            let w = 2.0 * (-(k as f64) * eps).exp() / m.alpha();
            acc += w * (x.min(start + df) - start);
            start += df;
            k += 1;
        }
        acc
    };
    let n = 200_000;
    let crit = 1.95 / (n as f64).sqrt();
    let mut rng = Pcg64Mcg::seed_from_u64(21);
    let mut xs: Vec<f64> = (0..n)
        .map(|_| m.sample(&mut rng, GeometricSupport::FromOne).abs())
        .collect();
    let d = ks_statistic(&mut xs, cdf_abs);
    assert!(d < crit, "from one: D = {d}");
    let mut ys: Vec<f64> = (0..n)
        .map(|_| m.sample(&mut rng, GeometricSupport::FromZero).abs())
        .collect();
    let d0 = ks_statistic(&mut ys, cdf_abs);
    assert!(
        d0 > 10.0 * crit,
        "from zero should be visibly off: D = {d0}"
    );
}

#[test]
fn bad_parameters_are_errors_naming_the_value() {
    let e = NeighbourSet::two_intervals(5.0, 3.0, 9.0).unwrap_err();
    assert!(e.to_string().contains("[0, 5] ∪ [3, 9]"), "{e}");
    assert!(NeighbourSet::new(&[(1.0, 2.0)]).is_err());
    assert!(NeighbourSet::interval(0.0).is_err());
    let e = NeighbourSet::parse("[0, 1] + [4, 5]").unwrap_err();
    assert!(e.to_string().contains("[0, 1] + [4, 5]"), "{e}");
    let v = NeighbourSet::parse("[0, 1] ∪ [1000, 1001]").unwrap();
    assert_eq!((v.sensitivity(), v.measure()), (1001.0, 2.0));
    assert_eq!(v, NeighbourSet::parse("[0,1] U [1000,1001]").unwrap());
    let e = construct(&v, -1.0, opts(false)).unwrap_err();
    assert!(e.to_string().contains("delta = -1"), "{e}");
    let tight = Options {
        max_steps: 10,
        ..opts(false)
    };
    let e = construct(&v, 0.0, tight).unwrap_err();
    assert!(matches!(e, NearOptimalError::NotConverged { .. }), "{e}");
    let l = construct(&v, 0.5, opts(false)).unwrap();
    assert!(l.level(3.0).is_err() && l.summary(0.0).is_err());
}
