"""The entry point: bad input becomes one line and exit code 2, a bug one line and a saved traceback."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from infermeter import secrets
from infermeter.cli.app import command_group, err
from infermeter.cli.suggest import no_such_option
from infermeter.errors import ExitCode, Stopped, UserError


class _Terminated(Exception):
    """SIGTERM outside a run's own handling: unwind (stopping child processes), then exit 143."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise _Terminated


_ARGV: list[str] = []


def invocation() -> list[str]:
    """The arguments this process was started with (a report's reproduction section repeats them)."""
    return list(_ARGV)


def main(argv: list[str] | None = None) -> None:
    """Entry point: bad input becomes one line on stderr and exit code 2, never a traceback (README, "Exit codes")."""
    _ARGV[:] = sys.argv[1:] if argv is None else argv
    secrets.register(os.environ.get("OPENAI_API_KEY"))
    with contextlib.suppress(ValueError):  # not the main thread (tests calling main in-process)
        signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        code = command_group()(args=argv, prog_name="infermeter", standalone_mode=False)
    except UserError as exc:
        say(f"error: {exc}")
        sys.exit(ExitCode.USAGE)
    except Stopped as exc:
        say(str(exc), plain=True)
        sys.exit(exc.code)
    except KeyboardInterrupt:
        say("interrupted", plain=True)
        sys.exit(ExitCode.INTERRUPTED)
    except _Terminated:
        say("terminated (SIGTERM)", plain=True)
        sys.exit(ExitCode.TERMINATED)
    except Exception as exc:
        # typer's (vendored click) usage errors: a bad option or value, named in one line
        if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):
            if type(exc).__name__ == "NoArgsIsHelpError":  # bare `infermeter`: typer has printed the help
                sys.exit(0)
            ctx = getattr(exc, "ctx", None)
            hint = f" (see {ctx.command_path} --help)" if ctx is not None else ""
            say(f"error: {_usage_message(exc, ctx)}{hint}")
            sys.exit(ExitCode.USAGE if int(exc.exit_code) == 2 else int(exc.exit_code))
        crash(exc)
    if isinstance(code, int) and code:
        sys.exit(code)


def _usage_message(exc: Exception, ctx: Any) -> str:
    """A usage error's line; an unknown option names our option for a peer tool's, or only close names (click's own
    list is too loose: it offers --no-progress for --num-prompts)."""
    name = getattr(exc, "option_name", None)
    if type(exc).__name__ != "NoSuchOption" or not isinstance(name, str) or ctx is None:
        return str(exc.format_message())  # type: ignore[attr-defined]  # a click exception, checked by the caller
    options = [o for param in ctx.command.params for o in (*param.opts, *param.secondary_opts)]
    return no_such_option(name, options)


def say(message: str, plain: bool = False) -> None:
    """One line on stderr, secrets masked, never wrapped."""
    text = " ".join(secrets.redact(message).split())
    if plain:
        err.print(text, highlight=False, soft_wrap=True, markup=False)
    else:
        head, _, rest = text.partition(": ")
        err.print(f"[bold red]{head}:[/] ", end="", highlight=False, soft_wrap=True)
        err.print(rest, highlight=False, soft_wrap=True, markup=False)


def crash(exc: BaseException) -> None:
    """A bug in infermeter: one line, and the (redacted) traceback in a file to attach to a report."""
    text = secrets.redact("".join(traceback.format_exception(exc)))
    path = Path(tempfile.gettempdir()) / f"infermeter-crash-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.txt"
    try:
        path.write_text(text)
        where = f"the traceback is in {path}"
    except OSError:
        where = "the traceback could not be saved"
    say(f"internal error: {type(exc).__name__}: {str(exc)[:200]} ({where}; please report it)", plain=True)
    sys.exit(ExitCode.INTERNAL)
