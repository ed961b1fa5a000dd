//! Which of the two evaluations of a kernel sum a call takes: the direct one (a distance and
//! an exponential per point and centre) or the factored one (`factored.rs`).
//!
//! Points snapped to a grid have few distinct values per coordinate (the `grid_floor` of
//! h14-table3.2 and 3.3: CSN at σ = 10 is 92 109 cells of d = 8 with 8 357 distinct values over
//! its 8 coordinates). For them the kernel, a product over the coordinates, is cheaper
//! factored (`kernel/factored.rs`, whose doc gives the method and its error bound): per centre
//! and bandwidth, an exponential per distinct value of each coordinate and a multiply per node
//! of the trie of the sorted points, instead of a distance and an exponential per point.
//! [`mean_answers`](super::mean_answers) takes the cheaper of the two by a cost rule that reads the points and the
//! bandwidths only, never the CPU or the thread count, so a call gives the same bits
//! everywhere (the two evaluations' answers differ from each other by rounding, each within
//! 10⁻¹² of the exact ones). In nanoseconds per centre:
//!
//! - direct: n·(0.051·d + 0.6·#exp + 0.1·#mul), #exp and #mul the plan's exponentials and
//!   multiplies ("Several bandwidths at once");
//! - factored: #σ·(1.0·Σ_k |V_k| + 0.2·ops), twice that when Σ_k |V_k| > 2¹⁴ (the tables,
//!   128 bytes per value, then outgrow a 2 MB L2), ops the walk's operations (the trie's
//!   nodes, plus each run's path from the root and padding).
//!
//! The constants are times measured on one core of this project's machine (a shared 2-core
//! Xeon with AVX-512), by `kernel_factored_1e3` in benches/kernel_queries.rs and on the real
//! point sets, marginal per centre (the trie costs ~35 ms per call at n = 9·10⁴, d = 8);
//! "values" is Σ_k |V_k|, "rule" the rule's direct / factored estimates:
//!
//! | points (σ)                          | n      | values | ops     | direct µs | factored µs | rule    |
//! |-------------------------------------|--------|--------|---------|-----------|-------------|---------|
//! | CSN floor (10)                      | 92 109 | 8 357  | 164 215 | 93        | 40          | 94 / 41 |
//! | CSN floor (4)                       | 47 329 | 688    | 95 602  | 47        | 16          | 48 / 20 |
//! | PKS floor (4), d = 19               | 5 754  | 243    | 40 358  | 9.2       | 6.3         | 9.0 / 8.3 |
//! | CTG floor (2), d = 27               | 433    | 54     | 5 116   | 0.87      | 0.90        | 0.86 / 1.1 |
//! | CRM floor (2), d = 101              | 1 992  | 202    | 149 953 | 11.5      | 33          | 11 / 30 |
//! | CSN raw (one continuous column)     | 99 762 | 67 160 | 167 271 | 96        | 158         | 101 / 201 |
//!
//! (CRM's floor has 2 values per axis but almost every point on a branch of its own; raw CSN's
//! tables are too big.) The rule costs a sort per coordinate on every call (until the columns
//! sorted so far already lose), and a sort of the points only when the tables alone would not
//! already lose. The Taylor series, where its rule takes a bandwidth, comes first and is
//! faster still: of the grid floors, CSN's at σ = 6, 8, 10 take it (10⁴ queries at σ = 10,
//! one loaded core: series 0.7 s, factored 7.5 s, direct 16.7 s), and the factored sum serves
//! CSN's at σ = 2 and 4 (σ = 4: 2.7 s against 8.4 s) and PKS's at σ = 2 and 4.

use super::{factored, power_cost, Source, Step};

/// The cost rule above: the trie of the points if the factored evaluation is
/// the cheaper by it, else None. The distinct values are counted first (a sort per
/// coordinate, until the tables so far already cost more than the direct evaluation); the
/// points are sorted into a trie only if the tables alone cost less than the direct
/// evaluation.
pub(super) fn cheaper_trie(
    points: &[f64],
    weights: Option<&[f64]>,
    dim: usize,
    plan: &[Step],
) -> Option<factored::Trie> {
    let n = points.len() / dim;
    let direct = direct_cost(n, dim, plan);
    let (mut entries, mut fewest_ops) = (0, 0);
    let mut columns = Vec::with_capacity(dim);
    for k in 0..dim {
        let column = factored::distinct_column(points, dim, k);
        entries += column.len();
        // Every distinct value is at least one node.
        fewest_ops = fewest_ops.max(column.len());
        // The cost only grows with more columns: once the tables of these alone lose, the
        // other columns need no sort (continuous points lose at the first: at one σ the
        // other sorts were ~10 % of a call on (1993, 101) and (5875, 19), kernel_queries_1e3).
        if factored_cost(entries, fewest_ops, plan.len()) >= direct {
            return None;
        }
        columns.push(column);
    }
    let trie = factored::Trie::new(points, weights, dim, &columns)?;
    (factored_cost(trie.table_len(), trie.ops(), plan.len()) < direct).then_some(trie)
}

/// Time per centre of the direct evaluation, in nanoseconds (see "Two evaluations"): per
/// point, a distance of `dim` coordinates and the plan's exponentials and multiplies.
fn direct_cost(n: usize, dim: usize, plan: &[Step]) -> f64 {
    let (mut exps, mut multiplies) = (0, 0);
    for step in plan {
        match step.source {
            Source::Exp(_) => exps += 1,
            Source::Power { k, .. } => multiplies += power_cost(k),
        }
    }
    n as f64
        * (DIRECT_PER_COORD * dim as f64
            + DIRECT_PER_EXP * f64::from(exps)
            + DIRECT_PER_MULTIPLY * f64::from(multiplies))
}

/// Time per centre of the factored evaluation, as [`direct_cost`]: per bandwidth, a table of
/// `entries` exponentials and a walk of `ops` operations, twice as dear beyond
/// [`FACTORED_L2_ENTRIES`].
fn factored_cost(entries: usize, ops: usize, sigmas: usize) -> f64 {
    let memory = if entries > FACTORED_L2_ENTRIES {
        2.0
    } else {
        1.0
    };
    sigmas as f64 * memory * (FACTORED_PER_ENTRY * entries as f64 + FACTORED_PER_OP * ops as f64)
}

/// The cost rule's constants: nanoseconds per centre on one core of the machine the rule was
/// measured on (a 2-core Xeon with AVX-512, shared; benches/kernel_queries.rs,
/// `kernel_factored_1e3`). Direct, per point: a coordinate of the distance, an exponential
/// (and its sum), a multiply of a power (and its sum's share).
const DIRECT_PER_COORD: f64 = 0.051;
const DIRECT_PER_EXP: f64 = 0.6;
const DIRECT_PER_MULTIPLY: f64 = 0.1;
/// Factored, per bandwidth: a table entry (an exponential and its argument), an operation of
/// the walk.
const FACTORED_PER_ENTRY: f64 = 1.0;
const FACTORED_PER_OP: f64 = 0.2;
/// Table entries beyond which the tables (128 bytes per value at 16 centres side by side) no
/// longer fit the measuring machine's 2 MB L2: entries and operations then cost twice as much
/// (measured 1.9× on raw CSN, 67 160 values).
const FACTORED_L2_ENTRIES: usize = 1 << 14;
