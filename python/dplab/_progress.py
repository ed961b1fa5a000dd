"""Show a run's progress and its stderr.

An updating HTML bar in Jupyter, one updating line on a terminal, nothing otherwise (stderr
still passes through).
"""

from __future__ import annotations

import importlib
import sys
import threading
import time
from typing import Any, Protocol

__all__ = ["Display", "in_notebook", "make_display"]


def in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel (IPython is imported only if already imported)."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except Exception:  # noqa: BLE001 - any failure means no notebook
        return False
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


class Display(Protocol):
    """Where a run's progress and stderr lines go."""

    def progress(self, pipeline: str, done: int, total: int, cached: int, failed: int) -> None:
        """Show that `done` of `total` instances are finished."""

    def stderr(self, line: str) -> None:
        """Show one line the binary wrote on stderr."""

    def close(self) -> None:
        """End the display: the run is over, its last state stays shown."""


def _label(pipeline: str, done: int, total: int, cached: int, failed: int) -> str:
    text = f"{pipeline}: {done}/{total} instances"
    extra = []
    if cached:
        extra.append(f"{cached} from the store")
    if failed:
        extra.append(f"{failed} failed")
    if extra:
        text += " (" + ", ".join(extra) + ")"
    return text


class _Throttle:
    """At most one redraw per `interval` seconds, and always the last one."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.last = 0.0

    def ready(self, final: bool) -> bool:
        now = time.monotonic()
        if final or now - self.last >= self.interval:
            self.last = now
            return True
        return False


class Quiet:
    """Shows nothing."""

    def progress(self, pipeline: str, done: int, total: int, cached: int, failed: int) -> None:
        """Show nothing."""

    def stderr(self, line: str) -> None:
        """Show nothing."""

    def close(self) -> None:
        """Nothing to close."""


class Terminal:
    """stderr passes through; a terminal also gets one updating line of progress."""

    def __init__(self, bar: bool) -> None:
        """`bar`: whether to draw the progress line (stderr is a terminal)."""
        self.bar = bar
        self.lock = threading.Lock()
        self.shown = ""
        self.throttle = _Throttle(0.1)

    def _clear(self) -> None:
        if self.shown:
            sys.stderr.write("\r" + " " * len(self.shown) + "\r")

    def progress(self, pipeline: str, done: int, total: int, cached: int, failed: int) -> None:
        """Redraw the progress line."""
        if not self.bar or not self.throttle.ready(done >= total > 0):
            return
        width = 24
        filled = width * done // total if total else 0
        line = "[" + "#" * filled + "-" * (width - filled) + "] "
        line += _label(pipeline, done, total, cached, failed)
        with self.lock:
            self._clear()
            sys.stderr.write(line)
            sys.stderr.flush()
            self.shown = line

    def stderr(self, line: str) -> None:
        """Write the line above the progress line."""
        with self.lock:
            self._clear()
            sys.stderr.write(line if line.endswith("\n") else line + "\n")
            if self.shown:
                sys.stderr.write(self.shown)
            sys.stderr.flush()

    def close(self) -> None:
        """End the progress line."""
        with self.lock:
            if self.shown:
                sys.stderr.write("\n")
                sys.stderr.flush()
                self.shown = ""


class Notebook:
    """In Jupyter: an HTML progress bar updated in place, stderr in the cell's output."""

    def __init__(self) -> None:
        """Make the bar's display (shown at the first progress)."""
        self.handle: Any = None
        self.throttle = _Throttle(0.2)
        self.lock = threading.Lock()

    def progress(self, pipeline: str, done: int, total: int, cached: int, failed: int) -> None:
        """Update the bar."""
        if not self.throttle.ready(done >= total > 0):
            return
        from html import escape

        ipd: Any = importlib.import_module("IPython.display")
        html = ipd.HTML(
            f'<div><progress value="{done}" max="{max(total, 1)}" style="width:24em"></progress>'
            f" {escape(_label(pipeline, done, total, cached, failed))}</div>"
        )
        with self.lock:
            if self.handle is None:
                self.handle = ipd.display(html, display_id=True)
            else:
                self.handle.update(html)

    def stderr(self, line: str) -> None:
        """Write the line to the cell's stderr."""
        sys.stderr.write(line if line.endswith("\n") else line + "\n")
        sys.stderr.flush()

    def close(self) -> None:
        """Leave the bar as it is."""


def make_display(quiet: bool) -> Display:
    """Choose the display for a run: none when `quiet`, the notebook's, or the terminal's."""
    if quiet:
        return Quiet()
    if in_notebook():
        return Notebook()
    isatty = getattr(sys.stderr, "isatty", None)
    return Terminal(bar=bool(isatty and isatty()))
