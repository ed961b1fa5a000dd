//! (e) The bits: thresholds and intervals on a coordinate's lowest set bit and on its
//! significant bits.
//!
//! A floating-point sampler's holes are seen only through a release's bits. numpy's Laplace,
//! `loc ± scale·ln(2U)` with U a multiple of 2⁻⁵³, releases for loc = 1 the sum 1 + noise,
//! exact (Sterbenz) wherever the noise is near −1, so every release in (−1, 1) is a multiple
//! of 2⁻⁵³; for loc = 0 the release is the noise itself, whose small values carry all 53 bits
//! of their own magnitude. "The lowest set bit is below 2⁻⁵³" then happens only for loc = 0:
//! an infinite likelihood ratio that no threshold on the value sees (Mironov, CCS'12, §4, on
//! the same flaw). A snapping mechanism (Mironov's fix) releases multiples of one power of two
//! on both sides, and its bits tell nothing. Exact outcomes never repeat among 53-bit floats,
//! so the support search cannot see this either: it needs outcomes that recur.
//!
//! The two projections are integers, searched as any projection ([`super::ranges`]), each
//! coordinate separately; the family applies where the discrete search does not (continuous
//! outputs: an integer release's bits are its parity, which its outcomes already say).

use super::super::event::Projection;
use super::super::keep::Best;
use super::ranges::ranges;
use super::Rows;

/// Coordinate `j`'s lowest set bit and its significant bits, both searched into `keep`.
pub(super) fn bits(j: usize, a: Rows, b: Rows, keep: &mut Best) {
    ranges(Projection::LowBit(j), a, b, keep);
    ranges(Projection::Precision(j), a, b, keep);
}
