"""Reference σ of the analytic Gaussian calibration (Balle & Wang 2018, Algorithm 1) for the
test `mech::gaussian::tests::analytic_sigma_matches_an_independent_evaluation_of_algorithm_1`.

Algorithm 1 evaluated in mpmath at 60 significant digits, beside diffprivlib's GaussianAnalytic
(double precision) for comparison. Not run by the tests; run by hand:

    python -m venv /tmp/venv && /tmp/venv/bin/pip install diffprivlib mpmath 'scikit-learn<1.6'
    /tmp/venv/bin/python tests/reference/analytic_gaussian.py 0.1,1e-5,1 1,1e-12,1 ...

(scikit-learn ≥ 1.6 breaks `import diffprivlib` 0.6.6.) One `ε,δ,Δ` per argument; prints one
Rust tuple per case with diffprivlib's σ and its relative difference as a comment.
"""
import sys
from diffprivlib.mechanisms import GaussianAnalytic
import mpmath as mp
mp.mp.dps = 60

def alg1(eps, delta, sens):
    eps, delta, sens = mp.mpf(eps), mp.mpf(delta), mp.mpf(sens)
    Phi = lambda x: mp.ncdf(x)
    bp = lambda v: Phi(mp.sqrt(eps*v)) - mp.e**eps * Phi(-mp.sqrt(eps*(v+2)))
    bm = lambda u: Phi(-mp.sqrt(eps*u)) - mp.e**eps * Phi(-mp.sqrt(eps*(u+2)))
    d0 = bp(0)
    if delta >= d0:   # v* = sup{v : B+(v) <= delta}; B+ increasing
        f, sign = (lambda v: bp(v) - delta), -1
    else:             # u* = inf{u : B-(u) <= delta}; B- decreasing
        f, sign = (lambda u: bm(u) - delta), 1
    lo, hi = mp.mpf(0), mp.mpf(1)
    while f(lo) * f(hi) > 0:
        lo, hi = hi, 2*hi
    for _ in range(400):
        mid = (lo+hi)/2
        if f(mid) * f(lo) <= 0: hi = mid
        else: lo = mid
    s = (lo+hi)/2
    alpha = mp.sqrt(1 + s/2) + sign*mp.sqrt(s/2)
    return alpha * sens / mp.sqrt(2*eps)

cases = [(float(a), float(b), float(c)) for a, b, c in (x.split(',') for x in sys.argv[1:])]
for eps, delta, sens in cases:
    dpl = GaussianAnalytic(epsilon=eps, delta=delta, sensitivity=sens)._scale
    mpv = alg1(eps, delta, sens)
    print(f"({eps!r}, {delta!r}, {sens!r}, {mp.nstr(mpv, 17)}),  # diffprivlib {dpl!r}, rel diff {float(abs(dpl-mpv)/mpv):.1e}")
