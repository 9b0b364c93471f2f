"""The statistics that hold two groups of runs against each other (draft section 6.3), checked against values worked
out by hand: the arithmetic is in the comments."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import infermeter.metrics.significance as sig
from infermeter.metrics.significance import (
    bootstrap_quantile_difference,
    effect_magnitude,
    holm,
    mann_whitney,
    mean_ci,
    welch_p,
)

NAN = float("nan")


def _lognormal_runs(seed: int, runs: int = 3, n: int = 2000) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.lognormal(2.0, 0.5, n) for _ in range(runs)]


# Mann-Whitney U and Cliff's delta


def test_mann_whitney_without_ties_is_exact() -> None:
    # every b above every a: U_b = 3 x 3 = 9 pairs, delta = 2 x 9 / 9 - 1 = 1
    r = mann_whitney(np.array([1.0, 2, 3]), np.array([4.0, 5, 6]))
    assert (r.u, r.cliffs_delta) == (9.0, 1.0)
    # exact two-sided p: of the C(6, 3) = 20 equally likely splits, 2 are this extreme (b all top, b all bottom)
    assert r.p == pytest.approx(2 / 20)


def test_mann_whitney_counts_ties_as_half() -> None:
    a, b = np.array([1.0, 2, 2, 3]), np.array([2.0, 3, 3, 4])
    # pairs with b > a: b=2 beats {1} -> 1; each b=3 beats {1, 2, 2} -> 2 x 3 = 6; b=4 beats all 4 -> 4; total 11
    # ties: b=2 with the two 2s -> 2; each b=3 with the 3 -> 2; total 4.  U_b = 11 + 4 / 2 = 13 of 4 x 4 = 16 pairs
    # delta = 2 x 13 / 16 - 1 = 0.625 = P(b > a) - P(b < a) = 11/16 - 1/16 (the one pair b=2 < a=3)
    r = mann_whitney(a, b)
    assert r.u == 13.0 and r.cliffs_delta == pytest.approx(0.625)
    # ties force the normal approximation: mean U = 16 / 2 = 8; tie groups {2, 2, 2} and {3, 3, 3} among N = 8:
    # var = n_a n_b / 12 x (N + 1 - sum(t^3 - t) / (N (N - 1))) = 16/12 x (9 - 48/56) = 10.857...
    # continuity-corrected z = (13 - 8 - 0.5) / sqrt(var) = 1.3657, two-sided p = erfc(z / sqrt 2) = 0.1720
    z = 4.5 / math.sqrt(16 / 12 * (9 - 48 / 56))
    assert r.p == pytest.approx(math.erfc(z / math.sqrt(2)))
    assert r.p == pytest.approx(0.17203, abs=1e-5)


def test_cliffs_delta_is_positive_when_b_is_larger() -> None:
    low, high = np.array([1.0, 2, 3]), np.array([4.0, 5, 6])
    assert mann_whitney(low, high).cliffs_delta == 1.0
    # swapped: no pair has b > a, so U_b = 0 and delta = 2 x 0 / 9 - 1 = -1; the p-value is symmetric
    swapped = mann_whitney(high, low)
    assert (swapped.u, swapped.cliffs_delta) == (0.0, -1.0)
    assert swapped.p == pytest.approx(mann_whitney(low, high).p)
    # identical groups: every pair ties, U_b = 9 / 2, delta = 0
    assert mann_whitney(low, low).cliffs_delta == 0.0


def test_mann_whitney_on_an_empty_side_is_nan() -> None:
    for a, b in ((np.array([]), np.array([1.0])), (np.array([1.0]), np.array([]))):
        r = mann_whitney(a, b)
        assert math.isnan(r.p) and math.isnan(r.cliffs_delta)


def test_effect_magnitude_follows_romano() -> None:
    # |d| < 0.147 negligible, < 0.33 small, < 0.474 medium, else large; the sign does not matter
    cases = {0.0: "negligible", -0.146: "negligible", 0.147: "small", -0.329: "small", 0.33: "medium"}
    cases |= {-0.473: "medium", 0.474: "large", -1.0: "large"}
    assert {d: effect_magnitude(d) for d in cases} == cases
    assert effect_magnitude(NAN) == "n/a"


# Holm-Bonferroni


def test_holm_steps_down_and_skips_nan() -> None:
    # three real tests (NaN is not one); sorted: 0.01 x 3 = 0.03, 0.03 x 2 = 0.06, 0.04 x 1 = 0.04 -> raised to 0.06
    # so the adjusted values never fall as the raw ones rise.  Back in input order: [0.03, 0.06, 0.06, nan]
    out = holm([0.01, 0.04, 0.03, NAN])
    assert out[:3] == pytest.approx([0.03, 0.06, 0.06]) and math.isnan(out[3])


def test_holm_caps_at_one_and_handles_ties_and_nothing() -> None:
    assert holm([0.6, 0.7]) == [1.0, 1.0]  # 0.6 x 2 = 1.2 -> 1; 0.7 x 1 = 0.7 -> raised to 1
    assert holm([0.02, 0.02]) == pytest.approx([0.04, 0.04])  # 0.02 x 2 = 0.04; 0.02 x 1 -> raised to 0.04
    assert holm([0.01]) == [0.01]  # one test: nothing to correct
    assert holm([]) == []
    assert all(math.isnan(p) for p in holm([NAN, NAN]))


# Means over runs: Student-t interval and Welch's test


def test_mean_ci_is_student_t() -> None:
    # [1, 2, 3]: mean 2, s = 1; t(0.975, 2) = 4.302652729911275 -> half-width 4.3027 x 1 / sqrt(3) = 2.4841
    m = mean_ci([1.0, 2.0, 3.0])
    half = 4.302652729911275 * 1.0 / math.sqrt(3)
    assert m.n == 3 and (m.mean, m.lo, m.hi) == pytest.approx((2.0, 2.0 - half, 2.0 + half))
    # 90%: with 2 degrees of freedom t(p) = (2p - 1) / sqrt(2 p (1 - p)); t(0.95) = 0.9 / sqrt(0.095) = 2.91999
    m90 = mean_ci([1.0, 2.0, 3.0], level=0.90)
    half90 = 0.9 / math.sqrt(2 * 0.95 * 0.05) / math.sqrt(3)
    assert (m90.lo, m90.hi) == pytest.approx((2.0 - half90, 2.0 + half90))


def test_mean_ci_with_one_run_or_none() -> None:
    assert mean_ci([5.0]) == sig.MeanCI(1, 5.0, None, None)
    assert mean_ci([]) == sig.MeanCI(0, None, None, None)


def test_welch_on_equal_variances_matches_the_closed_form() -> None:
    # a = [1, 2, 3], b = [4, 5, 6]: both variances 1, t = -3 / sqrt(1/3 + 1/3) = -3.6742
    # Welch-Satterthwaite df = (1/3 + 1/3)^2 / ((1/3)^2 / 2 + (1/3)^2 / 2) = (4/9) / (1/9) = 4
    # t with 4 df: F(t) = 1/2 + 3/8 x x (1 - t^2 / 12 / (1 + t^2/4)), x = t / sqrt(1 + t^2/4); p = 2 (1 - F(|t|))
    t = 3 / math.sqrt(2 / 3)
    f = 0.5 + 3 / 8 * (t / math.sqrt(1 + t * t / 4)) * (1 - t * t / (12 * (1 + t * t / 4)))
    assert welch_p([1, 2, 3], [4, 5, 6]) == pytest.approx(2 * (1 - f))
    assert welch_p([1, 2, 3], [4, 5, 6]) == pytest.approx(0.021312, abs=1e-6)


def test_welch_uses_unequal_variances() -> None:
    # a = [1, 2, 3] (var 1), b = [10, 20, 30] (var 100): t = -18 / sqrt(1/3 + 100/3) = -3.1022
    # df = (101/3)^2 / ((1/3)^2 / 2 + (100/3)^2 / 2) = 20402 / 10001 = 2.04 (Student's pooled test would use 4)
    t, df = 18 / math.sqrt(101 / 3), 20402 / 10001
    assert welch_p([1, 2, 3], [10, 20, 30]) == pytest.approx(2 * stats.t.sf(t, df))
    assert welch_p([1, 2, 3], [10, 20, 30]) != pytest.approx(2 * stats.t.sf(t, 4))


def test_welch_edge_cases() -> None:
    assert welch_p([1], [2, 3]) is None and welch_p([1, 2], []) is None
    assert welch_p([2, 2], [2, 2]) == 1.0  # no spread, same mean
    assert welch_p([2, 2], [3, 3]) == 0.0  # no spread, different means


# Bootstrap of a quantile's difference, stratified by run


def test_bootstrap_finds_an_exact_shift() -> None:
    a = _lognormal_runs(3)
    r = bootstrap_quantile_difference(a, [x + 5 for x in a], 0.5, reps=500)
    # moving every sample by 5 moves every quantile by 5
    assert r.diff == pytest.approx(5.0) and r.lo < 5 < r.hi and r.p < 0.01


def test_bootstrap_finds_no_difference_between_draws_of_one_distribution() -> None:
    # one fixed draw; across 200 such pairs the 95% interval missed 0 in about 5% (P50) and 2.5% (P99) of them
    a, b = _lognormal_runs(100), _lognormal_runs(101)
    for q in (0.5, 0.99):
        r = bootstrap_quantile_difference(a, b, q, reps=500)
        assert r.lo < 0 < r.hi and r.p > 0.05
        assert r.diff == pytest.approx(np.quantile(np.concatenate(b), q) - np.quantile(np.concatenate(a), q))


def test_bootstrap_is_deterministic_for_a_seed() -> None:
    a, b = _lognormal_runs(5), _lognormal_runs(6)
    first = bootstrap_quantile_difference(a, b, 0.99, reps=200, seed=7)
    assert bootstrap_quantile_difference(a, b, 0.99, reps=200, seed=7) == first
    other = bootstrap_quantile_difference(a, b, 0.99, reps=200, seed=8)
    assert other.diff == first.diff and (other.lo, other.hi) != (first.lo, first.hi)


def test_bootstrap_resamples_within_each_run() -> None:
    # group a: a run of 10 ones and a run of 990 twos.  Pooled (1000 values) the 1% quantile sits at
    # position 999 x 0.01 = 9.99, between the 10th value (1) and the 11th (2): 1 + 0.99 x (2 - 1) = 1.99.
    # group b: 500 threes and 500 fours; its 1% quantile (position 9.99) is 3.  diff = 3 - 1.99 = 1.01.
    # Resampled within each run, every replicate keeps exactly 10 ones, so every replicate gives 1.01 and the
    # interval has no width; a pooled resample would draw Binomial(1000, 1%) ones and move the quantile.
    a_runs = [np.full(10, 1.0), np.full(990, 2.0)]
    b_runs = [np.full(500, 3.0), np.full(500, 4.0)]
    r = bootstrap_quantile_difference(a_runs, b_runs, 0.01, reps=300)
    assert r.diff == pytest.approx(1.01)
    assert r.lo == pytest.approx(1.01, abs=1e-12) and r.hi == pytest.approx(1.01, abs=1e-12)
    assert r.p < 0.05


def test_bootstrap_diff_is_the_pooled_quantile_for_runs_of_very_different_sizes() -> None:
    rng = np.random.default_rng(4)
    a_runs = [rng.lognormal(1, 0.3, 7), rng.lognormal(2, 0.3, 3000), rng.lognormal(3, 0.3, 40)]
    b_runs = [rng.lognormal(2, 0.3, 5000), rng.lognormal(2, 0.3, 12)]
    r = bootstrap_quantile_difference(a_runs, b_runs, 0.9, reps=100)
    expected = np.quantile(np.concatenate(b_runs), 0.9) - np.quantile(np.concatenate(a_runs), 0.9)
    assert r.diff == pytest.approx(expected) and r.lo <= r.hi


def test_bootstrap_of_an_empty_group_is_nan() -> None:
    some = [np.arange(5.0)]
    for a, b in (([], some), (some, []), ([np.array([])], some), (some, [np.array([]), np.array([])])):
        r = bootstrap_quantile_difference(a, b, 0.5, reps=10)
        assert all(math.isnan(v) for v in (r.diff, r.lo, r.hi, r.p))


def test_bootstrap_of_50000_samples_is_drawn_in_bounded_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    # 50,000 samples a group x 200 replicates would be a 10,000,000-cell array; chunks must stay under CHUNK_CELLS
    largest: list[int] = []
    real_quantile = np.quantile

    def spy(x: np.ndarray, *args: object, **kwargs: object) -> object:
        largest.append(np.asarray(x).size)
        return real_quantile(x, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(np, "quantile", spy)
    rng = np.random.default_rng(9)
    a = [rng.lognormal(2, 0.5, 25_000) for _ in range(2)]
    b = [rng.lognormal(2, 0.5, 10_000) for _ in range(5)]
    r = bootstrap_quantile_difference(a, b, 0.99, reps=200)
    assert math.isfinite(r.diff) and r.lo <= r.hi
    assert max(largest) <= sig.CHUNK_CELLS
    # replicate chunks (more than one group's 50,000 cells): at least ceil(10,000,000 / CHUNK_CELLS) a group
    chunks = [n for n in largest if n > 50_000]
    assert len(chunks) >= 2 * math.ceil(50_000 * 200 / sig.CHUNK_CELLS)
