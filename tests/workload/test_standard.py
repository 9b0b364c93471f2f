"""The standard workloads' sampled statistics against Appendix A, and determinism by seed."""

import numpy as np
import pytest
from scipy import stats as sps

from infermeter.workload import STANDARD, generate
from infermeter.workload.standard import SYNTHETIC_SKEWED

N = 100_000


def test_synthetic_uniform_matches_a1():
    r = generate(STANDARD["synthetic-uniform"], N, seed=42)
    assert r.input_tokens.min() == 128 and r.input_tokens.max() == 512
    assert r.output_tokens.min() == 64 and r.output_tokens.max() == 256
    # means 320 and 160; std of a discrete uniform over 385 values is ~111, so the standard error is ~0.35
    assert abs(r.input_tokens.mean() - 320) < 2
    assert abs(r.output_tokens.mean() - 160) < 1
    assert (r.prefix_id == -1).all()


def test_synthetic_skewed_matches_a2():
    r = generate(SYNTHETIC_SKEWED, N, seed=7)
    x = r.input_tokens
    assert x.min() == 32 and x.max() == 4096
    # A.2: median ~245 (e^5.5 = 244.7), mean ~405 with floor and cap
    assert abs(np.median(x) - 245) / 245 < 0.02
    assert abs(x.mean() - 405) / 405 < 0.03
    # and against the closed form of the clipped log-normal: 3 standard errors
    expect = SYNTHETIC_SKEWED.classes[0].input.expected_mean()
    assert abs(x.mean() - expect) < 3 * x.std() / np.sqrt(N)
    y = r.output_tokens
    assert y.min() == 16 and y.max() == 2048
    assert abs(np.median(y) - np.exp(4.5)) / np.exp(4.5) < 0.03


def test_conversation_follows_a32_reference_percentiles():
    r = generate(STANDARD["conversation"], N, seed=3)
    body = r.input_tokens - r.prefix_tokens
    for q, ref in ((50, 156), (95, 892), (99, 2134)):
        assert abs(np.percentile(body, q) - ref) / ref < 0.04, q
    for q, ref in ((50, 234), (95, 789), (99, 1567)):
        assert abs(np.percentile(r.output_tokens, q) - ref) / ref < 0.04, q
    share = r.prefix_id >= 0
    assert abs(share.mean() - 0.5) < 0.01
    assert (r.prefix_tokens[share] == 200).all()


def test_code_completion_prefix_sharing_is_zipf_over_ten():
    r = generate(STANDARD["code-completion"], N, seed=5)
    share = r.prefix_id >= 0
    assert abs(share.mean() - 0.8) < 0.01
    counts = np.bincount(r.prefix_id[share], minlength=10)
    expect = np.arange(1, 11) ** -1.5
    expect = expect / expect.sum() * share.sum()
    # chi-square goodness of fit at the 0.1% level
    assert sps.chisquare(counts, expect).pvalue > 1e-3
    lengths = {int(p): int(t) for p, t in zip(r.prefix_id[share], r.prefix_tokens[share], strict=True)}
    assert len(lengths) == 10 and all(512 <= v <= 1024 for v in lengths.values())
    out = r.output_tokens
    assert abs(np.median(out) - np.exp(4.0)) / np.exp(4.0) < 0.04


def test_long_context_targets():
    r = generate(STANDARD["long-context"], 10_000, seed=1)
    values, counts = np.unique(r.input_tokens, return_counts=True)
    assert values.tolist() == [8192, 16384, 32768, 65536, 131072]
    assert counts.min() > 1800
    assert (r.output_tokens == 256).all()


def test_fairness_mix_classes():
    r = generate(STANDARD["fairness-mix"], 20_000, seed=2)
    short = r.request_class == "short"
    assert abs(short.mean() - 0.8) < 0.01
    assert r.input_tokens[short].max() <= 256 and r.input_tokens[~short].min() >= 1024


@pytest.mark.parametrize("name", list(STANDARD))
def test_same_seed_same_requests(name):
    a, b = generate(STANDARD[name], 500, seed=11), generate(STANDARD[name], 500, seed=11)
    c = generate(STANDARD[name], 500, seed=12)
    assert a.rows() == b.rows()
    if name != "long-context":  # only five distinct lengths there, still differs in order
        assert not np.array_equal(a.input_tokens, c.input_tokens)
    decl = STANDARD[name].declaration(11)
    assert decl["seed"] == 11 and decl["name"] == name


def test_a_workload_of_fewer_requests_is_the_head_of_a_longer_one() -> None:
    """Two systems loaded for the same time at their own rates send heads of one sequence (draft 6.1: the same
    requests in the same order): the first k requests drawn do not depend on how many are drawn."""
    import numpy as np

    from infermeter.workload.spec import generate
    from infermeter.workload.standard import STANDARD

    for name, spec in STANDARD.items():
        head, whole = generate(spec, 109, 42), generate(spec, 1_000, 42)
        for field in ("input_tokens", "output_tokens", "prefix_id", "prefix_tokens"):
            assert np.array_equal(getattr(head, field), getattr(whole, field)[:109]), (name, field)
        assert list(head.request_class) == list(whole.request_class[:109]), name
