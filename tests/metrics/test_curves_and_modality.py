"""Curve analysis (knee, saturation, optimal point, scaling fits), steady state and ITL modality against cases whose
answers are known by construction."""

from __future__ import annotations

import numpy as np
import pytest

from infermeter.errors import UserError
from infermeter.metrics.curves import knee_point, optimal_point, saturation_point, scaling_fit
from infermeter.metrics.modality import modality
from infermeter.metrics.steady_state import completion_ratio, in_flight, queue_trend


def test_knee_saturation_and_optimal_points_as_the_draft_defines_them() -> None:
    p99 = [142, 178, 267, 512, 1234, 3456]  # Table 5's example: minimum 142, first above 284 is 512
    assert knee_point(p99) == 3
    achieved = [284, 852, 1420, 1988, 2534, 2712, 2650]
    assert saturation_point(achieved) == 6
    assert saturation_point(achieved, tolerance=0.05) is None  # a 2.3% drop is within 5%
    assert optimal_point(achieved, [True, True, True, True, False, False, False]) == 3
    assert knee_point([None, None]) is None and optimal_point([1.0], [False]) is None


def test_scaling_fit_tells_linear_from_quadratic() -> None:
    x = np.array([1024, 2048, 4096, 8192, 16384], dtype=float)
    linear = scaling_fit(x, 5 + 0.07 * x)
    assert linear.best == "linear" and linear.k == pytest.approx(1.0, abs=0.05)
    assert linear.linear.coefficients[1] == pytest.approx(0.07)
    quad = scaling_fit(x, 5 + 0.07 * x + 2e-5 * x**2)
    assert quad.best == "quadratic" and quad.k > 1.1 and quad.quadratic.r2 > 0.999
    with pytest.raises(UserError):
        scaling_fit([1, 1, 2], [1, 2, 3])


def test_in_flight_and_queue_growth() -> None:
    sub, fin = np.array([0.0, 1.0, 2.0]), np.array([1.5, 4.0, 2.5])
    assert in_flight(sub, fin, np.array([0.5, 1.2, 2.2, 3.0])).tolist() == [1, 2, 2, 1]
    # a server serving one request per 0.1 s: arrivals every 0.2 s keep it idle half the time, every 0.05 s overload it
    for gap, growing in ((0.2, False), (0.05, True)):
        arrivals = np.arange(0, 60, gap)
        done = np.zeros_like(arrivals)
        free = 0.0
        for i, a in enumerate(arrivals):
            free = max(free, a) + 0.1
            done[i] = free
        assert queue_trend(arrivals, done, (0.0, 60.0)).growing is growing
        ratio = completion_ratio(arrivals, done)
        assert ratio is not None and (ratio < 0.9) is growing


def test_modality_tells_one_mode_from_two() -> None:
    rng = np.random.default_rng(1)
    one = rng.lognormal(np.log(10), 0.3, 5000)
    skewed = rng.gamma(2.0, 5.0, 5000)
    two = np.concatenate([rng.lognormal(np.log(10), 0.1, 4000), rng.lognormal(np.log(40), 0.1, 1000)])
    assert modality(one).verdict == "unimodal"
    assert modality(skewed).verdict == "unimodal"
    m = modality(np.concatenate([two, np.zeros(30)]))
    assert m.verdict == "multimodal" and m.zeros == 30
    assert m.means_ms[0] == pytest.approx(10, rel=0.05) and m.means_ms[1] == pytest.approx(40, rel=0.05)
    assert m.weights[1] == pytest.approx(0.2, abs=0.02)
    assert modality(two) == modality(two)
    assert modality(one[:20]).verdict == "too few samples"
