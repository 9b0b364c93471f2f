"""`infermeter runs check`: exit 1 on a real regression of the newest group of runs, 0 on noise (run-to-run noise
included), 1 when the candidate's requests all fail or nothing could be verified; the verdicts from their evidence;
the bad input refused in one line."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from infermeter.catalog.check import VERDICTS, Pair, judge
from infermeter.catalog.evidence import Change
from infermeter.catalog.groups import Point
from infermeter.catalog.names import Metric
from tests.catalog.build import RUN_SIGMA, write_group, write_run
from tests.catalog.conftest import Invoke, Result, one_line_error

NOISE_SEEDS = range(8)


def verdicts(result: Result) -> dict[str, str]:
    """metric -> verdict, from the reasons listed under the table ("ttft.p99: regression: ...")."""
    out = {}
    for line in result.out.splitlines():
        name, _, rest = line.partition(": ")
        if rest.split(":")[0] in VERDICTS and " " not in name:
            out[name] = rest.split(":")[0]
    return out


def last_line(result: Result) -> str:
    return result.out.rstrip().splitlines()[-1]


def test_a_ten_percent_slower_ttft_fails_the_check(groups: dict[str, Path], runs_cli: Invoke) -> None:
    result = runs_cli("check", groups["base"], groups["slower"], "--baseline", "last", "--max-regression", "5%")
    assert result.code == 1, result.out + result.err
    found = verdicts(result)
    assert found["ttft.p50"] == "regression"
    assert found["tpot.p50"] == "no significant change"  # the token gaps were drawn alike
    assert found["requests.success_rate"] == "no significant change"  # every request succeeded on both sides
    assert f"candidate {groups['slower']} (3 runs" in result.out and f"baseline {groups['base']} (3 runs" in result.out
    assert "intervals over runs and requests: a hierarchical bootstrap" in result.out
    assert last_line(result).startswith("REGRESSION: ")


def test_the_same_distributions_drawn_again_pass(groups: dict[str, Path], runs_cli: Invoke) -> None:
    result = runs_cli("check", groups["base"], groups["same"], "--max-regression", "5%")
    assert result.code == 0, result.out + result.err
    assert "regression" not in verdicts(result).values()
    assert last_line(result) == "no significant regression beyond 5.0% (7 of 7 metric checks verifiable)"


@pytest.fixture(scope="module")
def noisy(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """For each seed, two groups of three runs of the same system, each run's times scaled by a factor of its own
    (lognormal, sigma RUN_SIGMA): what repeated CI jobs see with nothing changed."""
    roots = []
    for seed in NOISE_SEEDS:
        root = tmp_path_factory.mktemp(f"noise-{seed}")
        write_group(root / "before", 1000 * seed, 0, n=200, run_sigma=RUN_SIGMA)
        write_group(root / "after", 1000 * seed + 500, 24, n=200, run_sigma=RUN_SIGMA)
        roots.append(root)
    return roots


def test_run_to_run_noise_raises_no_false_alarm(noisy: list[Path], runs_cli: Invoke) -> None:
    for root in noisy:
        result = runs_cli("check", root)
        assert result.code == 0, result.out
        assert "regression" not in verdicts(result).values(), result.out


def test_a_real_regression_under_run_to_run_noise_fails(tmp_path: Path, runs_cli: Invoke) -> None:
    # with runs about 4% apart, confirming that a 10% change exceeds the allowance takes more runs than three
    write_group(tmp_path / "before", 1, 0, runs=8, n=100, run_sigma=RUN_SIGMA)
    write_group(tmp_path / "after", 101, 24, ttft_scale=1.10, runs=8, n=100, run_sigma=RUN_SIGMA)
    result = runs_cli("check", tmp_path, "--max-regression", "2%", "--metric", "ttft.p50,tpot.p50")
    assert result.code == 1, result.out
    assert verdicts(result) == {"ttft.p50": "regression", "tpot.p50": "no significant change"}


def test_a_candidate_whose_requests_all_fail_fails(tmp_path: Path, runs_cli: Invoke) -> None:
    write_run(tmp_path / "a", seed=1, hours=0, n=100)
    write_run(tmp_path / "b", seed=2, hours=1, n=100, failed=100)
    result = runs_cli("check", tmp_path, "--group", "run")
    assert result.code == 1, result.out
    found = verdicts(result)
    for name in ("ttft.p50", "ttft.p99", "tpot.p50", "tpot.p99", "e2e.p99", "requests.success_rate"):
        assert found[name] == "regression", result.out
    assert found["throughput.output_tok_s"] == "not verifiable"  # one run a side
    assert "ttft.p50: regression: the baseline measured it, the candidate did not" in result.out
    assert "requests.success_rate: regression: -100.0%" in result.out
    assert last_line(result).startswith("REGRESSION: 6 metric(s)")


def test_the_success_rate_is_tested_on_the_pooled_requests(tmp_path: Path, runs_cli: Invoke) -> None:
    write_run(tmp_path / "a", seed=1, hours=0, n=300)
    write_run(tmp_path / "b", seed=2, hours=1, n=300, failed=15)  # 5% of the requests fail
    args = ("check", tmp_path, "--group", "run", "--metric", "requests.success_rate")
    # Fisher's exact test: all 15 failures on one side of two groups of 300, and the mirror table, as likely
    p = 2 * math.comb(300, 15) / math.comb(600, 15)
    strict = runs_cli(*args, "--max-regression", "0%")
    assert strict.code == 1 and verdicts(strict) == {"requests.success_rate": "regression"}, strict.out
    assert f"Holm-adjusted p = {p:.3g}" in strict.out
    # the drop is 5.0% of the baseline's rate, whose CI reaches below 5%: within the default allowance
    lenient = runs_cli(*args)
    assert lenient.code == 0 and verdicts(lenient) == {"requests.success_rate": "within tolerance"}, lenient.out
    assert "-5.0% [" in lenient.out


def test_nothing_verifiable_fails_closed(tmp_path: Path, runs_cli: Invoke) -> None:
    write_run(tmp_path / "a", seed=1, hours=0, n=50)
    write_run(tmp_path / "b", seed=2, hours=1, n=50)
    result = runs_cli("check", tmp_path, "--group", "run", "--metric", "throughput.output_tok_s")
    assert result.code == 1, result.out
    assert verdicts(result) == {"throughput.output_tok_s": "not verifiable"}
    assert last_line(result).startswith("NOTHING VERIFIED: none of the 1 metric checks could be verified")


def test_an_allowance_above_the_change_passes_it(groups: dict[str, Path], runs_cli: Invoke) -> None:
    result = runs_cli("check", groups["base"], groups["slower"], "--max-regression", "25%", "--metric", "ttft.p50")
    assert result.code == 0, result.out
    assert verdicts(result) == {"ttft.p50": "within tolerance"}


def test_an_explicit_baseline_directory(groups: dict[str, Path], runs_cli: Invoke) -> None:
    result = runs_cli("check", groups["slower"], "--baseline", groups["base"], "--metric", "ttft.p50,tpot.p50")
    assert result.code == 1, result.out + result.err
    assert verdicts(result) == {"ttft.p50": "regression", "tpot.p50": "no significant change"}
    faster = runs_cli("check", groups["base"], "--baseline", groups["slower"], "--metric", "ttft.p50")
    assert faster.code == 0 and verdicts(faster) == {"ttft.p50": "improvement"}


def test_one_run_a_group_cannot_test_a_runs_figure(tmp_path: Path, runs_cli: Invoke) -> None:
    write_run(tmp_path / "a", seed=1, hours=0)
    write_run(tmp_path / "b", seed=2, hours=1, ttft_scale=1.3)
    result = runs_cli(
        "check", tmp_path, "--group", "run", "--metric", "throughput.output_tok_s", "--metric", "ttft.p50"
    )
    assert result.code == 1, result.out
    assert verdicts(result) == {"throughput.output_tok_s": "not verifiable", "ttft.p50": "regression"}
    assert "one run a side" in result.out
    assert "note: ttft.p50: a group of one run" in result.out and "request-to-request variation only" in result.out


def _change(
    relative: float, ci: tuple[float, float] | None, p: float | None, agree: bool | None = None, base: float = 100.0
) -> Change:
    """A change of `relative` from `base` with its relative CI (None: no interval) and raw p."""
    lo, hi = (ci[0] * base, ci[1] * base) if ci is not None else (None, None)
    rel_lo, rel_hi = ci if ci is not None else (None, None)
    untestable = None if p is not None else "no test possible"
    over = "runs and requests"
    return Change(relative * base, relative, lo, hi, rel_lo, rel_hi, p, "a test", over, agree, untestable)


LOWER = Metric("ttft.p99", "ms", "lower", "ttft_p99_ms", "ttft", "p99")
HIGHER = Metric("throughput.req_s", "req/s", "higher", "throughput_req_s")
NEITHER = Metric("duration", "s", "neither", "duration_s")


@pytest.mark.parametrize(
    ("metric", "change", "verdict"),
    [
        (LOWER, _change(0.10, (0.06, 0.14), 1e-4), "regression"),
        (LOWER, _change(-0.10, (-0.14, -0.06), 1e-4), "improvement"),
        (HIGHER, _change(-0.10, (-0.14, -0.06), 1e-4), "regression"),  # less throughput is worse
        (HIGHER, _change(0.10, (0.06, 0.14), 1e-4), "improvement"),
        (LOWER, _change(0.051, (0.035, 0.10), 1e-4), "within tolerance"),  # beyond 5%, but its CI is not
        (LOWER, _change(0.03, (0.01, 0.05), 1e-4), "within tolerance"),
        (LOWER, _change(0.10, (0.06, 0.14), 0.2), "no significant change"),  # Holm's correction does not reject
        (LOWER, _change(0.10, (0.06, 0.14), 1e-4, agree=False), "regression"),  # the interval holds run variation
        (LOWER, _change(0.10, None, None), "not verifiable"),
        (NEITHER, _change(0.10, (0.06, 0.14), 1e-4), "not verifiable"),
    ],
)
def test_the_verdict_follows_the_evidence(metric: Metric, change: Change, verdict: str) -> None:
    assert judge(metric, change, change.p, 0.05)[0] == verdict


def test_a_zero_allowance_flags_any_significant_worsening() -> None:
    assert judge(LOWER, _change(0.01, (0.002, 0.018), 1e-4), 1e-4, 0.0)[0] == "regression"
    from_zero = Change(2.0, None, 1.0, 3.0, None, None, 1e-4, "a test", "runs", None)  # from a baseline of 0
    assert judge(LOWER, from_zero, 1e-4, 5.0)[0] == "regression"


def test_pairs_are_each_series_newest_two_groups() -> None:
    from infermeter.catalog.check import last_pairs
    from infermeter.catalog.groups import Series

    a, b, c = Point("a"), Point("b"), Point("c")
    pairs, notes = last_pairs([Series("x", [a, b, c]), Series("y", [a])])
    assert pairs == [Pair("x", b, c)]
    assert notes == ["y: one group (a), no earlier one to hold it against"]


@pytest.mark.parametrize("value", ["5", "abc%", "-1%", "nan%", "inf%", "2000%", "", "5 %%"])
def test_max_regression_must_be_a_percentage(groups: dict[str, Path], runs_cli: Invoke, value: str) -> None:
    one_line_error(runs_cli("check", groups["base"], groups["same"], f"--max-regression={value}"), "--max-regression")


def test_bad_input_is_one_line(groups: dict[str, Path], tmp_path: Path, runs_cli: Invoke) -> None:
    dirs = (groups["base"], groups["same"])
    one_line_error(
        runs_cli("check", *dirs, "--metric", "ttft.p42"), "--metric", "unknown metric 'ttft.p42'", "ttft.p99"
    )
    one_line_error(runs_cli("check", *dirs, "--by", "nope"), "--by", "'nope' is no column", "sut_model")
    (tmp_path / "empty").mkdir()
    one_line_error(runs_cli("check", *dirs, "--baseline", tmp_path / "empty"), "--baseline", "holds no run")
    one_line_error(runs_cli("check", *dirs, "--baseline", tmp_path / "missing"), "--baseline", "no such directory")
    one_line_error(runs_cli("check", groups["base"]), "one group", "--baseline DIR")
    one_line_error(runs_cli("check", *dirs, "--group", "suite"), "--group")


def test_series_by_a_column_are_checked_apart(tmp_path: Path, runs_cli: Invoke) -> None:
    for model, scale in (("small", 1.0), ("large", 1.2)):  # each model's newest group 20% slower than its first
        for k, hours in enumerate((0, 24)):
            for r in range(2):
                write_run(
                    tmp_path / model / f"g{k}" / f"r{r}",
                    seed=100 * k + 10 * r + len(model),
                    hours=hours + r / 60,
                    ttft_scale=scale * (1.2 if k else 1.0),
                    model=model,
                )
    result = runs_cli("check", tmp_path, "--by", "sut.model", "--metric", "ttft.p50")
    assert result.code == 1, result.out
    assert "sut_model=small: ttft.p50: regression" in result.out
    assert "sut_model=large: ttft.p50: regression" in result.out
