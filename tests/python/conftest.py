"""The Python API's tests: run against the INSTALLED wheel (`pip install dplab-pipelines`), in a
fresh virtual environment, never against the checkout's python/ directory.

    python -m venv /tmp/v && /tmp/v/bin/pip install target/wheels/dplab_pipelines-*.whl \
        pytest polars pandas pyarrow nbclient ipykernel nbformat
    /tmp/v/bin/python -m pytest tests/python

Tests marked `needs_events` need a binary with `--message-format json` and
`instances.parquet`; `-m "not needs_events"` leaves them out.
"""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import dplab
import pytest

REPO = Path(__file__).resolve().parents[2]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "needs_events: needs `--message-format json` and instances.parquet"
    )
    here = Path(dplab.__file__).resolve()
    checkout = (REPO / "python").resolve()
    if here.is_relative_to(checkout):
        raise pytest.UsageError(
            f"dplab is imported from the checkout ({here}), not from an installed wheel: "
            "run these tests in a venv with the wheel installed (not `pip install -e`), "
            "from a directory where python/ is not on sys.path"
        )


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test in its own directory, with its own instance store."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DPLAB_STORE", str(tmp_path / "store"))
    monkeypatch.delenv("DPLAB_ALLOW_EXEC", raising=False)


def dplab_cli(
    *args: str | os.PathLike[str], check: bool = True
) -> subprocess.CompletedProcess[str]:
    """The installed binary, run directly (no JSON events): works with any dplab."""
    return subprocess.run(
        [str(dplab.binary()), *map(str, args)], capture_output=True, text=True, check=check
    )


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def study(dir: Path) -> Path:
    """`dplab new my-study`: the built-in study (its `ci` profile runs in well under a second)."""
    dplab_cli("new", "my-study", "--dir", dir)
    return dir / "my-study.yaml"


def audit(dir: Path) -> Path:
    """A tiny audit: the Laplace mechanism (correct) and one of scale ε (broken)."""
    return write(
        dir / "audit.yaml",
        """
        name: tiny-audit
        title: A tiny audit
        description: Laplace at small samples, and a broken one.
        seed: 5
        axes:
          eps: [1]
        stages:
          laplace:
            kind: audit.epsilon
            with:
              mechanism:
                kind: mechanism.noise
                with: {column: value, noise: laplace, epsilon: $eps}
              output: [noisy]
              samples: 20000
              search_samples: 5000
              neighbours: {column: value, relation: l1, base: [0], patterns: [one_above]}
          broken:
            kind: audit.epsilon
            with:
              mechanism: {kind: mechanism.noise, with: {column: value, noise: laplace, epsilon: 4}}
              output: [noisy]
              claim: {epsilon: 0.5}
              # A known-broken variant: flagged as expected, so the run exits 0.
              expect: violation
              samples: 20000
              search_samples: 5000
              neighbours: {column: value, relation: l1, base: [0], patterns: [one_above]}
        """,
    )


def external(dir: Path, n: int, body: str, name: str = "day") -> Path:
    """A pipeline of one external stage in sh over axis x = 1..n (as tests/it/workday.rs).

    The program appends x to ran.txt as it starts, then runs `body` (sh, `$x` set), which
    writes the frame as CSV to output/out.csv (see OK); `fine` is a built-in stage beside it.
    """
    script = dir / "code/prog.sh"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(
        "#!/bin/sh\n"
        'x=$(sed -n \'s/^ *"x": *\\([0-9]*\\).*/\\1/p\' "$DPLAB_JSON" | head -n 1)\n'
        f'echo "$x" >> {dir.resolve() / "ran.txt"}\n' + body + "\n"
    )
    return write(
        dir / "p.yaml",
        f"""
        name: {name}
        title: T
        description: d
        seed: 3
        axes:
          x: {{from: 1, to: {n}, step: 1}}
        stages:
          ext:
            kind: external
            with:
              command: [sh, code/prog.sh]
              code: [code]
              params: {{x: $x}}
              columns: [y]
          fine:
            kind: load.table
            with: {{columns: {{a: [1, 2]}}}}
        """,
    )


OK = "printf 'y\\n1\\n' > output/out.csv"
"""An external program's body that writes its one-row frame."""


def started(dir: Path) -> int:
    try:
        return len((dir / "ran.txt").read_text().splitlines())
    except FileNotFoundError:
        return 0
