import numpy as np
import pytest
from pydantic import ValidationError

from infermeter.workload.arrivals import ArrivalSpec, arrival_offsets

N = 200_000


def _gaps(spec, seed=0):
    t = arrival_offsets(spec, N, seed)
    assert t[0] == 0 and (np.diff(t) >= 0).all()
    return np.diff(t)


def test_poisson_mean_and_cv():
    g = _gaps(ArrivalSpec(kind="poisson", rate=20))
    assert abs(g.mean() - 0.05) / 0.05 < 0.01
    assert abs(g.std() / g.mean() - 1) < 0.02


@pytest.mark.parametrize("b", [0.25, 1.0, 4.0])
def test_gamma_burstiness_keeps_rate_and_sets_cv(b):
    g = _gaps(ArrivalSpec(kind="gamma", rate=10, burstiness=b))
    assert abs(g.mean() - 0.1) / 0.1 < 0.02
    assert abs(g.std() / g.mean() - 1 / np.sqrt(b)) < 0.05


def test_constant_and_uniform():
    assert np.allclose(_gaps(ArrivalSpec(kind="constant", rate=4)), 0.25)
    g = _gaps(ArrivalSpec(kind="uniform", rate=4))
    assert g.max() <= 0.5 and abs(g.mean() - 0.25) < 0.005


def test_trace_time_scale():
    t = arrival_offsets(ArrivalSpec(kind="trace", time_scale=10), 3, 0, np.array([100.0, 110.0, 130.0]))
    np.testing.assert_allclose(t, [0.0, 1.0, 3.0])


def test_same_seed_same_arrivals():
    s = ArrivalSpec(kind="gamma", rate=5, burstiness=0.5)
    assert np.array_equal(arrival_offsets(s, 100, 3), arrival_offsets(s, 100, 3))
    assert not np.array_equal(arrival_offsets(s, 100, 3), arrival_offsets(s, 100, 4))


def test_bad_specs():
    with pytest.raises(ValidationError, match="needs a rate"):
        ArrivalSpec(kind="poisson")
    with pytest.raises(ValidationError, match="burstiness"):
        ArrivalSpec(kind="poisson", rate=1, burstiness=0.5)


@pytest.mark.parametrize(
    ("rate", "duration", "sent"),
    [(50, 20, 1000), (100, 20, 2000), (300, 20, 6000), (7, 3, 21), (0.3, 10, 3), (2.2, 5, 11), (33.2, 60, 1992)],
)
def test_constant_arrivals_send_rate_times_duration_in_the_window(rate, duration, sent):
    """The driver sends the offsets in [0, duration): a constant process puts exactly ceil(rate x duration) there (a
    running sum of 1/rate put the 1,001st of 50 req/s x 20 s at 19.999999999999 s)."""
    n = int(rate * duration * 1.2) + 100  # as many as RunOptions.request_count draws
    offsets = arrival_offsets(ArrivalSpec(kind="constant", rate=rate), n, 0)
    assert int((offsets < duration).sum()) == sent
    np.testing.assert_allclose(np.diff(offsets), 1 / rate, rtol=1e-6)
