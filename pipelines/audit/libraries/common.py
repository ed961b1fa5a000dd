"""What every library program of pipelines/audit/libraries.yaml shares.

The audit (`audit.epsilon`) runs a program once per chunk of draws, as a worker, on a one-frame
input: the neighbouring input. Its mechanism's entry says which of two kinds it is:

- a noise primitive releases f(x) + noise on an input of one row, x in its column `value`: the
  pipeline's neighbours are the pair value = 0 and value = 1 (`relation: l1`, `pairs: [[[0],
  [1]]]`), query answers that differ by 1, the sensitivity every primitive here is built for
  (Delta-Siege's input pair (0, 1) at sensitivity 1, Lokna et al., CCS 2023, §6);
- an aggregate or a model runs on a dataset, which the input is, one row per record
  (`relation: add_remove` or `replace`, `fields: [value]`, or `[x, y]` for a model), as the
  pipeline's `datasets: [[D, D']]` writes the two neighbours: D on one side, D' on the other.

Each program writes one row per draw, `sample` = 0 … samples − 1, and the released columns
(or, for a release of several rows, its own `sample` column).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

# A mechanism: the job (parameters, seed, the neighbouring input) and the number of draws, to
# the released columns (each an array of that many values, unless it numbers its `sample`s).
Mechanism = Callable[[Any, int], "dict[str, np.ndarray]"]


def neighbour(job: Any) -> float:
    """Return a noise primitive's neighbouring input: its one row's `value`."""
    (name,) = job.input_names[:1]
    values = job.columns(name)["value"]
    if len(values) != 1:
        raise ValueError(f"the neighbouring input has {len(values)} rows; a primitive takes one")
    return float(values[0])


def rows(job: Any) -> dict[str, np.ndarray]:
    """Return the neighbouring dataset, a column per field (one row per record)."""
    name = job.input_names[0]
    return {field: np.asarray(values) for field, values in job.columns(name).items()}


def dataset(job: Any) -> np.ndarray:
    """Return an aggregate's neighbouring dataset: its records' `value`, as float64."""
    return np.asarray(rows(job)["value"], dtype=np.float64)


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
        columns = mechanisms[name](job, n)
        if "sample" in columns:
            # A release of several rows numbers its own.
            write(job, columns)
            return
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
