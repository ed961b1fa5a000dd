//! Minimum-ℓ₁ fit of a vector by a convex combination of columns:
//!
//! ```text
//!     min_u ‖W u − b‖₁   subject to   u ≥ 0,  Σ_j u_j = 1,
//! ```
//!
//! with `W` a dense R×C matrix (R basis functions evaluated at C candidate points) and `b`
//! the noisy basis-function values of the private data. This is the weight-fitting step of
//! the trigonometric mechanism (Huang 2014, Algorithm 4 line 20 and Algorithm 9 line 23):
//! the synthetic database puts mass `u_j` on candidate point `j`.
//!
//! # Method
//!
//! As a linear programme with `u` and the split residual `v, w ≥ 0`:
//!
//! ```text
//!     min 1ᵀv + 1ᵀw   s.t.  W u − v + w = b,  1ᵀu = 1,  u, v, w ≥ 0          (P)
//!     max bᵀπ + π₀    s.t.  Wᵀπ + π₀ 1 ≤ 0,  −1 ≤ π ≤ 1                      (D)
//! ```
//!
//! ((D) is `max t − bᵀy s.t. t ≤ (Wᵀy)_j ∀j, −1 ≤ y ≤ 1` with `y = −π`, `t = π₀`.)
//! (P) has only R + 1 rows but C ≫ R columns, and an optimal basic solution has at most
//! R + 1 non-zero `u_j`. [`LpMethod::ColumnGeneration`] exploits both: a restricted master
//! holding all 2R residual columns and a small working set of `u` columns is solved by a
//! dense revised primal simplex (explicit basis inverse, product-form updates, periodic
//! refactorisation, devex pricing, Harris ratio test, Bland's rule after a run of
//! degenerate pivots). Its duals price all C columns in one `Wᵀπ` pass; the most negative reduced costs join the
//! working set and the simplex continues from the current basis, which stays primal
//! feasible. A simplex master rather than an interior-point one is used because it warm
//! starts after columns are added and ends at a vertex, so the returned support has at most
//! R + 1 points without any crossover. Devex rather than Dantzig pricing halves the pivot
//! count on the peer instances (R = 200: 18 600 → 7 900 pivots); a master simplex with
//! `O(R·|working set|)` work per pivot is far cheaper than a simplex over all C columns.
//!
//! [`LpMethod::Full`] solves (P) in one clarabel interior-point call. It is the reference
//! for tests; its support is that of an interior solution and is typically not sparse.
//!
//! # Optimality check
//!
//! Because `1ᵀu = 1`, for master-optimal duals `(π, π₀)` (so `|π| ≤ 1`) the value `bᵀπ + π₀ + min_j d_j`,
//! where `d_j = −(W_jᵀπ + π₀)` is the reduced cost of column `j`, is a lower bound on the
//! optimum: column generation stops once every reduced cost is ≥ −`tolerance`, which bounds
//! the optimality gap by `tolerance`. Independently, the returned
//! [`L1Fit::dual_bound`] is recomputed from `π` clipped to `[−1, 1]`, a feasible point of
//! (D), as `bᵀπ − max_j W_jᵀπ`; `objective − dual_bound` is a certified gap for both
//! methods.

use clarabel::algebra::CscMatrix;
use clarabel::solver::{
    DefaultSettingsBuilder, DefaultSolver, IPSolver, SolverStatus, SupportedConeT,
};
use nalgebra::DMatrix;

use crate::mech::fastmath::per_isa;

/// How to solve the LP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LpMethod {
    /// Restricted master solved by a dense simplex, columns priced in from all of `W`.
    ColumnGeneration,
    /// The whole LP in one clarabel solve: slow, the reference.
    Full,
}

/// Solver settings.
#[derive(Debug, Clone, PartialEq)]
pub struct LpOptions {
    pub method: LpMethod,
    /// Absolute optimality tolerance: column generation stops when no reduced cost is below
    /// `−tolerance`, so the objective is within `tolerance` of the optimum. For
    /// [`LpMethod::Full`] it is the gap an `AlmostSolved` clarabel result must certify.
    pub tolerance: f64,
    /// Columns added to the master per pricing round; `None` picks `R + 1`, one basis'
    /// worth.
    pub columns_per_round: Option<usize>,
    /// Cap on simplex pivots over all rounds ([`LpMethod::ColumnGeneration`] only).
    pub max_pivots: usize,
}

impl Default for LpOptions {
    fn default() -> Self {
        LpOptions {
            method: LpMethod::ColumnGeneration,
            tolerance: 1e-9,
            columns_per_round: None,
            max_pivots: 1_000_000,
        }
    }
}

/// The fitted weights.
#[derive(Debug, Clone, PartialEq)]
pub struct L1Fit {
    /// `(column index, weight)`, increasing in index, weights > 0 summing to 1.
    pub support: Vec<(usize, f64)>,
    /// `‖W u − b‖₁` recomputed at the returned `u`.
    pub objective: f64,
    /// A certified lower bound on the optimum (see the module docs).
    pub dual_bound: f64,
    /// Pricing rounds (1 for [`LpMethod::Full`]).
    pub rounds: usize,
    /// Columns of `W` the final master held (C for [`LpMethod::Full`]).
    pub columns_used: usize,
    /// Simplex pivots (clarabel iterations for [`LpMethod::Full`]).
    pub pivots: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum LpError {
    #[error("W must have at least one row (rows = 0)")]
    NoRows,
    #[error("W must have at least one column (C = 0)")]
    NoColumns,
    #[error("W has {len} entries, which is not a multiple of rows = {rows}")]
    RaggedMatrix { len: usize, rows: usize },
    #[error("b has {found} entries but W has {expected} rows")]
    RhsLength { expected: usize, found: usize },
    #[error("{what}[{index}] = {value} is not finite")]
    NonFinite {
        what: &'static str,
        index: usize,
        value: f64,
    },
    #[error("tolerance must be finite and positive, got {0}")]
    BadTolerance(f64),
    #[error("clarabel rejected the problem: {0}")]
    SolverSetup(String),
    #[error("clarabel stopped with status {status} after {iterations} iterations{detail}")]
    SolverStatus {
        status: SolverStatus,
        iterations: u32,
        detail: String,
    },
    #[error("numerical failure: {0}")]
    Numerical(&'static str),
    #[error("simplex reached the pivot limit ({0}) before optimality")]
    PivotLimit(usize),
}

/// Minimise `‖W u − b‖₁` over the probability simplex.
///
/// `w` is column-major: column `j` (one candidate point's `rows` basis values) is
/// `w[j*rows .. (j+1)*rows]`.
pub fn l1_simplex_fit(
    w: &[f64],
    rows: usize,
    b: &[f64],
    opts: &LpOptions,
) -> Result<L1Fit, LpError> {
    if rows == 0 {
        return Err(LpError::NoRows);
    }
    if !w.len().is_multiple_of(rows) {
        return Err(LpError::RaggedMatrix { len: w.len(), rows });
    }
    if w.is_empty() {
        return Err(LpError::NoColumns);
    }
    if b.len() != rows {
        return Err(LpError::RhsLength {
            expected: rows,
            found: b.len(),
        });
    }
    check_finite("W", w)?;
    check_finite("b", b)?;
    if !(opts.tolerance.is_finite() && opts.tolerance > 0.0) {
        return Err(LpError::BadTolerance(opts.tolerance));
    }
    match opts.method {
        LpMethod::ColumnGeneration => column_generation(w, rows, b, opts),
        LpMethod::Full => full_clarabel(w, rows, b, opts),
    }
}

fn check_finite(what: &'static str, xs: &[f64]) -> Result<(), LpError> {
    match xs.iter().position(|x| !x.is_finite()) {
        Some(index) => Err(LpError::NonFinite {
            what,
            index,
            value: xs[index],
        }),
        None => Ok(()),
    }
}

/// Eight independent accumulators let the compiler vectorise and pipeline the sum; the
/// fixed association order keeps results bit-reproducible (on every instruction set: plain
/// multiplies and adds, never fused). Always inlined, so that inside [`column_dots`] it is
/// compiled for that copy's instruction set.
#[inline(always)]
fn dot(a: &[f64], b: &[f64]) -> f64 {
    let mut acc = [0.0; 8];
    let ca = a.chunks_exact(8);
    let cb = b.chunks_exact(8);
    let tail: f64 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail
}

/// Turns raw weights into a support summing to 1 and evaluates the objective there, so
/// the reported objective is that of what the caller actually gets.
fn finish(
    w: &[f64],
    rows: usize,
    b: &[f64],
    weights: impl Iterator<Item = (usize, f64)>,
) -> (Vec<(usize, f64)>, f64) {
    let mut support: Vec<(usize, f64)> = weights.filter(|&(_, u)| u > 0.0).collect();
    support.sort_by_key(|&(j, _)| j);
    let total: f64 = support.iter().map(|&(_, u)| u).sum();
    for (_, u) in &mut support {
        *u /= total;
    }
    let mut residual = b.to_vec();
    for &(j, u) in &support {
        for (r, wij) in residual.iter_mut().zip(&w[j * rows..(j + 1) * rows]) {
            *r -= u * wij;
        }
    }
    let objective = residual.iter().map(|r| r.abs()).sum();
    (support, objective)
}

per_isa! {
    /// `W_jᵀy` for every column `j` of `w` (`rows` values each), in `out` (one per column).
    ///
    /// Why per instruction set: this pass over all of W (every pricing round, and the dual
    /// bound) was about half of the LP's time on h14-table3.2, and the compiler builds [`dot`]
    /// two lanes at a time even where the CPU has four or eight (seen in its assembly: no
    /// wider copy comes from autovectorisation). The wide copies hold [`dot`]'s eight
    /// accumulators in two AVX2 registers and run the same multiplies and adds in the same order, so they give
    /// the baseline's bits (tested).
    fn column_dots(w: &[f64], rows: usize, y: &[f64], out: &mut [f64]) {
        // AVX-512's intrinsics are stable only after this crate's minimum Rust (1.87): its
        // copy takes the AVX2 one (a CPU with AVX-512 has AVX2).
        avx512: for (o, col) in out.iter_mut().zip(w.chunks_exact(rows)) {
            // SAFETY: this copy runs only on a CPU with AVX-512, hence AVX2.
            *o = unsafe { dot_avx2(col, y) };
        },
        avx2: for (o, col) in out.iter_mut().zip(w.chunks_exact(rows)) {
            // SAFETY: this copy runs only on a CPU with AVX2 (the dispatcher's check).
            *o = unsafe { dot_avx2(col, y) };
        },
        baseline: for (o, col) in out.iter_mut().zip(w.chunks_exact(rows)) {
            *o = dot(col, y);
        },
    }
}

/// [`dot`] with its eight accumulators in two AVX2 registers (lanes 0–3 and 4–7).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn dot_avx2(a: &[f64], b: &[f64]) -> f64 {
    use std::arch::x86_64::{
        _mm256_add_pd, _mm256_loadu_pd, _mm256_mul_pd, _mm256_setzero_pd, _mm256_storeu_pd,
    };
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ta, tb) = (ca.remainder(), cb.remainder());
    let (mut lo, mut hi) = (_mm256_setzero_pd(), _mm256_setzero_pd());
    for (x, y) in ca.zip(cb) {
        // SAFETY: x and y are eight f64 each (unaligned loads of four).
        let (xl, xh, yl, yh) = unsafe {
            (
                _mm256_loadu_pd(x.as_ptr()),
                _mm256_loadu_pd(x.as_ptr().add(4)),
                _mm256_loadu_pd(y.as_ptr()),
                _mm256_loadu_pd(y.as_ptr().add(4)),
            )
        };
        lo = _mm256_add_pd(lo, _mm256_mul_pd(xl, yl));
        hi = _mm256_add_pd(hi, _mm256_mul_pd(xh, yh));
    }
    let mut lanes = [0.0; 8];
    // SAFETY: `lanes` holds eight f64.
    unsafe {
        _mm256_storeu_pd(lanes.as_mut_ptr(), lo);
        _mm256_storeu_pd(lanes.as_mut_ptr().add(4), hi);
    }
    reduce(&lanes, ta, tb)
}

/// [`dot`]'s last steps: the tail's products summed in order, then the fixed tree of the
/// eight accumulators plus the tail.
#[inline(always)]
fn reduce(acc: &[f64; 8], ta: &[f64], tb: &[f64]) -> f64 {
    let tail: f64 = ta.iter().zip(tb).map(|(x, y)| x * y).sum();
    ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail
}

/// [`column_dots`] into a new vector.
fn all_column_dots(w: &[f64], rows: usize, y: &[f64]) -> Vec<f64> {
    let mut out = vec![0.0; w.len() / rows];
    column_dots(w, rows, y, &mut out);
    out
}

/// `bᵀp − max_j W_jᵀp` with `p` the given row duals clipped into `[−1, 1]`: the value of
/// a feasible point of the dual, hence a lower bound on the optimum.
fn dual_bound(w: &[f64], rows: usize, b: &[f64], duals: &[f64]) -> f64 {
    let p: Vec<f64> = duals.iter().map(|y| y.clamp(-1.0, 1.0)).collect();
    let max_col = all_column_dots(w, rows, &p)
        .into_iter()
        .fold(f64::NEG_INFINITY, f64::max);
    dot(b, &p) - max_col
}

fn column_generation(
    w: &[f64],
    rows: usize,
    b: &[f64],
    opts: &LpOptions,
) -> Result<L1Fit, LpError> {
    let per_round = opts.columns_per_round.unwrap_or(rows + 1).max(1);
    let start = w
        .chunks_exact(rows)
        .map(|col| col.iter().zip(b).map(|(x, y)| (x - y).abs()).sum::<f64>())
        .enumerate()
        .fold((0, f64::INFINITY), |best, (j, dist)| {
            if dist < best.1 {
                (j, dist)
            } else {
                best
            }
        })
        .0;
    let mut master = Master::new(w, rows, b, start)?;
    let mut rounds = 0;
    loop {
        master.solve(opts.tolerance, opts.max_pivots)?;
        rounds += 1;
        let entering = master.price_all(opts.tolerance, per_round);
        if entering.is_empty() {
            break;
        }
        master.add_columns(&entering);
    }
    let (support, objective) = finish(w, rows, b, master.weights());
    if support.is_empty() {
        return Err(LpError::Numerical(
            "the final basis holds no positive weight",
        ));
    }
    Ok(L1Fit {
        support,
        objective,
        dual_bound: dual_bound(w, rows, b, &master.pi[..rows]),
        rounds,
        columns_used: master.ids.len(),
        pivots: master.pivots,
    })
}

/// Pivot elements smaller than this are refused, so the basis stays well conditioned.
const PIVOT_TOL: f64 = 1e-9;
/// Primal infeasibility the Harris ratio test may tolerate in exchange for a larger pivot.
const FEAS_TOL: f64 = 1e-9;
/// Consecutive pivots without objective progress after which Bland's rule takes over to
/// rule out cycling.
const STALL_LIMIT: usize = 50;

/// Restricted master of (P): all 2R residual columns plus the working set of `u` columns.
///
/// Variables are numbered `v_i = i`, `w_i = R + i` (columns `−e_i`, `+e_i`, cost 1) and
/// working-set column `s` as `2R + s` (cost 0); this order is also Bland's order.
struct Master<'a> {
    w: &'a [f64],
    b: &'a [f64],
    rows: usize,
    /// R + 1: the residual rows and the convexity row.
    m: usize,
    /// Working-set columns, `m` values each: the column of W, then 1 for `Σu = 1`.
    cols: Vec<f64>,
    /// Column of W behind each working-set column.
    ids: Vec<usize>,
    in_master: Vec<bool>,
    basis: Vec<usize>,
    is_basic: Vec<bool>,
    /// Values of the basic variables, row by row.
    x: Vec<f64>,
    /// Basis inverse, row-major, so that `B⁻¹a` and the dual accumulation run along rows.
    binv: Vec<f64>,
    pi: Vec<f64>,
    /// Reduced cost of every variable, updated with each pivot's row of `B⁻¹A`.
    d: Vec<f64>,
    /// Devex reference weights: estimates of the squared edge lengths `‖B⁻¹a_j‖²`.
    weight: Vec<f64>,
    alpha: Vec<f64>,
    /// The pivot row of `B⁻¹` before the update.
    rho: Vec<f64>,
    column: Vec<f64>,
    updates: usize,
    refactor_every: usize,
    pivots: usize,
}

impl<'a> Master<'a> {
    /// Starts from `u = e_start` with each residual row's slack (`w_i` if the residual is
    /// ≥ 0, else `v_i`) basic, a feasible basis with no phase 1 needed.
    fn new(w: &'a [f64], rows: usize, b: &'a [f64], start: usize) -> Result<Self, LpError> {
        let m = rows + 1;
        let n_cols = w.len() / rows;
        let col = &w[start * rows..(start + 1) * rows];
        let mut basis: Vec<usize> = (0..rows)
            .map(|i| if b[i] - col[i] >= 0.0 { rows + i } else { i })
            .collect();
        basis.push(2 * rows);
        let mut is_basic = vec![false; 2 * rows];
        let slack_costs = vec![1.0; 2 * rows];
        for &v in &basis[..rows] {
            is_basic[v] = true;
        }
        let mut master = Master {
            w,
            b,
            rows,
            m,
            cols: Vec::new(),
            ids: Vec::new(),
            in_master: vec![false; n_cols],
            basis,
            is_basic,
            x: vec![0.0; m],
            binv: vec![0.0; m * m],
            pi: vec![0.0; m],
            d: slack_costs,
            weight: vec![1.0; 2 * rows],
            alpha: vec![0.0; m],
            rho: vec![0.0; m],
            column: vec![0.0; m],
            updates: 0,
            refactor_every: m.max(100),
            pivots: 0,
        };
        master.add_columns(&[start]);
        master.is_basic[2 * rows] = true;
        master.refactor()?;
        master.reprice();
        Ok(master)
    }

    fn add_columns(&mut self, js: &[usize]) {
        for &j in js {
            self.ids.push(j);
            self.in_master[j] = true;
            self.cols
                .extend_from_slice(&self.w[j * self.rows..(j + 1) * self.rows]);
            self.cols.push(1.0);
            self.is_basic.push(false);
            self.d.push(0.0);
            self.weight.push(1.0);
        }
        // A new column set starts a new devex reference framework: weights carried over
        // from earlier rounds grow without bound and, measured, multiply the pivot count.
        self.weight.fill(1.0);
        self.reprice();
    }

    fn fill_column(&self, var: usize, out: &mut [f64]) {
        let r = self.rows;
        if var < 2 * r {
            out.fill(0.0);
            out[var % r] = if var < r { -1.0 } else { 1.0 };
        } else {
            let s = var - 2 * r;
            out.copy_from_slice(&self.cols[s * self.m..(s + 1) * self.m]);
        }
    }

    /// Recomputes `B⁻¹` and `x_B` from scratch, discarding the rounding that product-form
    /// updates accumulate.
    fn refactor(&mut self) -> Result<(), LpError> {
        let m = self.m;
        let mut basis_matrix = DMatrix::<f64>::zeros(m, m);
        let mut column = vec![0.0; m];
        for (k, &var) in self.basis.iter().enumerate() {
            self.fill_column(var, &mut column);
            basis_matrix.column_mut(k).copy_from_slice(&column);
        }
        let inverse = basis_matrix
            .lu()
            .try_inverse()
            .ok_or(LpError::Numerical("the simplex basis became singular"))?;
        for i in 0..m {
            for j in 0..m {
                self.binv[i * m + j] = inverse[(i, j)];
            }
        }
        for i in 0..m {
            let row = &self.binv[i * m..(i + 1) * m];
            self.x[i] = dot(&row[..self.rows], self.b) + row[self.rows];
        }
        self.updates = 0;
        Ok(())
    }

    /// Exact duals `πᵀ = c_Bᵀ B⁻¹` (only residual columns have non-zero cost, 1) and
    /// reduced costs from scratch, discarding the drift of the incremental updates.
    fn reprice(&mut self) {
        let (m, r) = (self.m, self.rows);
        self.pi.fill(0.0);
        for (k, &var) in self.basis.iter().enumerate() {
            if var < 2 * r {
                for (p, bk) in self.pi.iter_mut().zip(&self.binv[k * m..(k + 1) * m]) {
                    *p += bk;
                }
            }
        }
        for i in 0..r {
            self.d[i] = 1.0 + self.pi[i];
            self.d[r + i] = 1.0 - self.pi[i];
        }
        for (d, col) in self.d[2 * r..].iter_mut().zip(self.cols.chunks_exact(m)) {
            *d = -dot(col, &self.pi);
        }
        for &var in &self.basis {
            self.d[var] = 0.0;
        }
    }

    /// Entering variable: the largest devex ratio `d_j² / weight_j` among reduced costs
    /// below `−tol`, or with `bland` the first such variable.
    fn choose_entering(&self, tol: f64, bland: bool) -> Option<usize> {
        let mut candidates = self
            .d
            .iter()
            .enumerate()
            .filter(|&(v, &d)| d < -tol && !self.is_basic[v]);
        if bland {
            return candidates.next().map(|(v, _)| v);
        }
        candidates
            .fold(None, |best: Option<(usize, f64)>, (v, &d)| {
                let score = d * d / self.weight[v];
                match best {
                    Some((_, s)) if s >= score => best,
                    _ => Some((v, score)),
                }
            })
            .map(|(v, _)| v)
    }

    /// Harris two-pass ratio test on `alpha = B⁻¹ a_q`: the step is bounded using a
    /// slightly relaxed feasibility, then among the rows blocking within that step the
    /// largest pivot (or with `bland` the smallest variable index) leaves.
    fn choose_leaving(&self, bland: bool) -> Option<usize> {
        let bound = self
            .alpha
            .iter()
            .zip(&self.x)
            .filter(|(&a, _)| a > PIVOT_TOL)
            .map(|(&a, &x)| (x.max(0.0) + FEAS_TOL) / a)
            .fold(f64::INFINITY, f64::min);
        if bound == f64::INFINITY {
            return None;
        }
        let mut best: Option<usize> = None;
        for i in 0..self.m {
            let a = self.alpha[i];
            if a <= PIVOT_TOL || self.x[i].max(0.0) / a > bound {
                continue;
            }
            best = match best {
                None => Some(i),
                Some(k) if bland && self.basis[i] < self.basis[k] => Some(i),
                Some(k) if !bland && a > self.alpha[k] => Some(i),
                keep => keep,
            };
        }
        best
    }

    /// Updates reduced costs and devex weights with the pivot row `α_r = ρᵀA`,
    /// `ρ = e_rᵀB⁻¹` (one pass over the master, as costly as pricing it), then `x_B`,
    /// `B⁻¹` and the basis.
    fn pivot(&mut self, q: usize, r: usize) {
        let (m, rows) = (self.m, self.rows);
        let alpha_r = self.alpha[r];
        let d_q = self.d[q];
        let w_q = self.weight[q];
        self.rho.copy_from_slice(&self.binv[r * m..(r + 1) * m]);
        let leaving = self.basis[r];
        let update = |v: usize, a_rj: f64, d: &mut f64, w: &mut f64| {
            if v != q && !self.is_basic[v] && a_rj != 0.0 {
                let ratio = a_rj / alpha_r;
                *d -= d_q * ratio;
                *w = w.max(ratio * ratio * w_q);
            }
        };
        let (d_slack, d_cols) = self.d.split_at_mut(2 * rows);
        let (w_slack, w_cols) = self.weight.split_at_mut(2 * rows);
        for i in 0..rows {
            update(i, -self.rho[i], &mut d_slack[i], &mut w_slack[i]);
            update(
                rows + i,
                self.rho[i],
                &mut d_slack[rows + i],
                &mut w_slack[rows + i],
            );
        }
        for (s, ((col, d), w)) in self
            .cols
            .chunks_exact(m)
            .zip(d_cols.iter_mut())
            .zip(w_cols.iter_mut())
            .enumerate()
        {
            if !self.is_basic[2 * rows + s] {
                update(2 * rows + s, dot(col, &self.rho), d, w);
            }
        }
        self.d[q] = 0.0;
        self.d[leaving] = -d_q / alpha_r;
        self.weight[leaving] = (w_q / (alpha_r * alpha_r)).max(1.0);
        let theta = self.x[r].max(0.0) / self.alpha[r];
        for (x, a) in self.x.iter_mut().zip(&self.alpha) {
            *x -= theta * a;
        }
        self.x[r] = theta;
        let (head, rest) = self.binv.split_at_mut(r * m);
        let (pivot_row, tail) = rest.split_at_mut(m);
        let inv = 1.0 / self.alpha[r];
        for v in pivot_row.iter_mut() {
            *v *= inv;
        }
        for (i, row) in head
            .chunks_exact_mut(m)
            .chain(tail.chunks_exact_mut(m))
            .enumerate()
        {
            let a = self.alpha[if i < r { i } else { i + 1 }];
            if a != 0.0 {
                for (v, p) in row.iter_mut().zip(pivot_row.iter()) {
                    *v -= a * p;
                }
            }
        }
        self.is_basic[leaving] = false;
        self.is_basic[q] = true;
        self.basis[r] = q;
        self.updates += 1;
        self.pivots += 1;
    }

    /// Primal simplex on the master until no reduced cost is below `−tol`; optimality is
    /// only declared right after a refactorisation, so the duals handed to pricing are
    /// accurate.
    fn solve(&mut self, tol: f64, max_pivots: usize) -> Result<(), LpError> {
        let m = self.m;
        let mut stalled = 0;
        loop {
            let bland = stalled >= STALL_LIMIT;
            let Some(q) = self.choose_entering(tol, bland) else {
                if self.updates == 0 {
                    return Ok(());
                }
                self.refactor()?;
                self.reprice();
                continue;
            };
            if self.pivots >= max_pivots {
                return Err(LpError::PivotLimit(max_pivots));
            }
            let mut column = std::mem::take(&mut self.column);
            self.fill_column(q, &mut column);
            for (i, a) in self.alpha.iter_mut().enumerate() {
                *a = dot(&self.binv[i * m..(i + 1) * m], &column);
            }
            self.column = column;
            // (P) is bounded below, so a missing leaving row can only be rounding in the
            // updated inverse or reduced costs: retry once from a fresh factorisation.
            let Some(r) = self.choose_leaving(bland) else {
                if self.updates == 0 {
                    return Err(LpError::Numerical("no leaving variable (unbounded ray)"));
                }
                self.refactor()?;
                self.reprice();
                continue;
            };
            if self.x[r] <= FEAS_TOL {
                stalled += 1;
            } else {
                stalled = 0;
            }
            self.pivot(q, r);
            if self.updates >= self.refactor_every {
                self.refactor()?;
                self.reprice();
            }
        }
    }

    /// Prices every column of W with the current duals and returns up to `limit` columns
    /// not yet in the master with reduced cost below `−tol`, most negative first, ties by
    /// index so the choice is deterministic.
    fn price_all(&self, tol: f64, limit: usize) -> Vec<usize> {
        let y = &self.pi[..self.rows];
        let y0 = self.pi[self.rows];
        let mut candidates: Vec<(f64, usize)> = all_column_dots(self.w, self.rows, y)
            .into_iter()
            .enumerate()
            .filter(|&(j, _)| !self.in_master[j])
            .map(|(j, wy)| (-(wy + y0), j))
            .filter(|&(d, _)| d < -tol)
            .collect();
        let order = |a: &(f64, usize), b: &(f64, usize)| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1));
        if candidates.len() > limit {
            candidates.select_nth_unstable_by(limit - 1, order);
            candidates.truncate(limit);
        }
        candidates.sort_by(order);
        candidates.into_iter().map(|(_, j)| j).collect()
    }

    fn weights(&self) -> impl Iterator<Item = (usize, f64)> + '_ {
        let first = 2 * self.rows;
        self.basis
            .iter()
            .zip(&self.x)
            .filter(move |(&var, _)| var >= first)
            .map(move |(&var, &x)| (self.ids[var - first], x))
    }
}

/// (P) as one clarabel problem: `x = [u; v; w]`, equality rows `[W −I I; 1ᵀ 0 0] x = [b; 1]`
/// (zero cone) and `−x ≤ 0` (non-negative cone).
fn full_clarabel(w: &[f64], rows: usize, b: &[f64], opts: &LpOptions) -> Result<L1Fit, LpError> {
    let n_cols = w.len() / rows;
    let n = n_cols + 2 * rows;
    let m_eq = rows + 1;
    let mut colptr = Vec::with_capacity(n + 1);
    let mut rowval = Vec::with_capacity(w.len() + 2 * n_cols + 6 * rows);
    let mut nzval = Vec::with_capacity(rowval.capacity());
    colptr.push(0);
    for (j, col) in w.chunks_exact(rows).enumerate() {
        for (i, &x) in col.iter().enumerate() {
            if x != 0.0 {
                rowval.push(i);
                nzval.push(x);
            }
        }
        rowval.extend([rows, m_eq + j]);
        nzval.extend([1.0, -1.0]);
        colptr.push(rowval.len());
    }
    for (sign, offset) in [(-1.0, n_cols), (1.0, n_cols + rows)] {
        for i in 0..rows {
            rowval.extend([i, m_eq + offset + i]);
            nzval.extend([sign, -1.0]);
            colptr.push(rowval.len());
        }
    }
    let a = CscMatrix::new(m_eq + n, n, colptr, rowval, nzval);
    let p = CscMatrix::<f64>::zeros((n, n));
    let mut q = vec![0.0; n];
    q[n_cols..].fill(1.0);
    let mut rhs = b.to_vec();
    rhs.push(1.0);
    rhs.resize(m_eq + n, 0.0);
    let cones = [
        SupportedConeT::ZeroConeT(m_eq),
        SupportedConeT::NonnegativeConeT(n),
    ];
    let settings = DefaultSettingsBuilder::default()
        .verbose(false)
        .max_threads(1)
        .tol_gap_abs(1e-10)
        .tol_gap_rel(1e-10)
        .tol_feas(1e-10)
        .build()
        .map_err(|e| LpError::SolverSetup(e.to_string()))?;
    let mut solver = DefaultSolver::new(&p, &q, &a, &rhs, &cones, settings)
        .map_err(|e| LpError::SolverSetup(e.to_string()))?;
    solver.solve();
    let solution = &solver.solution;
    let status = solution.status;
    let (support, objective) = finish(w, rows, b, solution.x[..n_cols].iter().copied().enumerate());
    // clarabel's duals of `Ax + s = b` satisfy `Aᵀz + q = 0`, so (D)'s `π` is `−z`.
    let duals: Vec<f64> = solution.z[..rows].iter().map(|z| -z).collect();
    let bound = dual_bound(w, rows, b, &duals);
    let gap_ok = objective - bound <= opts.tolerance * objective.abs().max(1.0);
    let accepted = match status {
        SolverStatus::Solved => true,
        SolverStatus::AlmostSolved => gap_ok,
        _ => false,
    };
    if !accepted {
        let detail = if status == SolverStatus::AlmostSolved {
            format!(
                "; certified gap {:.3e} exceeds the tolerance",
                objective - bound
            )
        } else {
            String::new()
        };
        return Err(LpError::SolverStatus {
            status,
            iterations: solution.iterations,
            detail,
        });
    }
    if support.is_empty() {
        return Err(LpError::Numerical("clarabel returned no positive weight"));
    }
    Ok(L1Fit {
        support,
        objective,
        dual_bound: bound,
        rounds: 1,
        columns_used: n_cols,
        pivots: solution.iterations as usize,
    })
}

#[cfg(test)]
mod tests;
