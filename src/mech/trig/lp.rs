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
/// fixed association order keeps results bit-reproducible.
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

/// `bᵀp − max_j W_jᵀp` with `p` the given row duals clipped into `[−1, 1]`: the value of
/// a feasible point of the dual, hence a lower bound on the optimum.
fn dual_bound(w: &[f64], rows: usize, b: &[f64], duals: &[f64]) -> f64 {
    let p: Vec<f64> = duals.iter().map(|y| y.clamp(-1.0, 1.0)).collect();
    let max_col = w
        .chunks_exact(rows)
        .map(|col| dot(col, &p))
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
        let mut candidates: Vec<(f64, usize)> = self
            .w
            .chunks_exact(self.rows)
            .enumerate()
            .filter(|&(j, _)| !self.in_master[j])
            .map(|(j, col)| (-(dot(col, y) + y0), j))
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
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_distr::{Distribution, Exp1};
    use rand_pcg::Pcg64;

    fn uniform_w(rng: &mut Pcg64, rows: usize, cols: usize) -> Vec<f64> {
        (0..rows * cols)
            .map(|_| rng.random_range(-1.0..=1.0))
            .collect()
    }

    /// First `rows` multi-indices of ℕ^d by total degree, ties in reverse lexicographic
    /// order, as in the peer script.
    fn multi_indices(d: usize, rows: usize) -> Vec<Vec<usize>> {
        let mut out = Vec::new();
        let mut degree = 0;
        while out.len() < rows {
            let mut level: Vec<Vec<usize>> = Vec::new();
            let mut idx = vec![0; d];
            loop {
                if idx.iter().sum::<usize>() == degree {
                    level.push(idx.clone());
                }
                let Some(k) = (0..d).rev().find(|&k| idx[k] < degree) else {
                    break;
                };
                idx[k] += 1;
                idx[k + 1..].fill(0);
            }
            level.sort_by(|a, b| b.cmp(a));
            out.extend(level);
            degree += 1;
        }
        out.truncate(rows);
        out
    }

    /// `W[r, k] = Π_j cos(r_j · arccos(a_kj))` with `a_k ~ U[−1, 1]^d`.
    fn chebyshev_w(rng: &mut Pcg64, d: usize, rows: usize, cols: usize) -> Vec<f64> {
        let index = multi_indices(d, rows);
        let mut w = Vec::with_capacity(rows * cols);
        for _ in 0..cols {
            let theta: Vec<f64> = (0..d)
                .map(|_| rng.random_range(-1.0f64..=1.0).acos())
                .collect();
            w.extend(index.iter().map(|r| {
                r.iter()
                    .zip(&theta)
                    .map(|(&k, t)| (k as f64 * t).cos())
                    .product::<f64>()
            }));
        }
        w
    }

    fn dirichlet(rng: &mut Pcg64, n: usize) -> Vec<f64> {
        let g: Vec<f64> = (0..n).map(|_| Exp1.sample(rng)).collect();
        let total: f64 = g.iter().sum();
        g.into_iter().map(|x| x / total).collect()
    }

    fn matvec(w: &[f64], rows: usize, u: &[f64]) -> Vec<f64> {
        let mut out = vec![0.0; rows];
        for (col, &uj) in w.chunks_exact(rows).zip(u) {
            for (o, x) in out.iter_mut().zip(col) {
                *o += uj * x;
            }
        }
        out
    }

    /// `b = W u0 + Laplace(scale)` with `u0 ~ Dirichlet(1)`, the peer's right-hand side.
    fn noisy_rhs(rng: &mut Pcg64, w: &[f64], rows: usize, scale: f64) -> Vec<f64> {
        let u0 = dirichlet(rng, w.len() / rows);
        let mut b = matvec(w, rows, &u0);
        for x in &mut b {
            let e: f64 = Exp1.sample(rng);
            *x += if rng.random::<bool>() { e } else { -e } * scale;
        }
        b
    }

    fn fit(w: &[f64], rows: usize, b: &[f64], method: LpMethod) -> L1Fit {
        let opts = LpOptions {
            method,
            ..LpOptions::default()
        };
        l1_simplex_fit(w, rows, b, &opts).unwrap()
    }

    /// The invariants every fit must satisfy, including an independent recomputation of
    /// the objective and a certified gap.
    fn check_fit(w: &[f64], rows: usize, b: &[f64], f: &L1Fit) {
        let cols = w.len() / rows;
        assert!(!f.support.is_empty());
        assert!(f.support.windows(2).all(|p| p[0].0 < p[1].0));
        assert!(f.support.iter().all(|&(j, u)| j < cols && u > 0.0));
        let total: f64 = f.support.iter().map(|&(_, u)| u).sum();
        assert!((total - 1.0).abs() < 1e-12, "weights sum to {total}");
        let mut u = vec![0.0; cols];
        for &(j, x) in &f.support {
            u[j] = x;
        }
        let objective: f64 = matvec(w, rows, &u)
            .iter()
            .zip(b)
            .map(|(p, q)| (p - q).abs())
            .sum();
        assert!((objective - f.objective).abs() <= 1e-12 * objective.max(1.0));
        assert!(f.objective - f.dual_bound <= 1e-7 * f.objective.max(1.0));
        assert!(f.dual_bound <= f.objective + 1e-9);
    }

    fn assert_agree(w: &[f64], rows: usize, b: &[f64]) -> L1Fit {
        let cg = fit(w, rows, b, LpMethod::ColumnGeneration);
        let full = fit(w, rows, b, LpMethod::Full);
        check_fit(w, rows, b, &cg);
        check_fit(w, rows, b, &full);
        let scale = full.objective.abs().max(1.0);
        assert!(
            (cg.objective - full.objective).abs() <= 1e-7 * scale,
            "R = {rows}, C = {}: column generation {} vs full {}",
            w.len() / rows,
            cg.objective,
            full.objective
        );
        assert!(cg.support.len() <= rows + 1, "support {}", cg.support.len());
        cg
    }

    #[test]
    fn column_generation_matches_full_on_uniform_w() {
        let mut rng = Pcg64::seed_from_u64(1);
        let shapes = [
            (1, 1),
            (1, 7),
            (4, 1),
            (2, 30),
            (5, 200),
            (12, 12),
            (20, 1000),
            (40, 25),
            (8, 3000),
            (60, 800),
        ];
        for (rows, cols) in shapes {
            let w = uniform_w(&mut rng, rows, cols);
            let b = noisy_rhs(&mut rng, &w, rows, 0.05);
            assert_agree(&w, rows, &b);
            let far: Vec<f64> = (0..rows).map(|_| rng.random_range(-3.0..=3.0)).collect();
            assert_agree(&w, rows, &far);
        }
    }

    #[test]
    fn column_generation_matches_full_on_chebyshev_w() {
        let mut rng = Pcg64::seed_from_u64(2);
        for (d, rows, cols) in [(1, 6, 300), (2, 15, 800), (4, 35, 1000), (4, 60, 1200)] {
            let w = chebyshev_w(&mut rng, d, rows, cols);
            for scale in [0.01, 0.3] {
                let b = noisy_rhs(&mut rng, &w, rows, scale);
                let cg = assert_agree(&w, rows, &b);
                assert!(cg.columns_used < cols || cols <= 2 * (rows + 1));
            }
        }
    }

    /// Integer-valued W with repeated columns makes many ties and degenerate pivots, the
    /// situation where the anti-cycling rule matters.
    #[test]
    fn degenerate_instances_match_full() {
        let mut rng = Pcg64::seed_from_u64(3);
        for (rows, cols) in [(3, 40), (10, 300), (25, 600)] {
            let distinct: Vec<f64> = (0..rows * cols / 4)
                .map(|_| f64::from(rng.random_range(-1i32..=1)))
                .collect();
            let w: Vec<f64> = distinct.iter().cycle().take(rows * cols).copied().collect();
            let b: Vec<f64> = (0..rows)
                .map(|_| f64::from(rng.random_range(-2i32..=2)) / 2.0)
                .collect();
            assert_agree(&w, rows, &b);
        }
    }

    #[test]
    fn exact_mixture_is_fitted_exactly() {
        let mut rng = Pcg64::seed_from_u64(4);
        for (rows, cols) in [(3, 10), (30, 500), (60, 3000)] {
            let w = chebyshev_w(&mut rng, 3, rows, cols);
            let b = matvec(&w, rows, &dirichlet(&mut rng, cols));
            let f = fit(&w, rows, &b, LpMethod::ColumnGeneration);
            check_fit(&w, rows, &b, &f);
            assert!(f.objective < 1e-9, "objective {}", f.objective);
            assert!(f.support.len() <= rows + 1);
        }
    }

    /// R = 1 with b above every entry: the optimum puts all mass on the largest entry.
    #[test]
    fn one_row_far_outside_picks_the_nearest_column() {
        let mut rng = Pcg64::seed_from_u64(5);
        let w = uniform_w(&mut rng, 1, 50);
        let (arg_max, max) =
            w.iter()
                .enumerate()
                .fold((0, f64::MIN), |a, (j, &x)| if x > a.1 { (j, x) } else { a });
        let (arg_min, min) =
            w.iter()
                .enumerate()
                .fold((0, f64::MAX), |a, (j, &x)| if x < a.1 { (j, x) } else { a });
        for method in [LpMethod::ColumnGeneration, LpMethod::Full] {
            let up = fit(&w, 1, &[5.0], method);
            assert!((up.objective - (5.0 - max)).abs() < 1e-8);
            let down = fit(&w, 1, &[-5.0], method);
            assert!((down.objective - (min + 5.0)).abs() < 1e-8);
            if method == LpMethod::ColumnGeneration {
                assert_eq!(up.support, vec![(arg_max, 1.0)]);
                assert_eq!(down.support, vec![(arg_min, 1.0)]);
            }
        }
        let inside = fit(&w, 1, &[0.5 * (max + min)], LpMethod::ColumnGeneration);
        check_fit(&w, 1, &[0.5 * (max + min)], &inside);
        assert!(inside.objective < 1e-12);
        assert!(inside.support.len() <= 2);
    }

    #[test]
    fn two_rows_closed_form() {
        // Columns (1, 0) and (0, 1); b = (1, 1): any convex combination leaves |1-t|+|t| = 1.
        let w = [1.0, 0.0, 0.0, 1.0];
        let f = fit(&w, 2, &[1.0, 1.0], LpMethod::ColumnGeneration);
        assert!((f.objective - 1.0).abs() < 1e-12);
        // b = (0.25, 0.75) is the mixture 1/4, 3/4.
        let f = fit(&w, 2, &[0.25, 0.75], LpMethod::ColumnGeneration);
        assert_eq!(f.support.len(), 2);
        assert!((f.support[0].1 - 0.25).abs() < 1e-12);
        assert!(f.objective < 1e-12);
    }

    #[test]
    fn deterministic_bits() {
        let mut rng = Pcg64::seed_from_u64(6);
        let w = chebyshev_w(&mut rng, 4, 40, 2000);
        let b = noisy_rhs(&mut rng, &w, 40, 0.01);
        let a = fit(&w, 40, &b, LpMethod::ColumnGeneration);
        let c = fit(&w, 40, &b, LpMethod::ColumnGeneration);
        assert_eq!(a.objective.to_bits(), c.objective.to_bits());
        assert_eq!(a.support, c.support);
        assert_eq!((a.rounds, a.pivots), (c.rounds, c.pivots));
    }

    #[test]
    fn small_columns_per_round_still_converges() {
        let mut rng = Pcg64::seed_from_u64(7);
        let w = chebyshev_w(&mut rng, 2, 20, 1000);
        let b = noisy_rhs(&mut rng, &w, 20, 0.05);
        let reference = fit(&w, 20, &b, LpMethod::Full);
        let opts = LpOptions {
            columns_per_round: Some(1),
            ..LpOptions::default()
        };
        let f = l1_simplex_fit(&w, 20, &b, &opts).unwrap();
        check_fit(&w, 20, &b, &f);
        assert!((f.objective - reference.objective).abs() < 1e-7);
        assert!(f.rounds > 1);
    }

    #[test]
    fn pivot_limit_is_an_error() {
        let mut rng = Pcg64::seed_from_u64(8);
        let w = uniform_w(&mut rng, 10, 100);
        let b = noisy_rhs(&mut rng, &w, 10, 0.1);
        let opts = LpOptions {
            max_pivots: 1,
            ..LpOptions::default()
        };
        assert!(matches!(
            l1_simplex_fit(&w, 10, &b, &opts),
            Err(LpError::PivotLimit(1))
        ));
    }

    #[test]
    fn bad_input_is_rejected() {
        let w = [0.5, -0.5, 0.25, 1.0];
        let b = [0.1, 0.2];
        let opts = LpOptions::default();
        for method in [LpMethod::ColumnGeneration, LpMethod::Full] {
            let opts = LpOptions {
                method,
                ..opts.clone()
            };
            let run = |w: &[f64], rows, b: &[f64]| l1_simplex_fit(w, rows, b, &opts);
            assert!(matches!(run(&w, 0, &b), Err(LpError::NoRows)));
            assert!(matches!(run(&[], 2, &b), Err(LpError::NoColumns)));
            assert!(matches!(
                run(&w[..3], 2, &b),
                Err(LpError::RaggedMatrix { len: 3, rows: 2 })
            ));
            assert!(matches!(
                run(&w, 2, &b[..1]),
                Err(LpError::RhsLength {
                    expected: 2,
                    found: 1
                })
            ));
            let mut bad_w = w;
            bad_w[2] = f64::NAN;
            assert!(matches!(
                run(&bad_w, 2, &b),
                Err(LpError::NonFinite {
                    what: "W",
                    index: 2,
                    ..
                })
            ));
            assert!(matches!(
                run(&w, 2, &[0.0, f64::INFINITY]),
                Err(LpError::NonFinite {
                    what: "b",
                    index: 1,
                    ..
                })
            ));
            assert!(run(&w, 2, &b).is_ok());
        }
        for tolerance in [0.0, -1.0, f64::NAN] {
            let opts = LpOptions {
                tolerance,
                ..LpOptions::default()
            };
            assert!(matches!(
                l1_simplex_fit(&w, 2, &b, &opts),
                Err(LpError::BadTolerance(_))
            ));
        }
        let message = LpError::SolverStatus {
            status: SolverStatus::NumericalError,
            iterations: 7,
            detail: String::new(),
        }
        .to_string();
        assert!(message.contains("NumericalError"), "{message}");
    }
}
