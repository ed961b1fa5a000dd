"""The truncated geometric mechanism of Balcer & Vadhan ("Differential Privacy on Finite
Computers", ITCS 2018, arXiv:1709.05396, Alg. 4.8 GeoSample), DP-Sniper's
TruncatedGeometricMechanism.

Mechanism. A counting query over `n` individuals, answer c ∈ {0, …, n} (sensitivity 1,
single-entry neighbourhood: `relation: l1`), is released as z ∈ {0, …, n} drawn with integer
arithmetic only: with k = ⌈ln(2/ε)⌉ and d = (2^(k+1) + 1)(2^k + 1)^(n−1), draw U uniform on
{1, …, d} and release the least z with F(z) ≥ U, where
    F(z) = 2^(k(c−z)) (2^k + 1)^(n−(c−z))                 for z < c,
    F(z) = d − 2^(k(z−c+1)) (2^k + 1)^(n−1−(z−c))         for c ≤ z < n,
    F(n) = d.
DP-Sniper runs it at ε = 0.1, n = 5 (so k = 3, d = 17 · 9^4).

Claimed guarantee. Balcer & Vadhan's Thm 4.7 (as DP-Sniper's code cites it): GeoSample(ε, n) is
ln(1 + 2^(−k))-DP, which at ε = 0.1 is ln(1 + 1/8), a little above 0.1. Not known to be broken:
an audit holding it to ε = 0.1 exactly may find a bound between 0.1 and ln(9/8) without any flaw.

Output column: `z` (the released count, as a float).
"""

import math

import numpy as np


def _cdf(c, n, k):
    """F(0), …, F(n) as int64 (exact: Python integers, then one array)."""
    b = 2**k + 1
    d = (2 ** (k + 1) + 1) * b ** (n - 1)
    f = []
    for z in range(n + 1):
        if z < c:
            f.append(2 ** (k * (c - z)) * b ** (n - (c - z)))
        elif z < n:
            f.append(d - 2 ** (k * (z - c + 1)) * b ** (n - 1 - (z - c)))
        else:
            f.append(d)
    if d >= 2**62:
        raise ValueError(f"d = {d} does not fit in int64: choose a larger ε or a smaller n")
    return d, np.array(f, dtype=np.int64)


def truncated_geometric(x, n, rng, p):
    eps, people = float(p["epsilon"]), int(p["n"])
    if len(x) != 1 or float(x[0]) != int(x[0]) or not 0 <= int(x[0]) <= people:
        raise ValueError(f"GeoSample takes one count in {{0, …, {people}}}, got {list(x)}")
    k = math.ceil(math.log(2.0 / eps))
    d, f = _cdf(int(x[0]), people, k)
    u = rng.integers(1, d + 1, size=n, dtype=np.int64)
    # F is non-decreasing with F(n) = d ≥ U: the least z with F(z) ≥ U.
    z = np.searchsorted(f, u, side="left")
    return [("z", z.astype(np.float64))]


MECHANISMS = {"truncated_geometric": truncated_geometric}
