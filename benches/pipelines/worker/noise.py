"""The program of benches/pipelines/worker-1e4.yaml: Laplace noise on a 100-bin histogram,
with numpy, from the instance's generator. One program for both modes (`serve`)."""

import numpy as np

from dplab_external import serve


def release(job):
    counts = np.asarray(job.columns()["count"], dtype=float)
    eps = float(job.params["epsilon"])
    noisy = counts + job.rng.laplace(0.0, 1.0 / eps, size=counts.size)
    job.write({"noisy_sum": [float(noisy.sum())], "l1": [float(np.abs(noisy - counts).sum())]})


serve(release)
