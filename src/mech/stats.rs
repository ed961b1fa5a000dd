//! Statistics for checking mechanisms: confidence intervals for Monte-Carlo estimates and
//! goodness-of-fit statistics for sampler tests.

/// Standard normal CDF, by West's double-precision algorithm (Hart 1968, absolute error
/// below 1e−15).
pub(crate) fn normal_cdf(z: f64) -> f64 {
    let x = z.abs();
    let c = if x > 37.0 {
        0.0
    } else {
        let e = (-x * x / 2.0).exp();
        if x < 7.071_067_811_865_475 {
            let n = (((((3.526_249_659_989_11e-2 * x + 0.700_383_064_443_688) * x
                + 6.373_962_203_531_65)
                * x
                + 33.912_866_078_383)
                * x
                + 112.079_291_497_871)
                * x
                + 221.213_596_169_931)
                * x
                + 220.206_867_912_376;
            let d = ((((((8.838_834_764_831_84e-2 * x + 1.755_667_163_182_64) * x
                + 16.064_177_579_207)
                * x
                + 86.780_732_202_946_1)
                * x
                + 296.564_248_779_674)
                * x
                + 637.333_633_378_831)
                * x
                + 793.826_512_519_948)
                * x
                + 440.413_735_824_752;
            e * n / d
        } else {
            let b = x + 1.0 / (x + 2.0 / (x + 3.0 / (x + 4.0 / (x + 0.65))));
            e / b / 2.506_628_274_631
        }
    };
    if z > 0.0 {
        1.0 - c
    } else {
        c
    }
}

/// Standard normal quantile: Acklam's rational approximation refined by one Halley step
/// (relative error ~1e−15).
pub(crate) fn normal_quantile(p: f64) -> f64 {
    if p <= 0.0 {
        return f64::NEG_INFINITY;
    }
    if p >= 1.0 {
        return f64::INFINITY;
    }
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    let x = if p < 0.02425 {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - 0.02425 {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    };
    let e = normal_cdf(x) - p;
    let u = e * (2.0 * std::f64::consts::PI).sqrt() * (x * x / 2.0).exp();
    x - u / (1.0 + x * u / 2.0)
}

/// Two-sided Student-t critical value `t_{(1+level)/2, df}`: the half-width, in standard
/// errors, of a `level` confidence interval with `df` degrees of freedom.
///
/// Up to [`T_STATRS_MAX_DF`] degrees of freedom the quantile comes from statrs (inverse
/// regularised incomplete beta function): exact to ~1e−14 relative where closed forms exist
/// (df = 1, 2). statrs' inverse beta loses precision for large shape parameters (off by 1e−8
/// at df = 10⁴ and by 7 % at df = 10⁷), so beyond that the Cornish–Fisher expansion in 1/df
/// (Abramowitz & Stegun 26.7.5, five terms) takes over; there its truncation error is below
/// 1e−10 relative for levels up to 0.9999. (The former table + expansion was exact only at
/// 95 % and 55 % too small at df = 1, level 0.99.)
///
/// Returns NaN, rather than panicking, for a level outside (0, 1) or df = 0: callers then
/// report NaN interval bounds, and stages take the level as `stages::param::Level`, checked when `with:` is read.
pub(crate) fn t_critical(level: f64, df: usize) -> f64 {
    // `!(0 < level < 1)` also catches NaN; statrs' inverse_cdf asserts on its input.
    if !(level > 0.0 && level < 1.0) || df == 0 {
        return f64::NAN;
    }
    if df <= T_STATRS_MAX_DF {
        t_quantile_statrs(0.5 + level / 2.0, df as f64)
    } else {
        t_quantile_cornish_fisher(0.5 + level / 2.0, df as f64)
    }
}

/// Largest df for which statrs' Student-t quantile is used (see [`t_critical`]).
pub(crate) const T_STATRS_MAX_DF: usize = 1000;

fn t_quantile_statrs(p: f64, df: f64) -> f64 {
    use statrs::distribution::{ContinuousCDF, StudentsT};
    match StudentsT::new(0.0, 1.0, df) {
        Ok(t) => t.inverse_cdf(p),
        Err(_) => f64::NAN,
    }
}

/// A&S 26.7.5: t_p = z + g1/n + g2/n² + g3/n³ + g4/n⁴ with z the normal p-quantile.
fn t_quantile_cornish_fisher(p: f64, n: f64) -> f64 {
    let z = normal_quantile(p);
    let z2 = z * z;
    let g1 = z * (z2 + 1.0) / 4.0;
    let g2 = z * ((5.0 * z2 + 16.0) * z2 + 3.0) / 96.0;
    let g3 = z * (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) / 384.0;
    let g4 = z * ((((79.0 * z2 + 776.0) * z2 + 1482.0) * z2 - 1920.0) * z2 - 945.0) / 92160.0;
    z + (g1 + (g2 + (g3 + g4 / n) / n) / n) / n
}

/// Mean, spread and a t-based confidence interval of a sample.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Summary {
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (n − 1 denominator); NaN for n < 2.
    pub std: f64,
    /// Standard error of the mean.
    pub se: f64,
    pub ci_lo: f64,
    pub ci_hi: f64,
    pub min: f64,
    pub max: f64,
}

/// Summarises `xs` with a `level` confidence interval for the mean.
pub(crate) fn summarise(xs: &[f64], level: f64) -> Summary {
    let n = xs.len();
    let mean = xs.iter().sum::<f64>() / n as f64;
    let var = if n > 1 {
        xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64
    } else {
        f64::NAN
    };
    let std = var.sqrt();
    let se = std / (n as f64).sqrt();
    let half = if n > 1 {
        t_critical(level, n - 1) * se
    } else {
        f64::NAN
    };
    Summary {
        n,
        mean,
        std,
        se,
        ci_lo: mean - half,
        ci_hi: mean + half,
        min: xs.iter().copied().fold(f64::INFINITY, f64::min),
        max: xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    }
}

/// The q-quantile (0 ≤ q ≤ 1) with linear interpolation between order statistics
/// (Hyndman & Fan type 7, numpy's default). `sorted` must be ascending and non-empty.
pub(crate) fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    let h = (sorted.len() - 1) as f64 * q;
    let lo = h.floor() as usize;
    let hi = h.ceil() as usize;
    sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
}

/// The two-sided Clopper–Pearson ("exact") interval for a binomial proportion `k/n` at
/// `level`: it covers p with probability at least `level` at every p. Wilson's score interval,
/// used before, undercovers where n·p ≪ 1: one hit in 10⁵ draws of an event of probability
/// 1.5·10⁻⁷ (which happens 1.5 % of the time) gave a 99.9 % Wilson interval starting at
/// 7·10⁻⁷, and ex-permute-and-flip showed two such hits whose intervals missed the exact
/// value.
pub(crate) fn clopper_pearson(k: u64, n: u64, level: f64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let alpha = (1.0 - level) / 2.0;
    (
        clopper_pearson_lower(k, n, alpha),
        clopper_pearson_upper(k, n, alpha),
    )
}

/// The one-sided Clopper–Pearson lower bound on p from k successes in n trials, at level
/// 1 − `alpha`: the `alpha` quantile of Beta(k, n − k + 1), and 0 when k = 0.
pub(crate) fn clopper_pearson_lower(k: u64, n: u64, alpha: f64) -> f64 {
    if k == 0 || k > n {
        return 0.0;
    }
    beta_quantile(k as f64, (n - k + 1) as f64, alpha)
}

/// The one-sided Clopper–Pearson upper bound on p from k successes in n trials, at level
/// 1 − `alpha`: the 1 − `alpha` quantile of Beta(k + 1, n − k), and 1 when k = n.
pub(crate) fn clopper_pearson_upper(k: u64, n: u64, alpha: f64) -> f64 {
    if k >= n {
        return 1.0;
    }
    beta_quantile((k + 1) as f64, (n - k) as f64, 1.0 - alpha)
}

/// The `q` quantile of Beta(a, b): the p with I_p(a, b) = q, by Newton's method on statrs'
/// regularised incomplete beta function, kept inside a bracket that bisection (in log-odds)
/// narrows whenever a Newton step would leave it, and at most 200 steps.
///
/// Why not statrs' `Beta::inverse_cdf`: it does not return for the bounds an audit needs most,
/// a rare event at many draws (Beta(1, 10⁷) at 0.0125, k = 0 or 1 of 10⁷: its AS 109 iteration
/// starts at p ≥ 10⁻⁴, four orders of magnitude off, and never meets its 10⁻³⁰ tolerance).
/// Its CDF is accurate there (to ~10⁻⁸ relative against scipy), so it is inverted here with a
/// bound on the work.
fn beta_quantile(a: f64, b: f64, q: f64) -> f64 {
    use statrs::function::beta::{beta_reg, ln_beta};
    if q <= 0.0 {
        return 0.0;
    }
    if q >= 1.0 {
        return 1.0;
    }
    let ln_b = ln_beta(a, b);
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    // Start at the mean, where the distribution's mass is.
    let mut p = a / (a + b);
    for _ in 0..200 {
        let f = beta_reg(a, b, p) - q;
        if f == 0.0 {
            return p;
        }
        if f < 0.0 {
            lo = p;
        } else {
            hi = p;
        }
        let ln_pdf = (a - 1.0) * p.ln() + (b - 1.0) * (1.0 - p).ln() - ln_b;
        let step = f / ln_pdf.exp();
        let newton = p - step;
        if newton > lo && newton < hi && step.is_finite() {
            p = newton;
            if step.abs() <= 1e-15 * p {
                return p;
            }
        } else {
            // Bisection in log-odds; towards 0 or 1 by factors of 16 while that end is open.
            p = if lo == 0.0 {
                hi / 16.0
            } else if hi == 1.0 {
                1.0 - (1.0 - lo) / 16.0
            } else {
                let logit = |x: f64| (x / (1.0 - x)).ln();
                let m = 0.5 * (logit(lo) + logit(hi));
                1.0 / (1.0 + (-m).exp())
            };
            if !(p > lo && p < hi) || (hi - lo) <= 1e-15 * hi {
                return 0.5 * (lo + hi);
            }
        }
    }
    p
}

/// Kolmogorov–Smirnov statistic of a sample against a continuous CDF (sorts `xs`).
#[cfg(test)]
pub(crate) fn ks_statistic(xs: &mut [f64], cdf: impl Fn(f64) -> f64) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len() as f64;
    xs.iter()
        .enumerate()
        .map(|(i, &x)| {
            let f = cdf(x);
            (f - i as f64 / n).abs().max(((i + 1) as f64 / n - f).abs())
        })
        .fold(0.0, f64::max)
}

/// Pearson's chi-square statistic of observed counts against probabilities.
#[cfg(test)]
pub(crate) fn chi_square_statistic(counts: &[u64], probs: &[f64]) -> f64 {
    let n: u64 = counts.iter().sum();
    counts
        .iter()
        .zip(probs)
        .filter(|(_, &p)| p > 0.0)
        .map(|(&c, &p)| {
            let e = p * n as f64;
            (c as f64 - e).powi(2) / e
        })
        .sum()
}

/// Total-variation distance `½ Σ |p − q|`.
pub(crate) fn total_variation(p: &[f64], q: &[f64]) -> f64 {
    0.5 * p.iter().zip(q).map(|(a, b)| (a - b).abs()).sum::<f64>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_functions_agree_with_known_values() {
        assert!((normal_cdf(1.959_963_984_540_054) - 0.975).abs() < 1e-14);
        assert!((normal_cdf(-3.0) - 0.001_349_898_031_630_094_6).abs() < 1e-16);
        for p in [1e-10, 0.001, 0.3, 0.5, 0.975, 0.999_999] {
            assert!((normal_cdf(normal_quantile(p)) - p).abs() < 1e-14 * p.max(1e-2));
        }
    }

    /// Printed two-sided critical values (the t table of any statistics text, e.g. NIST/SEMATECH
    /// e-Handbook 1.3.6.7.2, 3 decimals): level → one-sided quantile (1 + level)/2.
    #[test]
    fn t_critical_matches_printed_table() {
        let levels = [0.8, 0.9, 0.95, 0.99, 0.999];
        let table: [(usize, [f64; 5]); 6] = [
            (1, [3.078, 6.314, 12.706, 63.657, 636.619]),
            (2, [1.886, 2.920, 4.303, 9.925, 31.599]),
            (5, [1.476, 2.015, 2.571, 4.032, 6.869]),
            (10, [1.372, 1.812, 2.228, 3.169, 4.587]),
            (30, [1.310, 1.697, 2.042, 2.750, 3.646]),
            (120, [1.289, 1.658, 1.980, 2.617, 3.373]),
        ];
        for (df, row) in table {
            for (level, want) in levels.iter().zip(row) {
                let got = t_critical(*level, df);
                // Printed to 3 decimals: within half a unit of the last digit.
                assert!(
                    (got - want).abs() <= 5e-4 + 1e-12,
                    "df {df}, level {level}: {got} vs table {want}"
                );
            }
        }
        // More digits where they are known in closed form: df = 1 is Cauchy, t = tan(π·level/2);
        // df = 2 has t = level·√(2 / (1 − level²)).
        for level in [0.5, 0.8, 0.95, 0.99, 0.999] {
            let cauchy = (std::f64::consts::FRAC_PI_2 * level).tan();
            assert!(
                (t_critical(level, 1) / cauchy - 1.0).abs() < 1e-10,
                "{level}"
            );
            let two = level * (2.0 / (1.0 - level * level)).sqrt();
            assert!((t_critical(level, 2) / two - 1.0).abs() < 1e-10, "{level}");
        }
        // Large df: z + (z³ + z)/(4n) + (5z⁵ + 16z³ + 3z)/(96n²) + O(n⁻³), tending to the
        // normal quantile.
        let z: f64 = 1.959_963_984_540_054;
        for df in [10_000usize, 1_000_000, 10_000_000] {
            let n = df as f64;
            let want = z
                + (z.powi(3) + z) / (4.0 * n)
                + (5.0 * z.powi(5) + 16.0 * z.powi(3) + 3.0 * z) / (96.0 * n * n);
            assert!((t_critical(0.95, df) - want).abs() < 1e-9, "df {df}");
        }
    }

    /// statrs and the expansion agree where one hands over to the other, so the critical value
    /// does not jump at `T_STATRS_MAX_DF`, and it decreases with df throughout.
    #[test]
    fn t_critical_is_continuous_across_methods() {
        for level in [0.5, 0.8, 0.95, 0.99, 0.999, 0.9999] {
            for df in [300.0, 1000.0] {
                let a = t_quantile_statrs(0.5 + level / 2.0, df);
                let b = t_quantile_cornish_fisher(0.5 + level / 2.0, df);
                assert!(
                    (a / b - 1.0).abs() < 1e-10,
                    "level {level}, df {df}: {a} vs {b}"
                );
            }
            let mut prev = f64::INFINITY;
            for df in (1..3000).chain([10_000, 100_000, 10_000_000]) {
                let t = t_critical(level, df);
                assert!(t < prev, "level {level}: t(df {df}) = {t} ≥ {prev}");
                prev = t;
            }
        }
    }

    #[test]
    fn t_critical_refuses_bad_input_without_panicking() {
        for level in [0.0, 1.0, -0.5, 1.5, f64::NAN, f64::INFINITY] {
            assert!(t_critical(level, 5).is_nan(), "{level}");
        }
        assert!(t_critical(0.95, 0).is_nan());
        assert!(summarise(&[1.0, 2.0], f64::NAN).ci_lo.is_nan());
    }

    #[test]
    fn summary_and_intervals() {
        let s = summarise(&[1.0, 2.0, 3.0, 4.0], 0.95);
        assert_eq!(s.mean, 2.5);
        assert!((s.std - 1.290_994_448_735_805_6).abs() < 1e-15);
        assert!((s.ci_hi - (2.5 + t_critical(0.95, 3) * s.se)).abs() < 1e-12);
        assert!((t_critical(0.95, 3) - 3.182).abs() < 5e-4);
        assert_eq!(quantile_sorted(&[1.0, 2.0, 3.0, 4.0], 0.5), 2.5);
        // No hit in 100: the upper end is 1 − 0.025^(1/100).
        let (lo, hi) = clopper_pearson(0, 100, 0.95);
        assert!(lo == 0.0 && (hi - 0.036_217).abs() < 1e-5, "{hi}");
    }

    /// The interval holds k/n for every n and k, the ends included, and covers p at least at
    /// its level however rare the event.
    #[test]
    fn clopper_pearson_holds_its_estimate_and_covers_rare_events() {
        for n in 1..400u64 {
            for k in [0, 1, n / 2, n - 1, n] {
                let (lo, hi) = clopper_pearson(k, n, 0.95);
                let p = k as f64 / n as f64;
                assert!(lo <= p && p <= hi, "n = {n}, k = {k}: [{lo}, {hi}] ∌ {p}");
            }
        }
        // Coverage where n·p ≪ 1, summed exactly over the binomial: at least the level (the
        // 99.9 % Wilson interval excluded p = 1.5e-7 at every k ≥ 1 of 10⁵, 1.5 % of runs).
        let n = 100_000u64;
        for p in [1.5e-7_f64, 6.9e-7, 1e-5, 1e-3] {
            let mut pk = (1.0 - p).powf(n as f64);
            let mut missed = 0.0;
            for k in 0..200u64 {
                let (lo, hi) = clopper_pearson(k, n, 0.999);
                if !(lo <= p && p <= hi) {
                    missed += pk;
                }
                pk *= (n - k) as f64 / (k + 1) as f64 * p / (1.0 - p);
            }
            assert!(missed <= 0.001, "p = {p}: misses {missed}");
        }
    }
}

/// Least-squares line y = a + b·x with a `level` t-interval for the slope b.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct LineFit {
    pub intercept: f64,
    pub slope: f64,
    pub slope_lo: f64,
    pub slope_hi: f64,
}

/// Fits y on x by least squares. The slope interval needs ≥ 3 points (NaN otherwise).
pub(crate) fn fit_line(x: &[f64], y: &[f64], level: f64) -> LineFit {
    let n = x.len().min(y.len());
    let nf = n as f64;
    let mx = x[..n].iter().sum::<f64>() / nf;
    let my = y[..n].iter().sum::<f64>() / nf;
    let sxx: f64 = x[..n].iter().map(|v| (v - mx).powi(2)).sum();
    let sxy: f64 = x[..n]
        .iter()
        .zip(&y[..n])
        .map(|(a, b)| (a - mx) * (b - my))
        .sum();
    let slope = sxy / sxx;
    let intercept = my - slope * mx;
    let half = if n >= 3 {
        let rss: f64 = x[..n]
            .iter()
            .zip(&y[..n])
            .map(|(a, b)| (b - intercept - slope * a).powi(2))
            .sum();
        t_critical(level, n - 2) * (rss / (nf - 2.0) / sxx).sqrt()
    } else {
        f64::NAN
    };
    LineFit {
        intercept,
        slope,
        slope_lo: slope - half,
        slope_hi: slope + half,
    }
}

#[cfg(test)]
mod line_tests {
    use super::*;

    #[test]
    fn exact_line_and_interval_cover() {
        let x = [0.0, 1.0, 2.0, 3.0];
        let f = fit_line(&x, &[1.0, 3.0, 5.0, 7.0], 0.95);
        assert!((f.slope - 2.0).abs() < 1e-12 && (f.intercept - 1.0).abs() < 1e-12);
        assert!((f.slope_hi - f.slope).abs() < 1e-9);
        let f = fit_line(&x, &[1.0, 3.5, 4.5, 7.0], 0.95);
        assert!(f.slope_lo < 2.0 && 2.0 < f.slope_hi && f.slope_hi - f.slope_lo > 0.5);
    }
}
