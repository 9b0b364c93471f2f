"""The statistics of a comparison against hand-computed values, and the rule that calls a difference significant."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from infermeter.metrics.comparison import Group, Run, _runs_agree, compare, equivalence
from infermeter.metrics.significance import (
    bootstrap_quantile_difference,
    effect_magnitude,
    holm,
    mann_whitney,
    mean_ci,
    welch_p,
)
from infermeter.run_info import RunInfo


def test_mann_whitney_counts_pairs() -> None:
    # every b above every a: U_b = 3 * 3 = 9 pairs, delta = 2 * 9 / 9 - 1 = 1
    r = mann_whitney(np.array([1.0, 2, 3]), np.array([4.0, 5, 6]))
    assert (r.u, r.cliffs_delta) == (9.0, 1.0)
    assert r.p == pytest.approx(0.1)  # exact two-sided: 2 of the C(6,3) = 20 orderings are this extreme
    # ties count half: a = [1, 2], b = [2, 3]: pairs b > a: (2>1), (3>1), (3>2) = 3, one tie (2=2) -> U_b = 3.5
    r = mann_whitney(np.array([1.0, 2]), np.array([2.0, 3]))
    assert r.u == 3.5 and r.cliffs_delta == pytest.approx(2 * 3.5 / 4 - 1)
    assert math.isnan(mann_whitney(np.array([]), np.array([1.0])).p)


def test_effect_words_follow_romano() -> None:
    assert [effect_magnitude(d) for d in (0.1, -0.2, 0.4, -0.9)] == ["negligible", "small", "medium", "large"]


def test_holm_steps_down() -> None:
    # sorted p: 0.01 (x3 = 0.03), 0.03 (x2 = 0.06), 0.04 (x1 = 0.04 -> monotone: 0.06); NaN is not a test
    out = holm([0.01, 0.04, 0.03, float("nan")])
    assert out[:3] == pytest.approx([0.03, 0.06, 0.06]) and math.isnan(out[3])
    assert holm([0.6, 0.7]) == [1.0, 1.0]  # capped at 1


def test_mean_ci_is_student_t() -> None:
    m = mean_ci([1.0, 2.0, 3.0])
    half = 4.302652729911275 * 1.0 / math.sqrt(3)  # t(0.975, 2) x s / sqrt(n), s = 1
    assert (m.mean, m.lo, m.hi) == pytest.approx((2.0, 2.0 - half, 2.0 + half))
    assert mean_ci([5.0]).lo is None and mean_ci([]).mean is None


def test_welch_on_known_data() -> None:
    # a = [1, 2, 3], b = [4, 5, 6]: means differ by 3, both variances 1: t = 3 / sqrt(1/3 + 1/3) = 3.674, df = 4
    from scipy import stats

    assert welch_p([1, 2, 3], [4, 5, 6]) == pytest.approx(2 * stats.t.sf(3 / math.sqrt(2 / 3), 4))
    assert welch_p([1], [2, 3]) is None
    assert welch_p([2, 2], [2, 2]) == 1.0 and welch_p([2, 2], [3, 3]) == 0.0


def test_the_bootstrap_finds_a_shift_and_no_shift() -> None:
    rng = np.random.default_rng(3)
    a = [rng.lognormal(2, 0.5, 2000) for _ in range(3)]
    shifted = bootstrap_quantile_difference(a, [x + 5 for x in a], 0.5, reps=500)
    assert shifted.diff == pytest.approx(5.0) and shifted.lo < 5 < shifted.hi and shifted.p < 0.01
    same = bootstrap_quantile_difference(a, [rng.lognormal(2, 0.5, 2000) for _ in range(3)], 0.99, reps=500)
    assert same.lo < 0 < same.hi and same.p > 0.05
    assert bootstrap_quantile_difference(a, a, 0.99, reps=200, seed=7) == bootstrap_quantile_difference(
        a, a, 0.99, reps=200, seed=7
    )


def test_the_bootstrap_is_stratified_and_bounded_in_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    import infermeter.metrics.significance as sig

    monkeypatch.setattr(sig, "CHUNK_CELLS", 10_000)  # replicates drawn a few at a time
    runs_a = [np.arange(10.0), np.arange(1000.0)]  # very different run sizes
    runs_b = [np.arange(5000.0)]
    d = sig.bootstrap_quantile_difference(runs_a, runs_b, 0.5, reps=50)
    pooled_a = np.concatenate(runs_a)
    assert d.diff == pytest.approx(np.quantile(runs_b[0], 0.5) - np.quantile(pooled_a, 0.5))


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
