"""The one error type the CLI turns into a one-line message instead of a traceback, and the exit codes."""

from __future__ import annotations

from enum import IntEnum


class UserError(Exception):
    """Bad input from the user: the message names what is wrong and how to fix it."""


class ExitCode(IntEnum):
    """What `infermeter` returns (README, "Exit codes")."""

    OK = 0  # finished as planned; failed requests are results, counted in the report
    INTERNAL = 1  # infermeter itself failed: one line, the traceback saved to a file
    USAGE = 2  # bad input: nothing was measured and nothing was overwritten
    INCOMPLETE = 3  # the run directory could not be written (disk full): stopped early, what was recorded kept
    NO_SUCCESS = 4  # the run finished but not one request succeeded (server down, wrong key, ...)
    INTERRUPTED = 130  # Ctrl-C (SIGINT): sending stopped, everything measured kept and reported
    TERMINATED = 143  # SIGTERM: as Ctrl-C, requests in flight cancelled at once


class Stopped(Exception):
    """A long job (a suite, a sweep) stopped before its end; the message says how to resume."""

    def __init__(self, message: str, code: ExitCode) -> None:
        super().__init__(message)
        self.code = code
