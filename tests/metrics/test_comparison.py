"""The rule that calls a difference between groups of runs significant, and the 6.1 equivalence findings (the
statistics themselves: tests/metrics/test_significance.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from infermeter.metrics.comparison import Group, Run, _runs_agree, compare, equivalence
from infermeter.run_info import RunInfo


def _run(samples: dict[str, np.ndarray], out_tok_s: float = 100.0) -> Run:
    summary = SimpleNamespace(throughput=SimpleNamespace(output_tok_s=out_tok_s, req_s=1.0), duration_s=10.0)
    return Run(path=Path("x"), info=RunInfo(), summary=summary, samples=samples, request_hash="h")  # type: ignore


def _group(label: str, shift: float, runs: int, seed: int, n: int = 400, repeat: bool = False) -> Group:
    """Runs of lognormal samples (each run drawn anew, or the same draw `repeat`ed) moved by `shift`."""
    rng = np.random.default_rng(seed)
    made = []
    first = None
    for _ in range(runs):
        if first is None or not repeat:
            first = {m: rng.lognormal(3, 0.3, n) for m in ("ttft", "itl", "tpot", "e2e", "normalized")}
        made.append(_run({m: v + shift for m, v in first.items()}))
    return Group(label, made, {"system": label})


def test_a_large_consistent_shift_is_significant() -> None:
    base = _group("A", 0.0, 3, 1)
    c = compare([base, _group("B", 10.0, 3, 2)], base, reps=500)
    p50 = [r for r in c.rows if r.statistic == "P50"]
    assert p50 and all(r.significant and r.runs_agree for r in p50)


def test_noise_is_rarely_called_a_difference() -> None:
    """Twenty comparisons of groups drawn from one distribution (17 tests each): Holm's correction holds the chance
    of any false call near 5% a comparison, and the effect and run-by-run conditions lower it further."""
    falsely = 0
    for seed in range(20):
        base = _group("A", 0.0, 3, 100 + seed)
        c = compare([base, _group("B", 0.0, 3, 200 + seed)], base, reps=200)
        falsely += any(r.significant for r in c.rows)
    assert falsely <= 2


def test_a_difference_below_the_smallest_effect_is_not_significant() -> None:
    base = _group("A", 0.0, 3, 1, n=3000, repeat=True)
    c = compare([base, _group("B", 0.6, 3, 1, n=3000, repeat=True)], base, reps=1000)  # the same samples, +3%
    row = next(r for r in c.rows if r.metric == "ttft" and r.statistic == "P50")
    assert row.p_adjusted < 0.05 and row.runs_agree  # real and consistent, but below the smallest effect (5%)
    assert row.relative == pytest.approx(0.03, abs=0.002) and not row.large_enough and not row.significant


def test_runs_agree_only_when_every_run_is_beyond() -> None:
    assert _runs_agree([1, 2, 3], [4, 5, 6]) is True
    assert _runs_agree([1, 2, 5], [4, 5, 6]) is False
    assert _runs_agree([1], [4, 5]) is None


def test_equivalence_names_what_differs() -> None:
    def run(seed: int, rate: str, boundary: str | None, hw: str | None, h: str) -> Run:
        info = RunInfo.model_validate(
            {
                "workload": {"name": "w", "seed": seed},
                "load": {"description": rate},
                "sut": {"boundary": boundary, "hardware": hw},
            }
        )
        r = _run({})
        r.info, r.request_hash = info, h
        return r

    a = Group("G1", [run(1, "5 req/s", "Model Engine", "H100", "x")], {})
    b = Group("G2", [run(2, "9 req/s", "Gateway", None, "y")], {})
    found = {f.text.split(":")[0]: f for f in equivalence([a, b])}
    assert not found["Identical workload"].met and "seeds 1, 2" in found["Identical workload"].reason
    assert not found["Equivalent SUT boundary"].met and "Gateway" in found["Equivalent SUT boundary"].reason
    assert not found["Comparable hardware (declared; normalized where it differs, 6.2)"].met
    assert not found["Same load model and parameters"].met
    same = {f.text: f.met for f in equivalence([a, Group("G3", [run(1, "5 req/s", "Model Engine", "H100", "x")], {})])}
    assert all(same.values())
