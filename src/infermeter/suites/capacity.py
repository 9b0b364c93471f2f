"""Capacity search (seeds/001 "capacity evaluation"): the highest request rate a server sustains under SLOs.

The rate doubles while probes pass, then bisects between the last pass and the first failure until the gap is
within a relative tolerance.  Every probe is a full run in its own directory; a search started again over the
same directory reuses the probes already there (decisions replay identically), so an interrupted search
resumes.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson

from infermeter import resumable
from infermeter.errors import UserError
from infermeter.metrics import RecordColumns, Summary, summarize
from infermeter.metrics.slo import Slo
from infermeter.records import holds_run, read_run_info
from infermeter.suites.lab import completed

SETTINGS = "search.json"  # what the probes were measured under: a resumed search must be the same search


@dataclass
class ProbeResult:
    rate: float
    run_dir: str
    passed: bool
    achieved_req_s: float
    output_tok_s: float
    success_rate: float | None
    slo_values: dict[str, str]
    reused: bool = False


@dataclass
class CapacityResult:
    capacity_req_s: float | None
    probes: list[ProbeResult] = field(default_factory=list)
    bracket: tuple[float, float | None] = (0.0, None)
    slos: list[str] = field(default_factory=list)
    tolerance: float = 0.05
    note: str = ""

    def to_json(self) -> bytes:
        return orjson.dumps(asdict(self), option=orjson.OPT_INDENT_2)


def claim_search_dir(out: Path, settings: dict[str, Any]) -> None:
    """Start a search in `out`, or resume the one there if it was made with the same settings; refuse a run
    directory and a search with other settings (their probes would answer another question)."""
    if holds_run(out):
        raise UserError(f"--out {out} holds a single run, not a capacity search: choose another directory")
    if not (out / SETTINGS).exists() and out.is_dir() and any(out.iterdir()):
        raise UserError(f"--out {out} is not empty and holds no capacity search: choose a new directory")
    resumable.claim(out, SETTINGS, settings, "capacity search")


def rate_key(rate: float) -> float:
    """Rates rounded to 4 significant digits, so a resumed search names the same probe directories."""
    return float(f"{rate:.4g}")


def probe_dir(out: Path, rate: float) -> Path:
    return out / f"probe-rate-{rate_key(rate):g}"


def evaluate(run_dir: Path, slos: list[Slo], min_success: float) -> tuple[Summary, bool]:
    """Summarize a probe's records with exactly what the SLOs need, and decide pass or fail."""
    info = read_run_info(run_dir)
    goodput: dict[str, float] = {}
    deadlines = None
    for s in slos:
        if s.goodput:
            goodput.update(s.goodput)
        if s.deadlines is not None and deadlines is None:
            deadlines = s.deadlines
    cols = RecordColumns.of_run(run_dir, info)
    summary = summarize(cols, info.itl_option, goodput, deadlines)
    ok = (summary.requests.success_rate or 0.0) >= min_success and all(s.passes(summary) for s in slos)
    return summary, ok


def search(
    run_probe: Callable[[float, Path], None],
    slos: list[Slo],
    out: Path,
    start_rate: float = 1.0,
    max_rate: float = 1000.0,
    tolerance: float = 0.05,
    max_probes: int = 12,
    growth: float = 2.0,
    min_success: float = 0.99,
    on_probe: Callable[[ProbeResult], None] | None = None,
) -> CapacityResult:
    """Find the capacity; `run_probe(rate, run_dir)` must leave a run directory there."""
    result = CapacityResult(None, slos=[s.text for s in slos], tolerance=tolerance)
    out.mkdir(parents=True, exist_ok=True)

    def check(rate: float) -> bool:
        rate = rate_key(rate)
        d = probe_dir(out, rate)
        reused = completed(d)
        if not reused:
            if d.exists():  # an interrupted probe: run it again from scratch
                shutil.rmtree(d)
            run_probe(rate, d)
        summary, ok = evaluate(d, slos, min_success)
        probe = ProbeResult(
            rate,
            str(d),
            ok,
            summary.throughput.req_s,
            summary.throughput.output_tok_s,
            summary.requests.success_rate,
            {s.text: s.describe_value(summary) for s in slos},
            reused,
        )
        result.probes.append(probe)
        _save(out, result)
        if on_probe:
            on_probe(probe)
        return ok

    lo, hi = 0.0, None
    rate = start_rate
    while len(result.probes) < max_probes:  # expand while passing
        if check(rate):
            lo = rate_key(rate)
            if rate >= max_rate:
                break
            rate = min(rate * growth, max_rate)
        else:
            hi = rate_key(rate)
            break
    while hi is not None and lo == 0.0 and len(result.probes) < max_probes:  # the first probe failed: shrink
        rate = hi / growth
        if check(rate):
            lo = rate_key(rate)
        else:
            hi = rate_key(rate)
    while hi is not None and lo > 0 and (hi - lo) / hi > tolerance and len(result.probes) < max_probes:
        mid = (lo + hi) / 2
        if check(mid):
            lo = rate_key(mid)
        else:
            hi = rate_key(mid)
    result.bracket = (lo, hi)
    result.capacity_req_s = lo if lo > 0 else None
    if hi is None:
        result.note = f"every probe passed up to {lo:g} req/s (--max-rate or --max-probes reached)"
    elif (hi - lo) / hi > tolerance:
        result.note = f"stopped after {max_probes} probes with the bracket [{lo:g}, {hi:g}] still wider than tolerance"
    _save(out, result)
    return result


def _save(out: Path, result: CapacityResult) -> None:
    """capacity.json, replaced atomically (a kill mid-write leaves the previous one)."""
    tmp = out / "capacity.json.tmp"
    tmp.write_bytes(result.to_json())
    os.replace(tmp, out / "capacity.json")
