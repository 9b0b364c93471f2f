import numpy as np
import pytest
from pydantic import ValidationError

from infermeter.errors import UserError
from infermeter.workload.distributions import Empirical, Fixed, LogNormal, Normal, Quantiles, Uniform

rng = np.random.default_rng


def test_fixed_and_uniform_bounds():
    assert (Fixed(value=7).sample(rng(0), 10) == 7).all()
    x = Uniform(min=3, max=5).sample(rng(0), 10_000)
    assert set(np.unique(x)) == {3, 4, 5}
    with pytest.raises(ValidationError):
        Uniform(min=5, max=3)


def test_normal_clipped():
    x = Normal(mean=100, std=50, min=10, max=150).sample(rng(0), 50_000)
    assert x.min() == 10 and x.max() == 150
    assert abs(np.median(x) - 100) <= 1


def test_lognormal_floor_cap_and_closed_form_mean():
    d = LogNormal(mu=3.0, sigma=1.0, min=5, max=100)
    x = d.sample(rng(1), 200_000)
    assert x.min() == 5 and x.max() == 100
    assert abs(x.mean() - d.expected_mean()) < 0.2


def test_empirical_from_values_and_csv(tmp_path):
    x = Empirical(values=[10, 20]).sample(rng(0), 1000)
    assert set(np.unique(x)) == {10, 20}
    p = tmp_path / "lens.csv"
    p.write_text("prompt,other\n5,x\n6,y\n")
    assert set(np.unique(Empirical(csv=str(p), column="prompt").sample(rng(0), 100))) == {5, 6}
    with pytest.raises(UserError, match="no column 'missing'"):
        Empirical(csv=str(p), column="missing").sample(rng(0), 1)
    with pytest.raises(ValidationError):
        Empirical()


def test_quantiles_reproduce_given_points():
    d = Quantiles(points={50: 100, 90: 400, 99: 3000}, min=1, max=10**6)
    x = d.sample(rng(0), 400_000)
    for q, v in ((50, 100), (90, 400), (99, 3000)):
        assert abs(np.percentile(x, q) - v) / v < 0.03
    # two points make a log-normal: sigma = ln(892/156) / 1.645
    two = Quantiles(points={50: 156, 95: 892})
    np.testing.assert_allclose(two.ppf(np.array([0.05])), 156 * (156 / 892), rtol=1e-9)
