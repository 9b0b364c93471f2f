import numpy as np
import pytest

from infermeter.errors import UserError
from infermeter.metrics.fairness import jain_index, starvation_rate
from infermeter.metrics.goodput import meets_slo, parse_slo


def test_parse_slo_units():
    assert parse_slo("ttft=200ms, tpot=0.05s,itl=1500us,e2e=2") == pytest.approx(
        {"ttft": 0.2, "tpot": 0.05, "itl": 0.0015, "e2e": 0.002}
    )
    with pytest.raises(UserError, match="unknown"):
        parse_slo("latency=3ms")
    with pytest.raises(UserError, match="form"):
        parse_slo("ttft=fast")


def test_goodput_is_a_conjunction():
    ok = np.array([True, True, True, False])
    per = {
        "ttft": np.array([0.1, 0.3, 0.1, 0.1]),
        "tpot": np.array([0.01, 0.01, 0.06, 0.01]),
        "itl": np.full(4, np.nan),
        "e2e": np.ones(4),
    }
    np.testing.assert_array_equal(meets_slo(ok, per, {"ttft": 0.2, "tpot": 0.05}), [True, False, False, False])


def test_undefined_tpot_passes_but_undefined_ttft_fails():
    ok = np.array([True, True])
    per = {"ttft": np.array([np.nan, 0.1]), "tpot": np.array([np.nan, np.nan])}
    np.testing.assert_array_equal(meets_slo(ok, per, {"ttft": 0.2, "tpot": 0.01}), [False, True])


def test_jain_index():
    assert jain_index(np.array([1.0, 1.0, 1.0])) == pytest.approx(1.0)
    # (1 + 3)^2 / (2 * (1 + 9)) = 0.8
    assert jain_index(np.array([1.0, 3.0, np.nan])) == pytest.approx(0.8)
    assert jain_index(np.array([])) is None


def test_starvation_rate_per_class():
    wait = np.array([1.0, 1.0, 1.0, 6.0, 2.0, 2.0, 2.0, 2.0])
    cls = np.array(["a"] * 4 + ["b"] * 4, dtype=object)
    # class a: median 1.0, one of four waits above 5.0; class b: none
    assert starvation_rate(wait, cls) == {"a": 0.25, "b": 0.0}
