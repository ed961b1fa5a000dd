"""`python -m dplab ARGS`: the `dplab` binary with ARGS, its exit code passed on."""

from __future__ import annotations

import os
import subprocess
import sys

from ._binary import binary
from .errors import BinaryNotFoundError


def main(argv: list[str] | None = None) -> int:
    """Run the binary with `argv` (default: this process's arguments); return its exit code.

    On POSIX the binary replaces this process (exec), so signals and the exit code are its
    own; elsewhere it runs as a child whose exit code is returned.
    """
    args = sys.argv[1:] if argv is None else argv
    try:
        exe = os.fspath(binary())
    except BinaryNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if os.name == "posix" and argv is None:
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(exe, [exe, *args])
    try:
        return subprocess.call([exe, *args])
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
