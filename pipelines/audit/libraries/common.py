"""What every library program of pipelines/audit/libraries.yaml shares.

The audit (`audit.epsilon`) runs a program once per chunk of draws, as a worker, on a one-frame
input with one row and a column `value`: the neighbouring input. The pipeline's neighbours are
the pair value = 0 and value = 1 (`relation: l1`, `pairs: [[[0], [1]]]`), which a program reads
in one of two ways, as its mechanism's entry says:

- a noise primitive releases f(x) + noise with x = value: the query answers of the pair
  differ by 1, the sensitivity every primitive here is built for (Delta-Siege's input pair
  (0, 1) at sensitivity 1, Lokna et al., CCS 2023, §6);
- an aggregate or a model reads two datasets D and D' from its parameters (`datasets:
  [D, D']`, which differ in one record) and runs on D when value = 0, on D' when value = 1.
  dplab has no neighbouring input of several fields per record yet, so the two datasets are
  written out in the pipeline and the neighbouring value only selects one.

Each program writes one row per draw, `sample` = 0 … samples − 1, and the released columns.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

# A mechanism: the job (parameters, seed) and the neighbouring value, and the number of
# draws, to the released columns (each an array of that many values).
Mechanism = Callable[[Any, float, int], "dict[str, np.ndarray]"]


def neighbour(job: Any) -> float:
    """Return the neighbouring input's one value (the query answer, or which dataset)."""
    (name,) = job.input_names[:1]
    values = job.columns(name)["value"]
    if len(values) != 1:
        raise ValueError(f"the neighbouring input has {len(values)} rows; these programs take one")
    return float(values[0])


def dataset(job: Any, value: float) -> np.ndarray:
    """Return the dataset the neighbouring value selects.

    That is `datasets[0]` (D) for 0 and `datasets[1]` (D') for 1, as an array of float64 (one
    row per record).
    """
    pair = job.params["datasets"]
    if len(pair) != 2 or value not in (0.0, 1.0):
        raise ValueError(f"expected datasets: [D, D'] and a neighbouring value 0 or 1, got {value}")
    return np.asarray(pair[int(value)], dtype=np.float64)


def random_state(job: Any) -> np.random.RandomState:
    """Return a legacy numpy RandomState, for libraries that take one (diffprivlib).

    A Mersenne Twister seeded from the instance's 128-bit seed through a SeedSequence, so its
    draws are dplab's as much as `job.rng`'s are.
    """
    return np.random.RandomState(np.random.MT19937(np.random.SeedSequence(job.seed)))


def serve_mechanisms(mechanisms: dict[str, Mechanism]) -> None:
    """Serve the instances dplab hands this program.

    Each runs the mechanism its `mechanism` parameter names and writes `sample` and the
    released columns.
    """
    from dplab_external import serve

    def release(job: Any) -> None:
        name = job.params["mechanism"]
        if name not in mechanisms:
            known = ", ".join(sorted(mechanisms))
            raise ValueError(f"no mechanism {name!r} here; these are: {known}")
        n = int(job.params["samples"])
        columns = mechanisms[name](job, neighbour(job), n)
        for column, values in columns.items():
            if np.shape(values) != (n,):
                raise AssertionError(f"{name}: column {column} has shape {np.shape(values)}")
        write(job, {"sample": np.arange(n, dtype=np.int64), **columns})

    serve(release)


def write(job: Any, columns: dict[str, np.ndarray]) -> None:
    """Write the frame as a dict of numpy arrays (the helper's binary columns, out.cols).

    A helper older than binary columns would send numpy arrays through lists of numpy
    scalars, whose text under numpy 2 is `np.float64(0.5)`, not a number: it is handed plain
    lists instead.
    """
    import dplab_external

    if not hasattr(dplab_external, "_write_cols"):
        job.write({name: np.asarray(values).tolist() for name, values in columns.items()})
        return
    job.write(columns)
