"""The exceptions of the dplab API and the records they carry."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ._base import DplabError

if TYPE_CHECKING:
    from .results import Results, RunSet

__all__ = [
    "BinaryNotFoundError",
    "DplabError",
    "Failure",
    "Located",
    "PipelineError",
    "ProtocolError",
    "RunError",
]


class BinaryNotFoundError(DplabError, FileNotFoundError):
    """No `dplab` executable was found (see :func:`dplab.binary`)."""


class ProtocolError(DplabError):
    """The binary's output broke the JSON event protocol, or it exited without saying why."""


@dataclass(frozen=True)
class Located:
    """One error of an invalid pipeline, where it is: `file:line:col: message` and a hint."""

    file: str
    """The pipeline file, as the binary was given it."""
    line: int | None
    """1-based line, or `None` when the error has no place in the file."""
    col: int | None
    """1-based column, or `None`."""
    message: str
    """What is wrong (one or more lines)."""
    hint: str | None = None
    """How to fix it, when the binary knows."""

    def __str__(self) -> str:
        """Format the error as the command line does: `file:line:col: message`, then the hint."""
        place = self.file
        if self.line is not None:
            place += f":{self.line}"
            if self.col is not None:
                place += f":{self.col}"
        text = f"{place}: {self.message}"
        if self.hint:
            text += "\n  hint: " + self.hint.replace("\n", "\n  ")
        return text


@dataclass(frozen=True)
class Failure:
    """One failed stage instance of a run."""

    pipeline: str
    stage: str
    instance: str
    """Its label, e.g. `eps=0.5, rep=3` (empty for a stage of one instance)."""
    message: str
    """Why it failed, as the binary says it."""
    log: str | None = None
    """The path of the program's log (stderr) when it ran a program, else `None`."""

    def __str__(self) -> str:
        """`pipeline/stage[instance]: message`, and where the log is."""
        where = f"{self.pipeline}/{self.stage}"
        if self.instance:
            where += f" [{self.instance}]"
        text = f"{where}: {self.message}"
        if self.log:
            text += f" (log: {self.log})"
        return text


class PipelineError(DplabError, ValueError):
    """An invalid pipeline or invalid arguments (the binary's exit code 2).

    `errors` lists each located error the binary reported (possibly none, for a bad flag: the
    message then ends with the binary's last lines of stderr).
    """

    def __init__(self, message: str, errors: list[Located], exit_code: int = 2) -> None:
        """Make the error from its summary line and its located errors."""
        self.errors: list[Located] = list(errors)
        self.exit_code = exit_code
        text = message
        if self.errors:
            text += "\n" + "\n".join(str(e) for e in self.errors)
        super().__init__(text)


class RunError(DplabError, RuntimeError):
    """A run in which instances failed (exit code 1), or a verdict was not the one expected (4).

    Exit code 4: an audit flagged a mechanism it was not told to expect broken, or missed one it
    was; every instance ran, and `results` holds them.

    `failures` lists the failed instances; `results` is the partial results directory of the
    (first) failed pipeline when one was written, else `None`; `runs` holds the results of every
    pipeline of the run that wrote any, by name.
    """

    def __init__(
        self,
        message: str,
        failures: list[Failure],
        results: Results | None = None,
        runs: RunSet | None = None,
        exit_code: int = 1,
    ) -> None:
        """Make the error from its summary, the failures and what the run wrote."""
        self.failures: list[Failure] = list(failures)
        self.results: Results | None = results
        self.runs: RunSet | None = runs
        self.exit_code = exit_code
        text = message
        shown = self.failures[:10]
        if shown:
            text += "\n" + "\n".join(str(f) for f in shown)
            if len(self.failures) > len(shown):
                text += f"\n… and {len(self.failures) - len(shown)} more"
        super().__init__(text)
