"""Finding the `dplab` executable the wheel installed beside the package."""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path

from .errors import BinaryNotFoundError

__all__ = ["binary"]

_EXE = "dplab.exe" if sys.platform == "win32" else "dplab"


def _candidates() -> list[Path]:
    """Where the wheel puts the executable, in the order they are tried (PATH aside)."""
    places: list[Path] = []
    scripts = sysconfig.get_path("scripts")
    if scripts:
        places.append(Path(scripts) / _EXE)
    # A user install (`pip install --user`) puts scripts under the user scheme.
    try:
        user = sysconfig.get_path("scripts", f"{os.name}_user")
    except KeyError:
        user = None
    if user:
        places.append(Path(user) / _EXE)
    places.append(Path(sys.executable).parent / _EXE)
    return places


def binary() -> Path:
    """Return the `dplab` executable this package runs.

    In order: the `DPLAB_BINARY` environment variable (which must name an existing file); the
    `dplab` the wheel installed into the interpreter's environment (its scripts directory, then
    the user scheme's, then the directory of `sys.executable`); the first `dplab` on `PATH`.

    Raises:
        BinaryNotFoundError: when none is found, saying how to get one.

    """
    override = os.environ.get("DPLAB_BINARY")
    if override:
        path = Path(override).expanduser()
        if not path.is_file():
            raise BinaryNotFoundError(
                f"DPLAB_BINARY={override!r} is not a file: point it at a dplab executable "
                "(e.g. target/release/dplab after `make build`), or unset it to use the one "
                "installed with the package"
            )
        return path
    for path in _candidates():
        if path.is_file() and os.access(path, os.X_OK):
            return path
    found = shutil.which("dplab")
    if found:
        return Path(found)
    tried = ", ".join(dict.fromkeys(str(p) for p in _candidates()))
    raise BinaryNotFoundError(
        "no dplab executable found (tried "
        + tried
        + " and PATH). Install the wheel, which ships it: `pip install dplab-pipelines` "
        "(not `dplab`, an unrelated package), or set DPLAB_BINARY to a dplab you built "
        "(`make build` writes target/release/dplab)."
    )
