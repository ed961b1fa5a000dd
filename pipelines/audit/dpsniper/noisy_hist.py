"""Noisy histograms from StatDP's benchmark (Ding, Wang, Wang, Zhang & Kifer, "Detecting
Violations of Differential Privacy", CCS'18, Algs. 9 and 10), DP-Sniper's NoisyHist1/2.

Mechanism. A histogram x of `answers` bins (DP-Sniper: 5), neighbours differing in one bin by 1
(its single-entry neighbourhood, `relation: l1` here), released bin by bin with Laplace noise:
  noisy_hist1: x_i + Lap(1/ε)   (Alg. 9);
  noisy_hist2: x_i + Lap(ε)     (Alg. 10: the scale is ε instead of 1/ε).

Claimed guarantee and status. Both are claimed ε-DP. NoisyHist1 is ε-DP (one bin moves by 1).
NoisyHist2 is known to be broken (Ding et al. list it as an incorrect variant): its noise has
scale ε, so it is (1/ε)-DP, 10-DP at the claimed ε = 0.1.

Output columns: `bin0` … `bin{answers-1}` (the noisy counts).
"""


def _hist(x, n, rng, scale):
    out = x[None, :] + rng.laplace(0.0, scale, size=(n, len(x)))
    return [(f"bin{i}", out[:, i]) for i in range(len(x))]


def noisy_hist1(x, n, rng, p):
    return _hist(x, n, rng, 1.0 / float(p["epsilon"]))


def noisy_hist2(x, n, rng, p):
    return _hist(x, n, rng, float(p["epsilon"]))


MECHANISMS = {"noisy_hist1": noisy_hist1, "noisy_hist2": noisy_hist2}
