import numpy as np
import pytest

from infermeter.metrics.statistics import PERCENTILES, ci_ranks, pkey, stats


def test_stats_match_hand_values():
    s = stats(np.array([1.0, 2.0, 3.0, 4.0, np.nan]), scale=1000)
    assert s.n == 4
    assert s.mean == pytest.approx(2500)
    assert s.min == 1000 and s.max == 4000
    # linear interpolation: position (n-1) q = 1.5 for the median, 2.97 for P99
    assert s.p50 == pytest.approx(2500)
    assert s.p99 == pytest.approx(3970)
    assert s.std == pytest.approx(np.std([1, 2, 3, 4]) * 1000)


def test_percentiles_equal_numpy_on_large_input():
    x = np.random.default_rng(0).lognormal(size=100_001)
    s = stats(x)
    for p in PERCENTILES:
        assert s.percentile(p) == s.value(pkey(p)) == pytest.approx(np.percentile(x, p), rel=1e-12)


def test_ci_brackets_the_estimate_and_is_null_when_too_few():
    x = np.arange(1, 101, dtype=float)
    s = stats(x)
    lo, hi = s.ci95.p50
    assert lo < s.p50 < hi
    # 100 samples cannot bound P99.9 from above
    assert s.ci95.p99_9[1] is None
    # Binomial(10, 0.99): P(B <= 8) = 0.0043 < 0.025 <= P(B <= 9) = 0.0956, so the lower rank is 9
    assert ci_ranks(10, 0.99) == (9, None)


def test_ci_coverage_is_at_least_95_percent():
    rng = np.random.default_rng(1)
    n, q, trials, hit = 200, 0.9, 2000, 0
    lo_r, hi_r = ci_ranks(n, q)
    true_q = q  # quantile of Uniform(0, 1)
    for _ in range(trials):
        x = np.sort(rng.random(n))
        hit += x[lo_r - 1] <= true_q < x[hi_r - 1]
    assert 0.945 <= hit / trials <= 0.995


def test_sample_count_warnings_follow_5_1_4_3():
    assert len(stats(np.ones(999)).warnings) == 2
    assert len(stats(np.ones(1000)).warnings) == 1
    assert stats(np.ones(10000)).warnings == []
    empty = stats(np.array([]))
    assert empty.n == 0 and empty.p50 is None


@pytest.mark.parametrize("n", [10, 137, 1000, 123_457, 25_500_000])
@pytest.mark.parametrize("p", [0.5, 0.9, 0.99, 0.999])
def test_binomial_ppf_matches_scipy(n, p):
    from scipy import stats as sps

    from infermeter.metrics.statistics import binom_ppf

    for a in (0.025, 0.975):
        assert binom_ppf(a, n, p) == int(sps.binom.ppf(a, n, p))


def test_weighted_stats_equal_expanded_stats():
    from infermeter.metrics.statistics import stats_weighted

    rng = np.random.default_rng(5)
    v = rng.lognormal(size=300)
    w = rng.integers(0, 40, size=300)
    got, expect = stats_weighted(v, w, 1000), stats(np.repeat(v, w), 1000)
    assert got.n == expect.n
    for key in ("mean", "std", "min", "max", "p50", "p90", "p95", "p99", "p99.9"):
        assert got.value(key) == pytest.approx(expect.value(key), rel=1e-9), key
    for p, bounds in expect.ci95.model_dump().items():
        assert got.ci95.model_dump()[p] == pytest.approx(bounds), p
