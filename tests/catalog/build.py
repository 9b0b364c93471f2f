"""Run directories for the catalog's tests, written directly (no server, no clock): records whose TTFTs and token
gaps are drawn from seeded log-normal distributions, each run's times scaled by a factor of its own where a test asks
for run-to-run variation, run.json with a chosen start time, and the summary computed from the records as
`infermeter run` writes it."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np

from infermeter.metrics import RecordColumns, summarize
from infermeter.records import RequestRecord, RunInfo, write_records, write_summary
from infermeter.run_info import Sut, wall_clock_iso

TTFT_S = 0.200  # the median TTFT of a baseline run
GAP_S = 0.020  # the median gap between two tokens
SIGMA = 0.1  # the log-normal's shape: P99 of 300 requests varies by about 2% from run to run
RUN_SIGMA = 0.04  # run-to-run variation: each run's times scaled by lognormal(0, RUN_SIGMA), about 4%
OUTPUT_TOKENS = 16
EVERY_S = 0.1  # one request submitted every 100 ms
START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def records(seed: int, n: int, ttft_scale: float = 1.0, gap_scale: float = 1.0) -> list[RequestRecord]:
    """n requests, one every EVERY_S, each with a log-normal TTFT (times ttft_scale) and log-normal token gaps
    (times gap_scale)."""
    rng = np.random.default_rng(seed)
    ttft = TTFT_S * ttft_scale * rng.lognormal(0.0, SIGMA, n)
    gaps = GAP_S * gap_scale * rng.lognormal(0.0, SIGMA, (n, OUTPUT_TOKENS - 1))
    out = []
    for i in range(n):
        sent = i * EVERY_S
        times = (sent + ttft[i] + np.concatenate([[0.0], np.cumsum(gaps[i])])).tolist()
        out.append(
            RequestRecord(
                request_id=i,
                input_tokens=100,
                output_tokens=OUTPUT_TOKENS,
                max_tokens=OUTPUT_TOKENS,
                scheduled_at=sent,
                submitted_at=sent,
                token_times=times,
                chunk_times=times,
                chunk_tokens=[1] * OUTPUT_TOKENS,
            )
        )
    return out


def refused(i: int) -> RequestRecord:
    """Request i (sent at i * EVERY_S) refused by the server: no token at all."""
    return RequestRecord(
        request_id=i,
        input_tokens=100,
        max_tokens=OUTPUT_TOKENS,
        scheduled_at=i * EVERY_S,
        submitted_at=i * EVERY_S,
        status="error",
        error="HTTP 503: Service Unavailable",
    )


def run_scale(seed: int, sigma: float) -> float:
    """The factor a run's times are scaled by: lognormal(0, sigma), drawn from the run's seed (1 for sigma 0)."""
    return float(np.random.default_rng([seed, 7]).lognormal(0.0, sigma)) if sigma else 1.0


def write_run(
    path: Path,
    seed: int,
    hours: float = 0.0,
    ttft_scale: float = 1.0,
    n: int = 300,
    model: str = "m",
    summary: bool = True,
    run_sigma: float = 0.0,
    failed: int = 0,
) -> Path:
    """A finished run at `path` started `hours` after START; `run_sigma`: its times (TTFTs and gaps) scaled by a
    factor of its own (run_scale); its first `failed` requests refused; `summary=False` leaves summary.json out."""
    started = START + dt.timedelta(hours=hours)
    info = RunInfo(kind="test", started_at=wall_clock_iso(started.timestamp()), sut=Sut(model=model))
    scale = run_scale(seed, run_sigma)
    drawn = records(seed, n, ttft_scale * scale, scale)
    write_records(path, info, [refused(i) for i in range(failed)] + drawn[failed:])
    if summary:
        write_summary(path, summarize(RecordColumns.of_run(path, info), info.itl_option))
    return path


def write_group(
    directory: Path,
    seed: int,
    hours: float,
    ttft_scale: float = 1.0,
    runs: int = 3,
    n: int = 300,
    run_sigma: float = 0.0,
    failed: int = 0,
) -> Path:
    """`runs` repeats in one directory (run-1 ...), a minute apart from `hours` on, seeds seed, seed + 1, ..."""
    for k in range(runs):
        write_run(
            directory / f"run-{k + 1}", seed + k, hours + k / 60, ttft_scale, n, run_sigma=run_sigma, failed=failed
        )
    return directory
