"""The CLI as a user runs it: `python -m infermeter ...` in a child process, output captured as text."""

from __future__ import annotations

import subprocess
import sys
from os import PathLike
from typing import Any

import orjson


def infermeter(
    *args: str | PathLike[str], cwd: PathLike[str] | None = None, timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    """Run one infermeter command; never raises on a non-zero exit (tests assert on returncode and stderr)."""
    return subprocess.run(
        [sys.executable, "-m", "infermeter", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
        check=False,
    )


def report_json(run_dir: str | PathLike[str], *args: str) -> dict[str, Any]:
    """`infermeter report RUN_DIR --json`, parsed; fails the test with stderr if the command fails."""
    p = infermeter("report", run_dir, "--json", *args)
    assert p.returncode == 0, p.stderr
    return orjson.loads(p.stdout)


def exit_code(args: list[str]) -> int:
    """`infermeter ARGS` in the test's own process, as its exit code."""
    from infermeter.cli import main

    try:
        main(args)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def suite_result(name: str, out: PathLike[str], *args: str) -> Any:
    """`infermeter test NAME --quick` run in-process into `out`; its suite.json as a SuiteResult."""
    from pathlib import Path

    from infermeter.suite_result import SuiteResult

    code = exit_code(["test", name, "--quick", "--out", str(out), "--no-progress", *args])
    assert code == 0, f"infermeter test {name} exited {code}"
    return SuiteResult.model_validate_json((Path(out) / "suite.json").read_text())
