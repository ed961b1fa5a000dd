"""The Laplace mechanism drawn from a single-precision uniform: a broken variant for the audit.

The textbook sampler, noise = −b·sgn(v)·ln(1 − 2|v|) with v = U − ½, is ε-DP when U is a real
uniform. Here U has 24 random bits, as numpy's `Generator.random(dtype=np.float32)` and many GPU
samplers draw it: the noise then takes at most 2^24 values, each with probability 2^-24, and
the release f(x) + noise lies in a sparse set that moves with f(x). An output that x produces
is one x' (almost) never produces, so the privacy loss is unbounded. This is the flaw Mironov
(CCS'12) showed for floating-point Laplace samplers; with a 53-bit U the set has 2^53 points
and no feasible number of draws hits one twice (his attack reads the output's bits knowing
the sampler), at 24 bits the audit's `support` search finds it from samples alone.

Input: one frame with a column `value` (the audit's neighbouring input).
Parameters: epsilon, sensitivity (Δ, default 1), samples (draws, set by the audit).
Output: `samples` rows (sample, noisy). The draws come from the instance's seed only.
"""

import math

from dplab_external import load

job = load()
eps = float(job.params["epsilon"])
sens = float(job.params.get("sensitivity", 1))
samples = int(job.params["samples"])
(value,) = [float(r["value"]) for r in job.rows()]
scale = sens / eps
rng = job.random

noisy = []
for _ in range(samples):
    u = rng.getrandbits(24) * 2.0**-24  # a float32 uniform on [0, 1)
    while u == 0.0:  # ln(0): the one draw the textbook formula cannot take
        u = rng.getrandbits(24) * 2.0**-24
    v = u - 0.5
    noisy.append(value - scale * math.copysign(1.0, v) * math.log(1.0 - 2.0 * abs(v)))

job.write({"sample": list(range(samples)), "noisy": noisy}, format="csv")
