//! The factored evaluation of [`mean_answers`](super::mean_answers), for points with few
//! distinct coordinate values (data snapped to a grid).
//!
//! The Gaussian kernel is a product over the coordinates,
//! exp(−‖x − c‖²/(2σ²)) = Π_k exp(−(x_k − c_k)²/(2σ²)), so a centre's kernel sum
//! S(c) = Σ_i u_i Π_k T_k[x_ik] needs only the tables T_k[v] = exp(−(v − c_k)²/(2σ²)) over the
//! distinct values v of each coordinate (Σ_k |V_k| exponentials per centre and bandwidth, where
//! the direct evaluation takes n), and the products of table entries along the points. With the
//! points sorted lexicographically, consecutive points share prefixes: the points are the
//! leaves of a trie whose level j is coordinate `order[j]`, and the walk in sorted order keeps
//! the prefix products P_{j+1} = P_j · T_j[x_ij] of the current point, recomputing only the
//! levels where it differs from the previous one: one multiply per trie node (CSN snapped at
//! σ = 10: 164 215 nodes for 92 109 cells of d = 8, where the direct evaluation takes a
//! distance of 8 fused multiply-adds and an exponential per cell). Levels go by increasing
//! distinct-value count (ties in coordinate order), so that the coordinates that change least
//! are shared most; the order depends on the points only.
//!
//! # The walk
//! The trie is laid out once per call as a list of operations, one per node in depth-first
//! order: "P[j+1] = P[j]·T[value], and add weight·P[j+1] to the sum", with weight 0 for inner
//! nodes and the point's weight u_i at its leaf (an unweighted duplicate adds 1 to its twin's
//! weight, exactly; a weighted one takes its twin's leaf again with its own weight). One loop
//! without data-dependent branches therefore runs the whole trie (a loop over each point's new
//! levels mispredicts at almost every point: most points differ only in their last level, some
//! in more). Adding 0·P (+0) to a sum changes no bit of it, so the sums are those of the
//! leaves alone.
//!
//! The walk runs for 16 (AVX-512) or 8 (AVX2, baseline) centres side by side: tables are laid
//! out [value][centre], 64-byte aligned, so each look-up is one or two whole cache lines, no
//! gather. The points are cut into [`RUNS`] contiguous runs of about equal numbers of
//! operations, each walked from the root with its own prefix products, and the loop takes one
//! operation of each run in turn: four independent chains (a child's product waits on its
//! parent's, through memory), which the CPU overlaps (one run: 1.2× slower, measured on the
//! CSN floor below). Each run sums its leaves in segments of at most [`SEGMENT`], the segments'
//! sums into its total in order, and the runs' totals are added in order.
//!
//! Everything a centre's sum is made of — the runs, the segments, the order of every sum — is
//! fixed by the points alone, and each centre's lane is computed with multiplies and adds only
//! (the exponential's fused multiply-adds round once in hardware or software), so the bits do
//! not depend on which centres share a vector, on the block, the thread or the instruction set.
//!
//! Measured (one core of a loaded 2-core Xeon with AVX-512, 10⁴ centres, σ = 10 on the CSN
//! floor, 92 109 cells, 8 357 values, 164 215 nodes): 40 µs per centre against the direct
//! evaluation's 93 µs; the walk is bound by its look-ups (the last level's table, 6 375 rows
//! of 128 bytes, sits in L2) and the passage of prefix products through memory, not by its
//! multiplies.
//!
//! # Several bandwidths
//! Each bandwidth builds its own tables by exponentials and walks the trie once. (Tables as
//! powers of a wider bandwidth's, as the direct evaluation's plan takes its kernel values, would
//! save exponentials but multiply the error: a product of d entries, each a k-th power, carries
//! k·d times an entry's error, up to 16·101·4·2⁻⁵³ ≈ 7·10⁻¹² at d = 101, over issue #39's
//! 10⁻¹²; and the walk, the larger part of the cost, is per bandwidth either way.)
//!
//! # Error bound (absolute, against the exact answer; u = 2⁻⁵³)
//! - a table entry: its argument s·(v − c)², s = −0.5/(σ·σ), carries six roundings (the
//!   difference, counted twice in its square, the square, σ·σ, the division, the product):
//!   x(1 + θ), |θ| ≤ 6.01u, so e^{x(1+θ)} is within 6.02u·|x| relative of e^x; the
//!   exponential is [`exp_normal`](crate::mech::fastmath::exp_normal), within 4u relative
//!   (2⁻⁵¹, proof in its doc; 0 for arguments below −708, whose true value is under 3.3·10⁻³⁰⁸);
//! - a kernel value, the product of d entries (d − 1 roundings: the first multiplies 1): within
//!   6.02u·|X| + (5d − 1)u relative (first order), X = −‖x − c‖²/(2σ²); over the value e^X ≤ 1,
//!   within 6.02u·|X|e^X + (5d − 1)u ≤ (2.22 + 5d − 1)u < (5d + 1.3)u absolute (|X|e^X ≤ 1/e);
//!   subnormal or zero products (a value under 10⁻³⁰⁰) move by under 10⁻³⁰⁰ absolute more;
//! - a centre's sum: a leaf's term w·K rounds once, then at most SEGMENT − 1 times in its
//!   segment's sum, at most ⌈n/SEGMENT⌉ + RUNS times in its run's total (each run starts a
//!   segment; n points) and RUNS − 1 times in the sum of the runs: within
//!   (SEGMENT + ⌈n/SEGMENT⌉ + 2·RUNS)u·Σ_i |u_i|·K_i = (264 + ⌈n/256⌉)u·Σ_i |u_i|·K_i;
//! - the answer Σ_j α_j S_j (J products, J − 1 additions, then the factor 1/n of a mean,
//!   itself rounded: two more) adds (J + 2)u relative, and Σ|α| ≤ 1.
//!
//! In all, with U = Σ|u_i| (1 for probabilities and for the mean): within
//! (5d + ⌈n/256⌉ + J + 268)·u·U absolute. For CSN snapped at σ = 10 (d = 8, n = 92 109,
//! J = 10): 678u < 7.6·10⁻¹⁴; at d = 101, n = 10⁶: 4 690u < 5.3·10⁻¹³ — within issue #39's
//! 10⁻¹² absolute while 5d + n/256 + J < 8 700. `factored_matches_the_plain_reference`
//! (kernel tests) checks it against the naive double loop.

use super::{KernelMixtures, LANES};
use crate::mech::fastmath::{exp_normal_lanes, per_isa, EXP_LANES};

/// Leaves per segment; segments' sums are added in order, so a sum's rounding error grows with
/// SEGMENT + n/SEGMENT instead of n (the direct evaluation's point block, for the same
/// reason).
pub(super) const SEGMENT: usize = 256;
/// Runs of the points walked side by side (see "The walk").
pub(super) const RUNS: usize = 4;
/// The bit of [`Op::level`] that ends a segment: its run's segment sum goes to its total.
const FLUSH: u32 = 1 << 31;

/// One node of the trie: P[level + 1] = P[level]·T[value], and weight·P[level + 1] into the
/// sum. `value` indexes the concatenated tables (every level's values, level after level);
/// `level` may carry [`FLUSH`].
#[derive(Debug, Clone, Copy, PartialEq)]
struct Op {
    level: u32,
    value: u32,
    weight: f64,
}

/// The points as a trie (see the module doc), laid out once per call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Trie {
    dim: usize,
    /// Level j is coordinate `order[j]`: by increasing distinct-value count, ties in order.
    order: Vec<usize>,
    /// The distinct values of each level's coordinate, increasing, level after level: level j
    /// holds `values[level_starts[j]..level_starts[j + 1]]`.
    values: Vec<f64>,
    level_starts: Vec<usize>,
    /// The walk: rows of RUNS operations, operation s of a row the next node of run s (its
    /// nodes in depth-first order), or padding (level `dim`, a scratch row of the run's prefix
    /// products, weight 0) where a run has ended.
    ops: Vec<Op>,
    /// Nodes of the trie.
    nodes: usize,
}

/// The distinct values of each coordinate of the points (n × dim, row-major), increasing in
/// the total order (bit-identical values are one value; −0 and +0 two).
pub(crate) fn distinct_values(points: &[f64], dim: usize) -> Vec<Vec<f64>> {
    (0..dim).map(|k| distinct_column(points, dim, k)).collect()
}

/// The distinct values of coordinate `k` of the points, sorted: one column of
/// [`distinct_values`].
pub(crate) fn distinct_column(points: &[f64], dim: usize, k: usize) -> Vec<f64> {
    let mut column: Vec<f64> = points.iter().skip(k).step_by(dim).copied().collect();
    column.sort_unstable_by(f64::total_cmp);
    column.dedup_by(|a, b| a.to_bits() == b.to_bits());
    column
}

impl Trie {
    /// The trie of the points (n × dim, row-major, finite) with weights u (None: 1 each, the
    /// caller divides by n) and their per-coordinate distinct values ([`distinct_values`]).
    /// None when an index would not fit in u32 (n·dim ≥ 2³²) or a level would reach
    /// [`FLUSH`].
    pub(crate) fn new(
        points: &[f64],
        weights: Option<&[f64]>,
        dim: usize,
        columns: &[Vec<f64>],
    ) -> Option<Self> {
        let n = points.len() / dim;
        let total: usize = columns.iter().map(Vec::len).sum();
        if u32::try_from(total).is_err()
            || u32::try_from(n.checked_mul(dim)?).is_err()
            || dim >= FLUSH as usize
        {
            return None;
        }
        let mut order: Vec<usize> = (0..dim).collect();
        order.sort_by_key(|&k| columns[k].len());
        let mut level_starts = Vec::with_capacity(dim + 1);
        let mut values = Vec::with_capacity(total);
        for &k in &order {
            level_starts.push(values.len());
            values.extend_from_slice(&columns[k]);
        }
        level_starts.push(values.len());

        // Each point's value indices, level by level (the key its sort compares).
        let mut keys = vec![0u32; n * dim];
        for (x, key) in points.chunks_exact(dim).zip(keys.chunks_exact_mut(dim)) {
            for ((slot, &k), &start) in key.iter_mut().zip(&order).zip(&level_starts) {
                let index = columns[k]
                    .binary_search_by(|v| v.total_cmp(&x[k]))
                    .expect("every coordinate is among its column's values");
                *slot = (start + index) as u32;
            }
        }
        let mut sorted: Vec<usize> = (0..n).collect();
        // Stable: duplicates keep their input order, the order their weights are summed in.
        sorted.sort_by(|&a, &b| keys[a * dim..][..dim].cmp(&keys[b * dim..][..dim]));

        // The leaves in sorted order: (point, first level where it differs from the previous
        // leaf, weight).
        let mut leaves: Vec<(usize, usize, f64)> = Vec::with_capacity(n);
        let mut nodes = 0;
        let mut previous: Option<&[u32]> = None;
        for &i in &sorted {
            let key = &keys[i * dim..][..dim];
            let first = previous.map_or(0, |p| {
                p.iter().zip(key).position(|(a, b)| a != b).unwrap_or(dim)
            });
            previous = Some(key);
            match weights {
                // A duplicate of the previous point: its count (exact) is the weight.
                None if first == dim => leaves.last_mut().expect("a previous leaf").2 += 1.0,
                None => leaves.push((i, first, 1.0)),
                // A weighted duplicate takes its twin's leaf again (the same product, bit for
                // bit) with its own weight: a term of its own, so the error bound counts no
                // merged weights.
                Some(u) => leaves.push((i, first.min(dim - 1), u[i])),
            }
            nodes += dim - first;
        }

        // Runs of about equal numbers of operations, contiguous in the sorted order; each
        // starts at the root (its first leaf takes all dim levels) and ends a segment every
        // SEGMENT leaves and at its end.
        let total: usize = leaves.iter().map(|&(_, first, _)| dim - first).sum();
        let mut runs: Vec<Vec<Op>> = vec![Vec::new(); RUNS];
        let (mut done, mut in_segment) = (0, 0);
        for &(i, first, weight) in &leaves {
            let s = (done * RUNS / total.max(1)).min(RUNS - 1);
            done += dim - first;
            let first = if runs[s].is_empty() {
                in_segment = 0;
                0
            } else {
                first
            };
            if in_segment == SEGMENT {
                runs[s].last_mut().expect("a segment's last leaf").level |= FLUSH;
                in_segment = 0;
            }
            let key = &keys[i * dim..][..dim];
            for (level, &value) in key.iter().enumerate().skip(first) {
                runs[s].push(Op {
                    level: level as u32,
                    value,
                    weight: if level + 1 == dim { weight } else { 0.0 },
                });
            }
            in_segment += 1;
        }
        let rows = runs.iter().map(Vec::len).max().unwrap_or(0);
        let pad = Op {
            level: dim as u32,
            value: 0,
            weight: 0.0,
        };
        let mut ops = vec![pad; rows * RUNS];
        for (s, run) in runs.iter_mut().enumerate() {
            if let Some(last) = run.last_mut() {
                last.level |= FLUSH;
            }
            for (r, &op) in run.iter().enumerate() {
                ops[r * RUNS + s] = op;
            }
        }
        Some(Self {
            dim,
            order,
            values,
            level_starts,
            ops,
            nodes,
        })
    }

    /// Nodes of the trie.
    #[cfg(test)]
    pub(crate) fn nodes(&self) -> usize {
        self.nodes
    }

    /// Operations of the walk: the nodes, one more leaf per weighted duplicate, the levels
    /// above each run's first leaf again, and the padding of the shorter runs:
    /// multiplies per centre and bandwidth.
    pub(crate) fn ops(&self) -> usize {
        self.ops.len()
    }

    /// Σ_k |V_k|: table entries (exponentials) per centre and bandwidth.
    pub(crate) fn table_len(&self) -> usize {
        self.values.len()
    }
}

/// What every block of the factored evaluation reads.
pub(super) struct Factored<'a> {
    pub(super) mix: &'a KernelMixtures,
    pub(super) trie: Trie,
    /// −1/(2σ²) for each bandwidth, in the caller's order.
    pub(super) scales: Vec<f64>,
    pub(super) final_factor: f64,
}

per_isa! {
    /// Answers of queries `first..last` for every σ, laid out [σ][query]: the factored
    /// counterpart of the direct evaluation's `block_answers`. The AVX-512 copy takes 16
    /// centres side by side (two vectors per operation), which halves the walk's bookkeeping
    /// per centre (8 side by side: 1.25× slower per centre; 32: the tables, 256 bytes per
    /// value, outgrow L2). Lanes are independent, so the same bits.
    pub(super) fn block_answers(f: &Factored, first: usize, last: usize) -> Vec<f64> {
        avx512: block_answers_portable::<{ 2 * LANES }>(f, first, last),
        avx2: block_answers_portable::<LANES>(f, first, last),
        baseline: block_answers_portable::<LANES>(f, first, last),
    }
}

/// `WIDTH` centres side by side (a multiple of LANES): which centres share a vector, not how
/// any one's sum is computed.
#[inline(always)]
pub(super) fn block_answers_portable<const WIDTH: usize>(
    f: &Factored,
    first: usize,
    last: usize,
) -> Vec<f64> {
    let (mix, trie) = (f.mix, &f.trie);
    let (dim, per_query) = (mix.dim, mix.per_query);
    let m = (last - first) * per_query;
    let width = m.next_multiple_of(WIDTH);
    let sigmas = f.scales.len();
    let mut totals = vec![0.0; sigmas * width];
    let lines = WIDTH / LANES;
    let mut tables = vec![Line([0.0; LANES]); (trie.values.len() * lines).next_multiple_of(2)];
    let mut prefix = vec![Line([1.0; LANES]); RUNS * (dim + 2) * lines];
    let mut centres = vec![0.0; dim * WIDTH];
    for group in (0..m).step_by(WIDTH) {
        group_centres::<WIDTH>(mix, first * per_query + group, m - group, &mut centres);
        for (s, &scale) in f.scales.iter().enumerate() {
            fill_tables::<WIDTH>(trie, &centres, scale, &mut tables);
            let sums: &mut [f64; WIDTH] = (&mut totals[s * width + group..][..WIDTH])
                .try_into()
                .expect("WIDTH sums");
            *sums = walk::<WIDTH>(trie, &tables, &mut prefix);
        }
    }
    super::answers_from_sums(mix, first, last, &totals, width, f.final_factor)
}

/// Coordinate k of centres `start..start + count.min(WIDTH)` of the family side by side
/// (dim × WIDTH), read from its panels (halving the doubled values is exact); lanes past the
/// count are 0, finite values whose sums are never read.
#[inline(always)]
fn group_centres<const WIDTH: usize>(
    mix: &KernelMixtures,
    start: usize,
    count: usize,
    out: &mut [f64],
) {
    let dim = mix.dim;
    out.fill(0.0);
    for l in 0..count.min(WIDTH) {
        let j = start + l;
        let panel = &mix.panels[(j / LANES) * LANES * dim..][..LANES * dim];
        for k in 0..dim {
            out[k * WIDTH + l] = panel[k * LANES + j % LANES] / 2.0;
        }
    }
}

/// Eight values on a cache line of their own: a table row or prefix product of WIDTH lanes is
/// WIDTH/8 whole lines (a row across three lines, as a plain `Vec<f64>` lays them out, costs
/// the walk's look-ups a third more traffic from L2).
#[derive(Debug, Clone, Copy)]
#[repr(C, align(64))]
struct Line([f64; LANES]);

/// Lines `at..at + WIDTH/LANES` as one array.
#[inline(always)]
fn row<const WIDTH: usize>(lines: &[Line], at: usize) -> [f64; WIDTH] {
    let mut out = [0.0; WIDTH];
    for (o, line) in out
        .chunks_exact_mut(LANES)
        .zip(&lines[at..at + WIDTH / LANES])
    {
        o.copy_from_slice(&line.0);
    }
    out
}

#[inline(always)]
fn set_row<const WIDTH: usize>(lines: &mut [Line], at: usize, v: &[f64; WIDTH]) {
    for (line, x) in lines[at..at + WIDTH / LANES]
        .iter_mut()
        .zip(v.chunks_exact(LANES))
    {
        line.0.copy_from_slice(x);
    }
}

/// T[g][l] = exp(scale·(v_g − c_l)²) for every distinct value v_g (at its level's coordinate)
/// and centre l, a row of WIDTH/LANES lines per value: the arguments first, then the
/// exponentials EXP_LANES (two lines) side by side in place.
#[inline(always)]
fn fill_tables<const WIDTH: usize>(trie: &Trie, centres: &[f64], scale: f64, tables: &mut [Line]) {
    let lines = WIDTH / LANES;
    for (j, &k) in trie.order.iter().enumerate() {
        let c: &[f64; WIDTH] = centres[k * WIDTH..][..WIDTH]
            .try_into()
            .expect("WIDTH centres");
        for g in trie.level_starts[j]..trie.level_starts[j + 1] {
            let v = trie.values[g];
            let mut x = [0.0; WIDTH];
            for l in 0..WIDTH {
                let diff = v - c[l];
                x[l] = diff * diff * scale;
            }
            set_row(tables, g * lines, &x);
        }
    }
    for pair in (0..tables.len()).step_by(2) {
        let x: [f64; EXP_LANES] = row(tables, pair);
        set_row(tables, pair, &exp_normal_lanes(&x));
    }
}

/// Σ_i u_i Π_j T_j[x_ij] for WIDTH centres: the walk of the module doc. `prefix` holds each
/// run's prefix products, (dim + 2) rows of WIDTH (row dim + 1 the padding's scratch).
#[inline(always)]
fn walk<const WIDTH: usize>(trie: &Trie, tables: &[Line], prefix: &mut [Line]) -> [f64; WIDTH] {
    for line in prefix.iter_mut() {
        *line = Line([1.0; LANES]);
    }
    let stack = prefix.len() / RUNS;
    let mut acc = [[0.0; WIDTH]; RUNS];
    let mut totals = [[0.0; WIDTH]; RUNS];
    for ops in trie.ops.chunks_exact(RUNS) {
        for (s, op) in ops.iter().enumerate() {
            step::<WIDTH>(&mut acc[s], op, tables, &mut prefix[s * stack..][..stack]);
            if op.level & FLUSH != 0 {
                for l in 0..WIDTH {
                    totals[s][l] += acc[s][l];
                }
                acc[s] = [0.0; WIDTH];
            }
        }
    }
    let mut total = totals[0];
    for run in &totals[1..] {
        for l in 0..WIDTH {
            total[l] += run[l];
        }
    }
    total
}

/// One operation of the walk on WIDTH lanes, through local copies (a value array the
/// compiler keeps in vector registers: indexing the rows in place, it feared they overlap
/// and took the lanes one by one).
#[inline(always)]
fn step<const WIDTH: usize>(acc: &mut [f64; WIDTH], op: &Op, tables: &[Line], prefix: &mut [Line]) {
    let lines = WIDTH / LANES;
    let from = (op.level & !FLUSH) as usize * lines;
    let p: [f64; WIDTH] = row(prefix, from);
    let t: [f64; WIDTH] = row(tables, op.value as usize * lines);
    let mut v = [0.0; WIDTH];
    for l in 0..WIDTH {
        v[l] = p[l] * t[l];
    }
    set_row(prefix, from + lines, &v);
    for l in 0..WIDTH {
        acc[l] += op.weight * v[l];
    }
}
