"""The installed package and its binary: versions, `python -m dplab`, no eager imports."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import dplab
import pytest
from conftest import dplab_cli


def test_the_binary_says_its_version() -> None:
    out = dplab_cli("--version").stdout
    assert out.startswith("dplab "), out


def test_python_m_dplab_runs_the_same_binary_and_passes_its_exit_code() -> None:
    direct = dplab_cli("--version").stdout
    via = subprocess.run(
        [sys.executable, "-m", "dplab", "--version"], capture_output=True, text=True, check=True
    )
    assert via.stdout == direct
    bad = subprocess.run(
        [sys.executable, "-m", "dplab", "validate", "no-such-file.yaml"],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2, bad.stderr


@pytest.mark.skipif("DPLAB_BINARY" in os.environ, reason="DPLAB_BINARY overrides the wheel's")
def test_the_wheel_installs_the_binary_beside_the_package() -> None:
    scripts = Path(sysconfig.get_path("scripts"))
    assert dplab.binary().parent.resolve() == scripts.resolve()


def test_dplab_binary_overrides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DPLAB_BINARY", str(tmp_path / "nothing"))
    with pytest.raises(dplab.BinaryNotFoundError, match="DPLAB_BINARY"):
        dplab.binary()


def test_it_is_this_project_and_external_is_the_programs_helper() -> None:
    from dplab.external import load, serve

    assert callable(serve) and callable(load)
    assert dplab.external.__name__ == "dplab.external"
    assert dplab.__version__


def test_importing_dplab_imports_no_frame_library() -> None:
    code = (
        "import sys, dplab\n"
        "print(sorted(m for m in ('polars', 'pandas', 'pyarrow', 'IPython') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
