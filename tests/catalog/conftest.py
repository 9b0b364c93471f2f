"""What the catalog's tests share: `infermeter runs ...` run in-process (its exit code, stdout and stderr), and one
set of groups of runs for the regression check and the trend, written once per session."""

from __future__ import annotations

import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from infermeter.cli import main
from tests.catalog.build import write_group


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str


Invoke = Callable[..., Result]


def one_line_error(result: Result, *words: str) -> None:
    """A refused command: exit 2, nothing on stdout, one line on stderr holding `words`."""
    assert result.code == 2, result.err
    assert result.out == ""
    lines = result.err.splitlines()
    assert len(lines) == 1 and "Traceback" not in result.err, result.err
    for w in words:
        assert w in lines[0], lines[0]


@pytest.fixture
def runs_cli(capfd: pytest.CaptureFixture[str]) -> Invoke:
    """`infermeter runs ARGS` in this process, its SIGTERM handler given back afterwards."""

    def invoke(*args: str | Path) -> Result:
        capfd.readouterr()
        sigterm = signal.getsignal(signal.SIGTERM)
        code = 0
        try:
            main(["runs", *map(str, args)])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        finally:
            signal.signal(signal.SIGTERM, sigterm)
        out, err = capfd.readouterr()
        return Result(code, out, err)

    return invoke


@pytest.fixture(scope="session")
def groups(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Three runs of 300 requests a group, a day apart: `base`; `slower`, every TTFT 10% longer; `same`, the base's
    distributions drawn with other seeds."""
    root = tmp_path_factory.mktemp("groups")
    return {
        "base": write_group(root / "base", seed=1, hours=0),
        "slower": write_group(root / "slower", seed=11, hours=24, ttft_scale=1.10),
        "same": write_group(root / "same", seed=21, hours=24),
    }
