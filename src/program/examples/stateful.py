"""A worker (`worker: true`) that keeps state across instances, and so is wrong: each
instance's `u` depends on how many instances this process served before it, which depends on
`--jobs` and on the order the scheduler hands them out. One process per instance hides it
(every instance is the first); `dplab run --verify N` shows it, because it computes N
instances again in a fresh worker and compares the bytes:

    --verify: computed again, it differs from its first run (column `u`, row 1: …)

The fix is to keep nothing that reaches the results: draw from `job.random` or `job.rng`.
"""

from dplab_external import serve

served = 0


def compute(job):
    global served
    served += 1
    x = job.params["x"]
    job.write({"x2": [x * x], "u": [float(served)]})


serve(compute)
