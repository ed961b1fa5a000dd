"""Prefix sums of noisy answers (Wang, Ding, Wang, Kifer & Zhang, "Proving Differential Privacy
with Shadow Execution", PLDI 2019), DP-Sniper's PrefixSum.

Mechanism. Query answers x of length `answers` (DP-Sniper: 10): each gets independent noise
Lap(1/ε), and the release is the running sums s_j = Σ_{i≤j} (x_i + Lap(1/ε)_i).

Claimed guarantee and status. Claimed ε-DP. The release is post-processing of the noisy
answers x_i + Lap(1/ε), so it is ε-DP when neighbouring inputs move the answers by at most 1 in
total (ℓ1 sensitivity 1). DP-Sniper audits it, as StatDP's patterns do for vector inputs, under
the component-wise neighbourhood, where every answer may move by 1 (`relation: linf` here):
there up to `answers` noisy terms move together and the Laplace noise alone gives only
(answers·ε)-DP. A bound above ε under that neighbourhood says the claim does not hold for it,
not that the algorithm is wrong for ℓ1 neighbours.

Output columns: `sum0` … `sum{answers-1}` (the prefix sums).
"""

import numpy as np


def prefix_sum(x, n, rng, p):
    eps = float(p["epsilon"])
    noisy = x[None, :] + rng.laplace(0.0, 1.0 / eps, size=(n, len(x)))
    out = np.cumsum(noisy, axis=1)
    return [(f"sum{j}", out[:, j]) for j in range(len(x))]


MECHANISMS = {"prefix_sum": prefix_sum}
