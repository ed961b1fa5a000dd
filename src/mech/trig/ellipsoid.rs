//! Points uniform in an axis-aligned ellipsoid `{x : Σ (x_i/a_i)² ≤ 1}` centred at the
//! origin (Huang 2014, thesis §2.5, Algorithm 8, `ellrnd(n, d, a)`).
//!
//! The improved trigonometric mechanism (Algorithms 9 and 10, line 12) draws its
//! candidate grid from the ellipsoid with semi-axes `κ·√λ̂` in the private eigenbasis
//! of [`super::psi`]. Sampling touches no data, so it costs no privacy budget.
//!
//! # Samplers
//! - [`EllipsoidSampler::Uniform`] (the default) is exactly uniform: direction
//!   `g/‖g‖` with `g ~ N(0, I_d)` (uniform on the sphere by rotation invariance),
//!   radius `U^{1/d} ~ Beta(d, 1)` (so `P(‖x‖ ≤ s) = s^d`, the volume fraction), then
//!   coordinate `i` scaled by `a_i`. A linear map of the uniform ball is uniform in the
//!   image, because it multiplies every volume by the same determinant.
//! - [`EllipsoidSampler::Literal`] is Algorithm 8 as printed: `r ~ Beta(d, 1)` (drawn
//!   as above), angles uniform, the inverse hyperspherical transform, then the same
//!   scaling. Uniform
//!   *angles* are not uniform on the sphere for `d ≥ 3`: the surface element is
//!   `sin^{d−2}φ_1·sin^{d−3}φ_2 ⋯ sin φ_{d−2} dφ_1 ⋯ dφ_{d−1}`, so Literal piles points
//!   up near the poles of the first axes. For `d ≤ 2` it is exactly uniform. It is
//!   kept to reproduce the thesis's numbers and to show the difference.
//!
//! # Reading of the printed algorithm
//! Algorithm 8 draws `d` angles `φ_i ~ U[0, π]` and doubles `φ_d`, but hyperspherical
//! coordinates in `ℝ^d` have `d − 1` angles: `φ_1, …, φ_{d−2} ∈ [0, π]` and an azimuth
//! `φ_{d−1} ∈ [0, 2π)`. We read the count as `d − 1` with the last angle doubled,
//! the one reading whose transform covers the whole sphere:
//! `x_1 = r cos φ_1`, `x_j = r sin φ_1 ⋯ sin φ_{j−1} cos φ_j` (`1 < j < d`),
//! `x_d = r sin φ_1 ⋯ sin φ_{d−1}`. For `d = 1` there are no angles and the "sphere" is
//! `{−1, 1}`: the direction is a fair sign.

use rand::Rng;
use rand_distr::{Distribution, StandardNormal};

use crate::mech::ParamRangeError;

/// How [`sample_ellipsoid`] draws a point; see the module documentation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EllipsoidSampler {
    /// Exactly uniform: a normalised Gaussian direction and radius `U^{1/d}`.
    #[default]
    Uniform,
    /// Algorithm 8 as printed: uniform hyperspherical angles, not uniform for `d ≥ 3`.
    Literal,
}

/// `count` points in the ellipsoid with the given semi-axes (`d = semi_axes.len()`),
/// returned row-major (`count × d`). Semi-axes must be finite and ≥ 0 (a zero semi-axis
/// flattens the ellipsoid onto a coordinate hyperplane), and `d ≥ 1`.
pub(crate) fn sample_ellipsoid<R: Rng + ?Sized>(
    count: usize,
    semi_axes: &[f64],
    sampler: EllipsoidSampler,
    rng: &mut R,
) -> Result<Vec<f64>, ParamRangeError> {
    let d = semi_axes.len();
    if d == 0 {
        return Err(ParamRangeError {
            name: "semi_axes",
            value: "[]".into(),
            valid: "must hold d ≥ 1 semi-axes".into(),
        });
    }
    if let Some(&a) = semi_axes.iter().find(|a| !(a.is_finite() && **a >= 0.0)) {
        return Err(ParamRangeError {
            name: "semi_axes",
            value: a.to_string(),
            valid: "every semi-axis must be a finite number ≥ 0".into(),
        });
    }
    // Reserving up front turns a count too large for memory into an error, not an abort.
    let mut points = Vec::new();
    count
        .checked_mul(d)
        .and_then(|len| points.try_reserve_exact(len).ok())
        .ok_or_else(|| ParamRangeError {
            name: "count",
            value: count.to_string(),
            valid: format!("count·d values must fit in memory (d = {d})"),
        })?;

    let mut direction = vec![0.0; d];
    for _ in 0..count {
        match sampler {
            EllipsoidSampler::Uniform => gaussian_direction(&mut direction, rng),
            EllipsoidSampler::Literal => uniform_angle_direction(&mut direction, rng),
        }
        // r ~ Beta(d, 1) by inversion: its CDF is s^d, so r = U^{1/d}.
        let r = rng.random::<f64>().powf(1.0 / d as f64);
        points.extend(direction.iter().zip(semi_axes).map(|(u, a)| a * r * u));
    }
    Ok(points)
}

/// A unit vector uniform on the sphere: a normalised standard Gaussian vector.
fn gaussian_direction<R: Rng + ?Sized>(out: &mut [f64], rng: &mut R) {
    loop {
        for u in out.iter_mut() {
            *u = StandardNormal.sample(rng);
        }
        let norm = out.iter().map(|u| u * u).sum::<f64>().sqrt();
        // A zero vector has no direction; it has probability 0 but is not impossible.
        if norm > 0.0 {
            out.iter_mut().for_each(|u| *u /= norm);
            return;
        }
    }
}

/// A unit vector from uniform hyperspherical angles, as Algorithm 8 prints it:
/// `φ_1..φ_{d−2} ~ U[0, π]`, `φ_{d−1} ~ U[0, 2π)`.
fn uniform_angle_direction<R: Rng + ?Sized>(out: &mut [f64], rng: &mut R) {
    let d = out.len();
    if d == 1 {
        out[0] = if rng.random::<bool>() { 1.0 } else { -1.0 };
        return;
    }
    // `sines` is sin φ_1 ⋯ sin φ_{j−1}, the radius of the sphere left for x_j..x_d.
    let mut sines = 1.0;
    for (j, x) in out[..d - 1].iter_mut().enumerate() {
        let span = if j == d - 2 {
            2.0 * std::f64::consts::PI
        } else {
            std::f64::consts::PI
        };
        let phi = span * rng.random::<f64>();
        *x = sines * phi.cos();
        sines *= phi.sin();
    }
    out[d - 1] = sines;
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_pcg::Pcg64;

    const DRAWS: usize = 100_000;
    /// The asymptotic Kolmogorov–Smirnov critical value at level 0.001, 1.9495/√n,
    /// for n = 10⁵: ≈ 0.00616. A sampler whose CDF is off by ≥ 0.01 anywhere is rejected
    /// with probability ≈ 1 (its statistic concentrates within ≈ 0.003 of the true gap).
    const KS_CRITICAL: f64 = 1.9495 / 316.227_766_016_837_94;

    /// The Kolmogorov–Smirnov statistic `sup |F_n − F|` of `xs` against `cdf`.
    fn ks(mut xs: Vec<f64>, cdf: impl Fn(f64) -> f64) -> f64 {
        xs.sort_by(f64::total_cmp);
        let n = xs.len() as f64;
        xs.iter().enumerate().fold(0.0, |acc: f64, (i, &x)| {
            let f = cdf(x);
            acc.max(f - i as f64 / n).max((i + 1) as f64 / n - f)
        })
    }

    /// The CDF of the first coordinate of a point uniform in the unit d-ball, whose
    /// density is ∝ (1 − x²)^{(d−1)/2}.
    fn ball_coordinate_cdf(d: usize) -> impl Fn(f64) -> f64 {
        move |x: f64| {
            let x = x.clamp(-1.0, 1.0);
            match d {
                1 => (x + 1.0) / 2.0,
                2 => 0.5 + (x * (1.0 - x * x).sqrt() + x.asin()) / std::f64::consts::PI,
                3 => (2.0 + 3.0 * x - x * x * x) / 4.0,
                _ => unreachable!("only d ≤ 3 is tabulated"),
            }
        }
    }

    /// Column `j` of the row-major points, divided by its semi-axis.
    fn normalised_column(points: &[f64], axes: &[f64], j: usize) -> Vec<f64> {
        points
            .chunks_exact(axes.len())
            .map(|p| p[j] / axes[j])
            .collect()
    }

    fn draw(axes: &[f64], sampler: EllipsoidSampler, seed: u64) -> Vec<f64> {
        let mut rng = Pcg64::seed_from_u64(seed);
        sample_ellipsoid(DRAWS, axes, sampler, &mut rng).unwrap()
    }

    #[test]
    fn every_point_lies_in_the_ellipsoid() {
        let mut rng = Pcg64::seed_from_u64(1);
        for axes in [
            vec![2.5],
            vec![1.0, 0.1],
            vec![3.0, 0.0, 0.5],
            vec![0.2, 1.0, 4.0, 0.7, 1.5],
        ] {
            for sampler in [EllipsoidSampler::Uniform, EllipsoidSampler::Literal] {
                let points = sample_ellipsoid(10_000, &axes, sampler, &mut rng).unwrap();
                assert_eq!(points.len(), 10_000 * axes.len());
                for p in points.chunks_exact(axes.len()) {
                    // A zero semi-axis forces its coordinate to 0 and drops out of the sum.
                    let q: f64 = p
                        .iter()
                        .zip(&axes)
                        .map(|(x, a)| {
                            if *a == 0.0 {
                                assert_eq!(*x, 0.0);
                                0.0
                            } else {
                                (x / a).powi(2)
                            }
                        })
                        .sum();
                    // Rounding in the normalisation can exceed 1 by a few ulps, no more.
                    assert!(q <= 1.0 + 1e-12, "{sampler:?} {axes:?}: {q}");
                }
            }
        }
    }

    #[test]
    fn uniform_passes_and_literal_fails_a_uniformity_test_in_three_dimensions() {
        // 10⁵ draws, KS at level 0.001 (critical ≈ 0.0062) on x_1/a_1 against the exact
        // CDF (2 + 3x − x³)/4 of the unit 3-ball's first coordinate.
        let axes = [2.0, 0.5, 3.0];
        let cdf = ball_coordinate_cdf(3);
        let uniform = ks(
            normalised_column(&draw(&axes, EllipsoidSampler::Uniform, 2), &axes, 0),
            &cdf,
        );
        let literal = ks(
            normalised_column(&draw(&axes, EllipsoidSampler::Literal, 2), &axes, 0),
            &cdf,
        );
        println!(
            "d = 3, x_1: KS Uniform {uniform:.5}, Literal {literal:.5}, critical {KS_CRITICAL:.5}"
        );
        assert!(uniform < KS_CRITICAL, "Uniform rejected: {uniform}");
        assert!(literal > KS_CRITICAL, "Literal not rejected: {literal}");
        // By symmetry every coordinate of a uniform ball point has the same law; Literal's
        // last coordinate r·sin φ_1·sin φ_2 is also off.
        let uniform = ks(
            normalised_column(&draw(&axes, EllipsoidSampler::Uniform, 3), &axes, 2),
            &cdf,
        );
        let literal = ks(
            normalised_column(&draw(&axes, EllipsoidSampler::Literal, 3), &axes, 2),
            &cdf,
        );
        println!("d = 3, x_3: KS Uniform {uniform:.5}, Literal {literal:.5}");
        assert!(uniform < KS_CRITICAL, "Uniform rejected: {uniform}");
        assert!(literal > KS_CRITICAL, "Literal not rejected: {literal}");
    }

    #[test]
    fn both_samplers_are_uniform_in_one_and_two_dimensions() {
        // Uniform angles are uniform on the circle, so Literal is exact for d ≤ 2:
        // 10⁵ draws, KS at level 0.001 on every coordinate against the exact CDF.
        for axes in [vec![1.5], vec![0.3, 2.0]] {
            let cdf = ball_coordinate_cdf(axes.len());
            for sampler in [EllipsoidSampler::Uniform, EllipsoidSampler::Literal] {
                let points = draw(&axes, sampler, 4);
                for j in 0..axes.len() {
                    let stat = ks(normalised_column(&points, &axes, j), &cdf);
                    println!("d = {}, x_{}: KS {sampler:?} {stat:.5}", axes.len(), j + 1);
                    assert!(
                        stat < KS_CRITICAL,
                        "{sampler:?} d = {} x_{}: {stat}",
                        axes.len(),
                        j + 1
                    );
                }
            }
        }
    }

    #[test]
    fn the_radius_follows_the_volume_law() {
        // P(‖x/a‖ ≤ s) = s^d, i.e. ‖x/a‖^d ~ U[0, 1]: 10⁵ draws, KS at level 0.001.
        // The test can fail: a radius drawn uniformly (not U^{1/d}) gives KS ≈ 0.47 in 4-D.
        let axes = [1.0, 2.0, 0.5, 3.0];
        for sampler in [EllipsoidSampler::Uniform, EllipsoidSampler::Literal] {
            let points = draw(&axes, sampler, 5);
            let radii: Vec<f64> = points
                .chunks_exact(4)
                .map(|p| {
                    p.iter()
                        .zip(&axes)
                        .map(|(x, a)| (x / a).powi(2))
                        .sum::<f64>()
                        .sqrt()
                        .powi(4)
                })
                .collect();
            let stat = ks(radii, |u| u.clamp(0.0, 1.0));
            println!("radius d = 4: KS {sampler:?} {stat:.5}");
            assert!(stat < KS_CRITICAL, "{sampler:?}: {stat}");
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_points() {
        let axes = [1.0, 2.0, 3.0];
        let run = |seed| {
            sample_ellipsoid(
                50,
                &axes,
                EllipsoidSampler::default(),
                &mut Pcg64::seed_from_u64(seed),
            )
            .unwrap()
        };
        assert_eq!(run(8), run(8));
        assert_ne!(run(8), run(9));
        assert_eq!(EllipsoidSampler::default(), EllipsoidSampler::Uniform);
    }

    #[test]
    fn rejects_bad_semi_axes() {
        let mut rng = Pcg64::seed_from_u64(6);
        for axes in [
            vec![],
            vec![1.0, -0.5],
            vec![f64::NAN],
            vec![1.0, f64::INFINITY],
        ] {
            let err = sample_ellipsoid(3, &axes, EllipsoidSampler::Uniform, &mut rng).unwrap_err();
            assert_eq!(err.name, "semi_axes", "{axes:?}");
        }
        let err = sample_ellipsoid(usize::MAX, &[1.0, 1.0], EllipsoidSampler::Uniform, &mut rng);
        assert_eq!(err.unwrap_err().name, "count");
        assert_eq!(
            sample_ellipsoid(0, &[1.0], EllipsoidSampler::Literal, &mut rng),
            Ok(vec![])
        );
    }
}
