"""dplab's Python API: run YAML pipelines of differential-privacy experiments, read results.

The `dplab` binary does the work; this package runs it (`run`, `run_all`, `plan`,
`validate`, `show`) and reads what it wrote (`open`, `Results`) in polars, pandas or pyarrow,
none of which it requires::

    import dplab

    res = dplab.run("my-study.yaml", profile="ci")
    res.frame("noisy", provenance=True)   # every row with its instance, seed, build, …
    res.figure("figure")                  # shown in a notebook
    res.audits()                          # audit.epsilon rows: claim, bound, violation

`dplab.external` is the helper `kind: external` programs use (stdlib only).

The PyPI distribution is `dplab-pipelines`: the unrelated distribution `dplab` installs a
package of the same import name, and the two cannot share an environment.
"""

from __future__ import annotations

import warnings as _warnings
from importlib import metadata as _metadata
from pathlib import Path as _Path

if not (_Path(__file__).parent / "external.py").is_file():  # pragma: no cover
    raise ImportError(
        f"{_Path(__file__).parent} is not dplab-pipelines' package `dplab` (no dplab/external.py): "
        "the unrelated PyPI package `dplab` may have overwritten it. "
        "Run `pip uninstall dplab dplab-pipelines && pip install dplab-pipelines`."
    )

from . import external
from ._binary import binary
from ._events import Plan, PlannedStage, Shown, Validated
from ._run import INTERRUPT_GRACE, Settings, StrPath, plan, run, run_all, show, validate
from .errors import (
    BinaryNotFoundError,
    DplabError,
    Failure,
    Located,
    PipelineError,
    ProtocolError,
    RunError,
)
from .results import PROVENANCE, Figure, Lib, Results, RunSet, open


def _version() -> str:
    try:
        return _metadata.version("dplab-pipelines")
    except _metadata.PackageNotFoundError:
        return "0+unknown"


__version__: str = _version()
"""This package's version (the wheel's; `dplab --version` is the binary's)."""


def _check_clash() -> None:
    """Warn when the unrelated distribution `dplab` is installed beside this one."""
    try:
        other = _metadata.distribution("dplab")
    except _metadata.PackageNotFoundError:
        return
    _warnings.warn(
        f"the PyPI distribution `dplab` {other.version} (an unrelated project) is installed in "
        "this environment beside dplab-pipelines; both install the import package `dplab`, so "
        "one overwrote the other's files. Run `pip uninstall dplab` and then "
        "`pip install --force-reinstall dplab-pipelines`.",
        ImportWarning,
        stacklevel=2,
    )


_check_clash()

__all__ = [
    "INTERRUPT_GRACE",
    "PROVENANCE",
    "BinaryNotFoundError",
    "DplabError",
    "Failure",
    "Figure",
    "Lib",
    "Located",
    "PipelineError",
    "Plan",
    "PlannedStage",
    "ProtocolError",
    "Results",
    "RunError",
    "RunSet",
    "Settings",
    "Shown",
    "StrPath",
    "Validated",
    "__version__",
    "binary",
    "external",
    "open",
    "plan",
    "run",
    "run_all",
    "show",
    "validate",
]
