"""Runs the report tests share, made once per session against the embedded emulator: one run with deadlines (every
chart of a run), and three groups of three repeats (continuous batching twice, chunked prefill once) to compare."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli import infermeter

EVERY_RUN_CHART = {  # what a run with token times and deadlines draws (written out here, not read from the code)
    "ttft-cdf",
    "ttft-histogram",
    "ttft-by-input",
    "itl-distribution",
    "request-timeline",
    "stalls",
    "fluidity",
    "over-time",
}
REQUESTS, RATE = "60", "8"  # ~8 s a run: ~10,000 ITL samples for the ITL P99 difference, short for CI
WARMUP = "16"  # requests at the run's rate (2 s): the draft's 100 would double each run's time


def _run(out: Path, *args: str) -> Path:
    p = infermeter(
        "run", "--requests", REQUESTS, "--rate", RATE, "--warmup", WARMUP, "--out", out, "--no-progress", *args
    )
    assert p.returncode == 0, p.stderr
    return out


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run with Metron deadlines and an SLO, so that the fluidity and goodput parts of the report apply."""
    out = tmp_path_factory.mktemp("report-run") / "run"
    return _run(out, "--deadlines", "ttft=200ms,tbt=20ms", "--slo", "ttft=200ms")


@pytest.fixture(scope="session")
def groups(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Directories of three repeats each: "continuous" and "continuous-again" (one configuration), "chunked"."""
    root = tmp_path_factory.mktemp("compare")
    dirs = {"continuous": "continuous", "continuous-again": "continuous", "chunked": "chunked_prefill"}
    for name, scheduler in dirs.items():
        for i in range(3):
            _run(root / name / f"run{i}", "--scheduler", scheduler)
    return {name: root / name for name in dirs}
