//! The rate–distortion privacy channel of Wu, Peng, Tian, Niu & Ding (2020): discrete
//! channels q(x̂|x), mutual-information leakage, expected distortion, the ε of a channel, the
//! Blahut–Arimoto iteration of the paper's Algorithm 1 (with the auxiliary variable Z of its
//! Problem 2), and the symmetric channel (k-ary randomized response) it is compared with.
//!
//! # Guarantee
//! A channel q(x̂|x) whose entries are all positive is ε-differentially private for
//! ε = max over x, x′, x̂ of ln q(x̂|x)/q(x̂|x′) (the paper's Algorithm 3, in nats); a
//! column with a zero beside a non-zero gives ε = ∞. The optimal channel minimises
//! I(X; X̂) + λ·E[d(X, X̂)]: it leaks the least information for its expected distortion; its ε is
//! whatever that channel has, not a parameter ([`OptimalChannel::epsilon`],
//! [`Channel::epsilon`]). The symmetric channel with distortion D is ε-DP with
//! ε = ln((1 − D)(m − 1)/D) ([`symmetric_epsilon`]; ∞ at D = 0).
//!
//! # Conditions
//! - The guarantee is for one input value x passed through the channel, neighbours being any
//!   two values x, x′ of the alphabet.
//! - [`blahut_arimoto`] checks the source distribution (finite, ≥ 0, summing to 1 within
//!   [`SUM_TOLERANCE`]; it is then normalised), λ > 0 and T > 0 finite, |Z| ≥ 1, and a
//!   distortion matrix of m × m finite entries ≥ 0. It stops after [`MAX_ITERATIONS`]
//!   whether or not it has converged ([`OptimalChannel::converged`]).
//! - [`symmetric_channel`] checks m ≥ 2 and D ∈ [0, (m − 1)/m] (beyond, the channel prefers
//!   wrong answers); [`Channel::new`] checks a row-stochastic matrix (entries ≥ 0, rows
//!   summing to 1 within 1e−9).
//!
//! # Reference
//! Wu, Peng, Tian, Niu & Ding 2020, 基于率失真的差分隐私效用优化模型 (a rate–distortion
//! model for optimising the utility of differential privacy): Problem 2 (the auxiliary variable Z), Algorithm 1 (Blahut–Arimoto), Algorithm 2
//! (the mutual information), Algorithm 3 (the ε of a channel); figures 5 and 8 (ε in nats).
//!
//! # Deviations from the paper
//! - The stopping rule is |I₀ − I| < T: the printed relation between I₀ − I and T is lost in
//!   the text, and the absolute change is the usual Blahut–Arimoto rule (see
//!   [`blahut_arimoto`]).
//! - The Hamming kernel is applied in O(m) per row instead of O(m²): the same iterates,
//!   cheaper ([`Distortion::Hamming`]).
//! - The ε of the optimal channel is computed from ln Z_x and the distortion, not from the
//!   stored entries, so it stays exact where entries underflow to 0
//!   ([`OptimalChannel::epsilon`]).
//! - Hamming steps where Z has moved by at most 2⁻⁷ since the last full step take 1/Z by
//!   Newton's iteration and ln Z by a series from that step's, without a division (issue #39):
//!   the MI of such a step is within 10⁻¹⁴ nats of the full step's (bound and proof sketch at
//!   `hamming_terms_cheap`), R(D) and D within 10⁻⁹ of the full iteration's (tested).
//!
//! # Units
//! Mutual information is in bits (the paper's H(X) = 1.9464 for MovieLens movie 785 is in bits);
//! ε is in nats, as the paper's figures 5 and 8 say.

use std::fmt;

use super::fastmath::{ln_normal, sum4};

/// Bad input to the channel maths: the message names the value and the valid range.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelError(pub String);

impl fmt::Display for ChannelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ChannelError {}

/// How far a probability vector's sum may be from 1. Printed distributions are rounded to 4
/// decimals (the paper's Adult vector sums to 0.9993), so callers normalise after this check.
pub(crate) const SUM_TOLERANCE: f64 = 1e-3;

/// Checks a probability vector: finite, non-negative, summing to 1 within `SUM_TOLERANCE`.
pub(crate) fn check_distribution(p: &[f64]) -> Result<(), ChannelError> {
    if p.is_empty() {
        return Err(ChannelError("the distribution is empty".into()));
    }
    if let Some((i, v)) = p
        .iter()
        .enumerate()
        .find(|(_, v)| !(v.is_finite() && **v >= 0.0))
    {
        return Err(ChannelError(format!(
            "p[{i}] = {v} is invalid: probabilities must be ≥ 0"
        )));
    }
    let s: f64 = p.iter().sum();
    if (s - 1.0).abs() > SUM_TOLERANCE {
        return Err(ChannelError(format!(
            "the probabilities sum to {s}, not 1 (tolerance {SUM_TOLERANCE})"
        )));
    }
    Ok(())
}

/// A row-stochastic matrix q(y|x): `rows` inputs × `cols` outputs, row-major.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Channel {
    pub rows: usize,
    pub cols: usize,
    pub q: Vec<f64>,
}

impl Channel {
    #[cfg(test)]
    pub fn new(rows: usize, cols: usize, q: Vec<f64>) -> Result<Channel, ChannelError> {
        if rows == 0 || cols == 0 || q.len() != rows * cols {
            return Err(ChannelError(format!(
                "a {rows}×{cols} channel needs {} entries, got {}",
                rows * cols,
                q.len()
            )));
        }
        for r in 0..rows {
            let row = &q[r * cols..(r + 1) * cols];
            if let Some(v) = row.iter().find(|v| !(v.is_finite() && **v >= 0.0)) {
                return Err(ChannelError(format!(
                    "row {r} has the entry {v}: entries must be ≥ 0"
                )));
            }
            let s: f64 = row.iter().sum();
            if (s - 1.0).abs() > 1e-9 {
                return Err(ChannelError(format!("row {r} sums to {s}, not 1")));
            }
        }
        Ok(Channel { rows, cols, q })
    }

    pub(crate) fn row(&self, x: usize) -> &[f64] {
        &self.q[x * self.cols..(x + 1) * self.cols]
    }

    /// The output distribution Σ_x p(x) q(y|x).
    pub(crate) fn output(&self, p: &[f64]) -> Vec<f64> {
        let mut r = vec![0.0; self.cols];
        for (x, px) in p.iter().enumerate() {
            for (ry, qy) in r.iter_mut().zip(self.row(x)) {
                *ry += px * qy;
            }
        }
        r
    }

    /// I(X; Y) in bits for the input distribution p.
    pub(crate) fn mutual_information(&self, p: &[f64]) -> f64 {
        let r = self.output(p);
        let mut i = 0.0;
        for (x, px) in p.iter().enumerate() {
            if *px == 0.0 {
                continue;
            }
            for (qy, ry) in self.row(x).iter().zip(&r) {
                // p·q can underflow to 0 (an output letter BA is driving out of the support):
                // its term is 0 in the limit, and must not become 0·∞.
                let w = px * qy;
                if w > 0.0 {
                    i += w * (qy / ry).log2();
                }
            }
        }
        i.max(0.0)
    }

    /// E[d(X, Y)] for a distortion matrix d (rows × cols, row-major).
    #[cfg(test)]
    pub(crate) fn expected_distortion(&self, p: &[f64], d: &[f64]) -> f64 {
        let mut e = 0.0;
        for (x, px) in p.iter().enumerate() {
            for (y, qy) in self.row(x).iter().enumerate() {
                e += px * qy * d[x * self.cols + y];
            }
        }
        e
    }

    /// ε = max ln q(y|x)/q(y|x′) in nats (Algorithm 3); ∞ when some column has a zero beside a
    /// non-zero; 0 for a single-row channel.
    #[cfg(test)]
    pub(crate) fn epsilon(&self) -> f64 {
        let mut eps: f64 = 0.0;
        for y in 0..self.cols {
            let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
            for x in 0..self.rows {
                let v = self.q[x * self.cols + y];
                lo = lo.min(v);
                hi = hi.max(v);
            }
            if hi == 0.0 {
                continue;
            }
            if lo == 0.0 {
                return f64::INFINITY;
            }
            eps = eps.max((hi / lo).ln());
        }
        eps
    }

    /// A sampler of the channel's output on input `x`: x̂ ~ q(·|x), by inversion of the row's
    /// cumulative sums. An output of probability 0 is never drawn.
    pub(crate) fn sampler(&self, x: usize) -> RowSampler {
        let mut total = 0.0;
        let cumulative = self
            .row(x)
            .iter()
            .map(|q| {
                total += q;
                total
            })
            .collect();
        // The last letter of positive probability: where U·total rounds up to the total.
        let last = self.row(x).iter().rposition(|&q| q > 0.0).unwrap_or(0);
        RowSampler {
            cumulative,
            total,
            last,
        }
    }

    /// Sums out an auxiliary output: q(x̂|x) = Σ_z q(x̂, z|x) with outputs laid out x̂-major.
    pub(crate) fn marginal(&self, nz: usize) -> Channel {
        let m = self.cols / nz;
        let mut q = vec![0.0; self.rows * m];
        for x in 0..self.rows {
            for xh in 0..m {
                q[x * m + xh] = self.row(x)[xh * nz..(xh + 1) * nz].iter().sum();
            }
        }
        Channel {
            rows: self.rows,
            cols: m,
            q,
        }
    }
}

/// Draws the output of one row of a [`Channel`] ([`Channel::sampler`]).
#[derive(Debug, Clone)]
pub(crate) struct RowSampler {
    cumulative: Vec<f64>,
    total: f64,
    last: usize,
}

impl RowSampler {
    /// One output letter: the first whose cumulative sum exceeds U·total, U uniform on [0, 1).
    /// Since U·total < total, that letter exists, and a letter whose q is 0 never is the first
    /// to exceed it (its cumulative sum equals its predecessor's).
    pub fn sample<R: rand::Rng + ?Sized>(&self, rng: &mut R) -> usize {
        let u = rng.random::<f64>() * self.total;
        let i = self.cumulative.partition_point(|&c| c <= u);
        // U·total can round up to the total (a sum that rounded down): the last letter of
        // positive probability is the one whose interval holds it.
        i.min(self.last)
    }
}

/// Shannon entropy in bits.
pub(crate) fn entropy_bits(p: &[f64]) -> f64 {
    -p.iter()
        .filter(|v| **v > 0.0)
        .map(|v| v * v.log2())
        .sum::<f64>()
}

/// Binary entropy in bits.
#[cfg(test)]
fn h2(d: f64) -> f64 {
    entropy_bits(&[d, 1.0 - d])
}

/// The distortion measure on a shared alphabet of size m.
#[derive(Debug, Clone, PartialEq)]
pub enum Distortion {
    /// d(x, x̂) = [x ≠ x̂]. Its kernel e^{−λd} = c·11ᵀ + (1−c)·I is applied in O(m) per row
    /// instead of O(m²): the same iterates, cheaper.
    Hamming,
    /// Any m × m matrix of non-negative entries, row-major.
    Matrix(Vec<f64>),
}

impl Distortion {
    #[cfg(test)]
    pub(crate) fn matrix(&self, m: usize) -> Vec<f64> {
        match self {
            Distortion::Hamming => (0..m * m)
                .map(|i| if i / m == i % m { 0.0 } else { 1.0 })
                .collect(),
            Distortion::Matrix(d) => d.clone(),
        }
    }
}

/// What Algorithm 1 returns.
#[derive(Debug, Clone)]
pub struct OptimalChannel {
    /// The final r(x̂, z) (x̂-major, z fastest; `nz` = 1 without Z) and normalisers Z_x: the
    /// channel q(x̂, z|x) = r(x̂, z) e^{−λd(x, x̂)}/Z_x is built from them only on request, since a
    /// sweep over a large alphabet rarely needs the m × m·|Z| matrix.
    r: Vec<f64>,
    z: Vec<f64>,
    lambda: f64,
    d: Distortion,
    pub nz: usize,
    /// The MI of the last iteration as Algorithm 2 computes it, with the r(x̂, z) the channel was
    /// built from (bits).
    pub mi: f64,
    /// E[d(X, X̂)] of the returned channel.
    pub distortion: f64,
    /// Iterations of the WHILE loop (Algorithm 1, lines 5–16).
    pub iterations: usize,
    /// Whether |I₀ − I| < T was reached before the iteration cap.
    pub converged: bool,
    /// ε of q(x̂|x) (nats), from ln q(x̂|x) = ln r(x̂) − λd(x, x̂) − ln Z_x: the ratio of two
    /// entries of a column does not involve r, so it is exact even where BA has driven r(x̂)
    /// below the smallest double and the stored entries underflow to 0 (which would read as
    /// ε = ∞ although every entry of the returned channel is positive).
    pub epsilon: f64,
}

impl OptimalChannel {
    fn kernel(&self, x: usize, xh: usize, m: usize) -> f64 {
        match &self.d {
            Distortion::Hamming if x == xh => 1.0,
            Distortion::Hamming => (-self.lambda).exp(),
            Distortion::Matrix(dm) => (-self.lambda * dm[x * m + xh]).exp(),
        }
    }

    /// q(x̂, z|x) with outputs laid out x̂-major (z fastest), rows renormalised against rounding.
    pub(crate) fn joint_channel(&self) -> Channel {
        let m = self.z.len();
        let n = m * self.nz;
        let mut q = vec![0.0; m * n];
        for x in 0..m {
            for xh in 0..m {
                let k = self.kernel(x, xh, m) / self.z[x];
                for j in xh * self.nz..(xh + 1) * self.nz {
                    q[x * n + j] = self.r[j] * k;
                }
            }
            let row = &mut q[x * n..(x + 1) * n];
            let s: f64 = row.iter().sum();
            row.iter_mut().for_each(|v| *v /= s);
        }
        Channel {
            rows: m,
            cols: n,
            q,
        }
    }

    /// The privacy channel q(x̂|x) = Σ_z q(x̂, z|x) (Algorithm 3, steps 1–2).
    pub(crate) fn channel(&self) -> Channel {
        self.joint_channel().marginal(self.nz)
    }
}

/// Upper bound on BA iterations: a λ sweep must finish even where convergence is slow.
pub(crate) const MAX_ITERATIONS: usize = 1_000_000;

/// Blahut–Arimoto exactly as the paper's Algorithm 1: r₀(x̂, z) uniform; q(x̂, z|x) ∝
/// r(x̂, z)·e^{−λ d(x, x̂)}; I by Algorithm 2 (Σ p q log(q/r), with the r the channel was built
/// from); r ← Σ_x p(x) q(x̂, z|x); stop when |I₀ − I| < T (the printed relation between I₀ − I
/// and T is lost in the text; the absolute change is the usual BA rule).
///
/// `nz` is the size of the auxiliary alphabet Z of Problem 2 (1 = none). The distortion does
/// not depend on z, so from the uniform start r stays uniform in z and the channel's z part
/// carries no information about x: I(X; X̂, Z) equals the no-Z value. That is what the
/// algorithm as written does; see the w20-fig7 pipeline.
pub fn blahut_arimoto(
    p: &[f64],
    d: &Distortion,
    lambda: f64,
    threshold: f64,
    nz: usize,
) -> Result<OptimalChannel, ChannelError> {
    blahut_arimoto_with(p, d, lambda, threshold, nz, true)
}

/// [`blahut_arimoto`], with Hamming steps taken cheaply where they can be (`cheap`, see
/// [`hamming_terms_cheap`]) or every one in full (the tests' reference: the iteration as it
/// was before issue #39).
fn blahut_arimoto_with(
    p: &[f64],
    d: &Distortion,
    lambda: f64,
    threshold: f64,
    nz: usize,
    cheap: bool,
) -> Result<OptimalChannel, ChannelError> {
    check_distribution(p)?;
    if !(lambda.is_finite() && lambda > 0.0) {
        return Err(ChannelError(format!(
            "λ = {lambda} is invalid: must be > 0"
        )));
    }
    if !(threshold.is_finite() && threshold > 0.0) {
        return Err(ChannelError(format!(
            "T = {threshold} is invalid: must be > 0"
        )));
    }
    if nz == 0 {
        return Err(ChannelError(
            "the auxiliary alphabet Z must have at least one value".into(),
        ));
    }
    let m = p.len();
    if let Distortion::Matrix(dm) = d {
        if dm.len() != m * m {
            return Err(ChannelError(format!(
                "the distortion matrix has {} entries; the alphabet has {m} values, so it needs {}",
                dm.len(),
                m * m
            )));
        }
        if let Some(v) = dm.iter().find(|v| !(v.is_finite() && **v >= 0.0)) {
            return Err(ChannelError(format!(
                "distortion {v} is invalid: must be finite and ≥ 0"
            )));
        }
    }
    let s: f64 = p.iter().sum();
    let p: Vec<f64> = p.iter().map(|v| v / s).collect();
    let n = m * nz; // output alphabet (x̂, z)
    let mut ba = Kernel::new(d, m, lambda);
    ba.cheap = cheap;
    let mut r = vec![1.0 / n as f64; n];
    let mut z = vec![0.0; m]; // Z_x = Σ_j r_j e^{−λ d(x, x̂_j)}
    let mut w = vec![0.0; m]; // p(x)/Z_x

    // Steps 2–4: q₀ from r₀, I₀, r from q₀.
    let mut i0 = ba.step(&p, &r, nz, &mut z, &mut w);
    ba.update(&w, nz, &mut r);
    let mut iterations = 0;
    loop {
        iterations += 1;
        let i = ba.step(&p, &r, nz, &mut z, &mut w);
        let done = (i0 - i).abs() < threshold;
        if done || iterations >= MAX_ITERATIONS {
            let dist = ba.distortion(&p, &r, &z, nz);
            let ln_z: Vec<f64> = z.iter().map(|v| v.ln()).collect();
            let epsilon = match d {
                Distortion::Hamming => log_ratio_max(&ln_z, lambda, &[], true),
                Distortion::Matrix(dm) => log_ratio_max(&ln_z, lambda, dm, false),
            };
            return Ok(OptimalChannel {
                r,
                z,
                lambda,
                d: d.clone(),
                nz,
                mi: i,
                distortion: dist,
                iterations,
                converged: done,
                epsilon,
            });
        }
        i0 = i;
        ba.update(&w, nz, &mut r);
    }
}

/// ε of a BA channel from ln Z: max over x̂ of [max_x (−λd(x, x̂) − ln Z_x)] +
/// [max_x′ (λd(x′, x̂) + ln Z_x′)]. O(m²) in general; for Hamming distortion the inner maxima
/// over x ≠ x̂ come from the two smallest and two largest ln Z, so O(m).
fn log_ratio_max(ln_z: &[f64], lambda: f64, d: &[f64], hamming: bool) -> f64 {
    let m = ln_z.len();
    let mut epsilon: f64 = 0.0;
    if hamming && m == 1 {
        // One input value: no neighbour to tell it from (and no matrix to read below).
        return 0.0;
    }
    if hamming {
        // Indices of the smallest and largest ln Z, and the runner-up values.
        let (mut lo, mut hi) = (0, 0);
        for x in 1..m {
            if ln_z[x] < ln_z[lo] {
                lo = x;
            }
            if ln_z[x] > ln_z[hi] {
                hi = x;
            }
        }
        let lo2 = (0..m)
            .filter(|&x| x != lo)
            .map(|x| ln_z[x])
            .fold(f64::INFINITY, f64::min);
        let hi2 = (0..m)
            .filter(|&x| x != hi)
            .map(|x| ln_z[x])
            .fold(f64::NEG_INFINITY, f64::max);
        for xh in 0..m {
            let min_other = if xh == lo { lo2 } else { ln_z[lo] };
            let max_other = if xh == hi { hi2 } else { ln_z[hi] };
            let a = (-ln_z[xh]).max(-lambda - min_other);
            let b = ln_z[xh].max(lambda + max_other);
            epsilon = epsilon.max(a + b);
        }
        return epsilon;
    }
    for xh in 0..m {
        let (mut a, mut b) = (f64::NEG_INFINITY, f64::NEG_INFINITY);
        for x in 0..m {
            let ld = lambda * d[x * m + xh];
            a = a.max(-ld - ln_z[x]);
            b = b.max(ld + ln_z[x]);
        }
        epsilon = epsilon.max(a + b);
    }
    epsilon
}

/// The kernel e^{−λ d} and the two products one BA iteration needs.
struct Kernel {
    lambda: f64,
    /// Hamming: c = e^{−λ}; Matrix: the full kernel and the distortion matrix.
    c: f64,
    k: Option<(Vec<f64>, Vec<f64>)>,
    m: usize,
    /// Scratch of length m: s(x̂) = Σ_z r(x̂, z), the per-x terms of the MI, and the two halves
    /// of each ln Z_x ([`hamming_terms`]).
    s: Vec<f64>,
    ti: Vec<f64>,
    f: Vec<f64>,
    sq: Vec<f64>,
    /// E[d] of the last step (Matrix, which computes it along the way).
    dist: f64,
    /// The reference of the cheap Hamming steps ([`hamming_terms_cheap`]): 1/Z_x and ln Z_x of
    /// the last full step, valid once one has run (`have_ref`); `cheap` = false runs every step
    /// in full (the tests' reference).
    y_ref: Vec<f64>,
    l_ref: Vec<f64>,
    have_ref: bool,
    cheap: bool,
    /// Σ w of the last step when its pass summed it, and Σ r after the last update when the
    /// update summed it (cheap steps, nz = 1): then not summed again.
    sum_w: Option<f64>,
    sum_r: Option<f64>,
    /// Σ p, for the −λ·Σp of the cheap steps' MI.
    p_sum: Option<f64>,
}

impl Kernel {
    fn new(d: &Distortion, m: usize, lambda: f64) -> Kernel {
        let k = match d {
            Distortion::Hamming => None,
            Distortion::Matrix(dm) => {
                Some((dm.iter().map(|v| (-lambda * v).exp()).collect(), dm.clone()))
            }
        };
        Kernel {
            lambda,
            c: (-lambda).exp(),
            k,
            m,
            s: vec![0.0; m],
            ti: vec![0.0; m],
            f: vec![0.0; m],
            sq: vec![0.0; m],
            dist: 0.0,
            y_ref: vec![0.0; m],
            l_ref: vec![0.0; m],
            have_ref: false,
            cheap: true,
            sum_w: None,
            sum_r: None,
            p_sum: None,
        }
    }

    /// Z_x and w_x = p_x/Z_x for the current r; returns I in bits as Algorithm 2 computes it.
    /// [`Kernel::distortion`] then gives the expected distortion of the channel built from r.
    fn step(&mut self, p: &[f64], r: &[f64], nz: usize, z: &mut [f64], w: &mut [f64]) -> f64 {
        let m = self.m;
        let lambda = self.lambda;
        let i_nats = match &self.k {
            None => {
                // s(x̂) = Σ_z r(x̂, z); Z_x = c·Σs + (1−c)·s(x); P(x̂ = x | x) = s(x)/Z_x.
                // Σ_j q log(q/r) = Σ_j q (−λ d − ln Z) = −λ d_x − ln Z_x. The per-x terms go to
                // a buffer and are summed after, so the loops (the whole cost of a sweep)
                // vectorise. The stopping rule needs only the MI: the distortion is computed
                // for the returned channel alone.
                let c = self.c;
                let total = match self.sum_r.take() {
                    Some(t) if nz == 1 => t,
                    _ => sum4(r),
                };
                let s: &[f64] = if nz == 1 {
                    r
                } else {
                    for (x, sx) in self.s.iter_mut().enumerate() {
                        *sx = r[x * nz..(x + 1) * nz].iter().sum();
                    }
                    &self.s
                };
                let (ti, f, sq) = (&mut self.ti, &mut self.f, &mut self.sq);
                let (y_ref, l_ref) = (&mut self.y_ref, &mut self.l_ref);
                // The cheap step where Z is within its bound of the reference everywhere;
                // otherwise (the first steps, and when Z has moved) the full step, whose 1/Z
                // and ln Z become the reference.
                if self.cheap && self.have_ref {
                    let sums = hamming_terms_cheap_dispatch(
                        c, total, lambda, p, s, z, w, ti, y_ref, l_ref,
                    );
                    if sums.over == 0 {
                        self.sum_w = Some(sums.w);
                        let p_sum = *self.p_sum.get_or_insert_with(|| sum_lanes(p));
                        let i_nats = (-lambda).mul_add(p_sum, sums.mi_terms);
                        return (i_nats / std::f64::consts::LN_2).max(0.0);
                    }
                }
                self.sum_w = None;
                hamming_terms_dispatch(c, total, lambda, p, s, z, w, ti, f, sq);
                for ((y, l), &zx) in y_ref.iter_mut().zip(l_ref.iter_mut()).zip(&*z) {
                    *y = 1.0 / zx;
                    *l = ln_normal(zx);
                }
                self.have_ref = true;
                sum4(&self.ti)
            }
            Some((k, d)) => {
                let (mut dist, mut i_nats) = (0.0, 0.0);
                for x in 0..m {
                    let (mut zx, mut dx) = (0.0, 0.0);
                    for xh in 0..m {
                        let s: f64 = r[xh * nz..(xh + 1) * nz].iter().sum();
                        let kv = k[x * m + xh] * s;
                        zx += kv;
                        dx += kv * d[x * m + xh];
                    }
                    z[x] = zx;
                    w[x] = p[x] / zx;
                    let dx = dx / zx;
                    dist += p[x] * dx;
                    if p[x] > 0.0 {
                        i_nats += p[x] * (-lambda * dx - zx.ln());
                    }
                }
                self.dist = dist;
                i_nats
            }
        };
        (i_nats / std::f64::consts::LN_2).max(0.0)
    }

    /// E[d(X, X̂)] of the channel the last [`Kernel::step`] built from r (the same r).
    fn distortion(&self, p: &[f64], r: &[f64], z: &[f64], nz: usize) -> f64 {
        match &self.k {
            None => hamming_distortion(p, if nz == 1 { r } else { &self.s }, z),
            Some(_) => self.dist,
        }
    }

    /// r_j ← r_j · Σ_x w_x e^{−λ d(x, x̂_j)} (the factor is the same for every z of an x̂).
    fn update(&mut self, w: &[f64], nz: usize, r: &mut [f64]) {
        let m = self.m;
        match &self.k {
            None => {
                let c = self.c;
                let sw = self.sum_w.take().unwrap_or_else(|| sum4(w));
                if nz == 1 && self.cheap {
                    self.sum_r = Some(hamming_update_sum_dispatch(c, sw, w, r));
                } else if nz == 1 {
                    for (rj, wj) in r.iter_mut().zip(w) {
                        *rj *= c * sw + (1.0 - c) * wj;
                    }
                } else {
                    for xh in 0..m {
                        let v = c * sw + (1.0 - c) * w[xh];
                        r[xh * nz..(xh + 1) * nz].iter_mut().for_each(|rj| *rj *= v);
                    }
                }
            }
            Some((k, _)) => {
                for xh in 0..m {
                    let v: f64 = (0..m).map(|x| w[x] * k[x * m + xh]).sum();
                    r[xh * nz..(xh + 1) * nz].iter_mut().for_each(|rj| *rj *= v);
                }
            }
        }
    }
}

/// The symmetric channel on m values (k-ary randomized response) with expected Hamming
/// distortion D: q(x|x) = 1 − D, q(x̂|x) = D/(m−1) otherwise. Its distortion is D whatever the
/// prior, and it is ε-DP with ε = ln((1 − D)(m − 1)/D).
pub(crate) fn symmetric_channel(m: usize, d: f64) -> Result<Channel, ChannelError> {
    if m < 2 {
        return Err(ChannelError(format!(
            "a symmetric channel needs at least 2 values, got {m}"
        )));
    }
    let dmax = (m - 1) as f64 / m as f64;
    if !(0.0..=dmax).contains(&d) {
        return Err(ChannelError(format!(
            "distortion D = {d} is invalid for {m} values: must be in [0, {dmax}] (beyond, the channel prefers wrong answers)"
        )));
    }
    let off = d / (m - 1) as f64;
    let q = (0..m * m)
        .map(|i| if i / m == i % m { 1.0 - d } else { off })
        .collect();
    Ok(Channel {
        rows: m,
        cols: m,
        q,
    })
}

/// ε of the symmetric channel with distortion D (nats).
pub(crate) fn symmetric_epsilon(m: usize, d: f64) -> f64 {
    ((1.0 - d) * (m - 1) as f64 / d).ln()
}

/// The distortion of the symmetric channel with privacy ε: D = (m − 1)/(e^ε + m − 1).
pub(crate) fn symmetric_distortion_for_epsilon(m: usize, eps: f64) -> Result<f64, ChannelError> {
    if eps.is_nan() || eps < 0.0 || m < 2 {
        return Err(ChannelError(format!(
            "ε = {eps} is invalid: must be ≥ 0 (and m ≥ 2)"
        )));
    }
    Ok((m - 1) as f64 / (eps.exp() + (m - 1) as f64))
}

/// The distortion at which the symmetric channel leaks `mi` bits about X ~ p. MI falls
/// monotonically from H(X) at D = 0 to 0 at D = (m−1)/m, so bisection finds the root; there is
/// no closed form for a non-uniform prior.
pub(crate) fn symmetric_distortion_for_mi(p: &[f64], mi: f64) -> Result<f64, ChannelError> {
    check_distribution(p)?;
    let m = p.len();
    let h = entropy_bits(p);
    if !(0.0..=h).contains(&mi) {
        return Err(ChannelError(format!(
            "MI = {mi} bits is invalid for this source: must be in [0, H(X) = {h:.6}]"
        )));
    }
    let f = |d: f64| symmetric_channel(m, d).map(|c| c.mutual_information(p) - mi);
    let (mut lo, mut hi) = (0.0, (m - 1) as f64 / m as f64);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if f(mid)? > 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo < 1e-15 {
            break;
        }
    }
    Ok(0.5 * (lo + hi))
}

/// The rate–distortion function of a uniform source on m values with Hamming distortion
/// (bits): R(D) = log2 m − h(D) − D log2(m − 1) for D ≤ (m−1)/m, else 0.
#[cfg(test)]
pub(crate) fn uniform_hamming_rd(m: usize, d: f64) -> f64 {
    let dmax = (m - 1) as f64 / m as f64;
    if d >= dmax {
        return 0.0;
    }
    (m as f64).log2() - h2(d) - d * ((m - 1) as f64).log2()
}

mod hamming;
use hamming::*;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod underflow_tests;
