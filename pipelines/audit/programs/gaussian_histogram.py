"""A researcher's own Gaussian mechanism on a histogram, in numpy: the walk of the audit issue.

Each release adds N(0, σ²) to every bin of the histogram the audit hands over (its column
`count`): `count + sigma * rng.standard_normal((samples, bins))`, one draw of all bins per
sample. It is μ-GDP with μ = Δ₂/σ, where Δ₂ is the ℓ2 distance the neighbouring histograms
can move; a researcher who calibrates σ for Δ₂ = 1 claims μ = 1/σ (equivalently ρ = 1/(2σ²)
zCDP, or Rényi ε(α) = α/(2σ²)), which holds when one record moves one count and fails when it
moves four (Δ₂ = 2): the audit's known-broken variant.

Input: one frame with a column `count` (the audit's neighbouring input).
Parameters: sigma (σ > 0), samples (releases, set by the audit).
Output: `samples × bins` rows (sample, bin, noisy), handed to dplab as numpy arrays: the
helper writes them as binary columns, with no Python loop per row.
"""

import numpy as np
from dplab_external import serve


def release(job):
    sigma = float(job.params["sigma"])
    samples = int(job.params["samples"])
    counts = np.asarray(job.columns()["count"], dtype=float)
    bins = counts.size
    noisy = counts + sigma * job.rng.standard_normal((samples, bins))
    job.write(
        {
            "sample": np.repeat(np.arange(samples), bins),
            "bin": np.tile(np.arange(bins), samples),
            "noisy": noisy.ravel(),
        }
    )


serve(release)
