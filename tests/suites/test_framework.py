"""The suite framework: the grow-then-bisect search, the section 2 verdict, the suite directory's claim and resume,
the command's listing and errors, and exo bench's grid against the embedded emulator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infermeter.errors import UserError
from infermeter.suite_result import Requirement, SuiteResult
from infermeter.suites.execute import claim_suite_dir
from infermeter.suites.framework import verdict
from infermeter.suites.search import bisect
from tests.cli import exit_code


def _req(level: str, met: bool) -> Requirement:
    return Requirement(level=level, section="5", text="x", met=met, reason="")  # type: ignore[arg-type]


def test_verdicts_follow_section_2() -> None:
    assert verdict([_req("MUST", True), _req("SHOULD", True)]) == "unconditionally compliant"
    assert verdict([_req("MUST", True), _req("SHOULD", False)]) == "conditionally compliant"
    assert verdict([_req("MUST", False), _req("SHOULD", True)]) == "not compliant"


def test_bisect_finds_the_threshold_of_a_monotone_check() -> None:
    seen: list[float] = []

    def check(x: float) -> bool:
        seen.append(x)
        return x <= 37.0

    out = bisect(check, 1.0, 1000.0, tolerance=0.05)
    assert out.passed is not None and out.failed is not None
    assert out.passed <= 37.0 < out.failed
    assert (out.failed - out.passed) / out.failed <= 0.05
    assert seen[:7] == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]  # doubling until the first failure


def test_bisect_on_integers_converges_to_adjacent_values() -> None:
    out = bisect(lambda c: c <= 45, 8, 512, integer=True)
    assert (out.passed, out.failed) == (45.0, 46.0)


def test_bisect_shrinks_when_the_first_probe_fails_and_says_when_all_pass() -> None:
    low = bisect(lambda x: x <= 3.0, 10.0, 100.0)
    assert low.passed is not None and low.passed <= 3.0 < (low.failed or 0)
    high = bisect(lambda x: True, 10.0, 100.0)
    assert high.passed == 100.0 and high.failed is None and "every probe passed" in high.note
    none = bisect(lambda c: False, 8, 512, integer=True)
    assert none.passed is None and "even the lowest" in none.note


def test_a_suite_directory_is_claimed_once_and_resumed_only_with_the_same_settings(tmp_path: Path) -> None:
    out = tmp_path / "suite"
    assert claim_suite_dir(out, {"suite": "ttft", "params": {"requests": 10}}, "'ttft' test") is False
    assert claim_suite_dir(out, {"suite": "ttft", "params": {"requests": 10}}, "'ttft' test") is True
    with pytest.raises(UserError, match="other settings"):
        claim_suite_dir(out, {"suite": "ttft", "params": {"requests": 20}}, "'ttft' test")
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match="not empty"):
        claim_suite_dir(other, {"suite": "ttft"}, "'ttft' test")


def test_list_names_every_suite(capsys: pytest.CaptureFixture[str]) -> None:
    from infermeter.suites.registry import SUITES

    assert exit_code(["test", "--list"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert listed == list(SUITES)


def test_an_unknown_suite_is_a_one_line_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert exit_code(["test", "no-such-test"]) == 2
    err = capsys.readouterr().err
    assert "no-such-test" in err and "Traceback" not in err


def test_grid_measures_each_cell_and_aggregates_generation_over_the_batch(tmp_path: Path) -> None:
    """exo bench's grid on the emulator: four streams released together each decode at about the single stream's
    rate (a continuous-batching step costs little more for four), so the aggregate is several times one stream's."""
    out = tmp_path / "grid"
    args = ["test", "grid", "--pp", "64", "--tg", "16", "--concurrency", "1,4", "--repeat", "2", "--warmup", "4"]
    assert exit_code([*args, "--out", str(out), "--no-progress"]) == 0
    result = SuiteResult.model_validate_json((out / "suite.json").read_text())
    f = result.analysis.figures
    single, four = f["pp64_tg16_c1_agg_gen_tok_s"], f["pp64_tg16_c4_agg_gen_tok_s"]
    assert isinstance(single, float) and isinstance(four, float)
    assert four > 2.5 * single
    assert len(result.runs) == 4 and all(not r.reused for r in result.runs)
    rows = result.analysis.tables[0].rows
    assert [r[:3] for r in rows] == [["64", "16", "1"], ["64", "16", "4"]]
    assert all("none" in r[-1] for r in rows)  # the emulator's cache is off: every request a cold prefill
    for r in result.runs:  # a batch of C requests, released together
        info = json.loads((Path(r.run_dir) / "run.json").read_text())
        assert info["load"]["barrier"] is True


def test_the_suite_report_states_every_runs_warm_up_and_a_cold_start_among_them() -> None:
    """A suite whose runs were warmed up differently says so (the first run's warm-up stood for all of them)."""
    from infermeter.report.suite import _warmups
    from tests.evidence import info

    mixed = [
        info(),
        info(warmup={"requests": 240, "workload": "short-context-warm-up"}),
        info(warmup={"cold_start": True}),
    ]
    line = _warmups(mixed)
    assert "done in 2 of 3 runs (100-240 requests, 10,000 output tokens; sent: short-context-warm-up)" in line
    assert "none in 1 of 3: COLD START measured (draft 4.5.3)" in line
    assert _warmups([info(warmup={"done": False, "note": "stopped"}), info()]).endswith("not completed in 1 of 2")


def test_the_capacity_probe_counts_completions_between_the_ramp_and_the_drain() -> None:
    """The probe's rate: completions per second between the 10th and 90th percentile completion, so neither the
    closed loop's start (a batch arriving at once) nor its drain (the last few alone) bends it."""
    from infermeter.emulator.config import EmulatorConfig
    from infermeter.suites.probe import completion_rate, probe_concurrency
    from infermeter.suites.throughput import small_engine
    from tests.evidence import fake_run, stream

    steady = stream(101, rate=10.0, output=4)  # one completion every 0.1 s
    burst = stream(8, rate=1000.0, output=4, first_id=101, start=10.2)  # then 8 at once: the drain of a closed loop
    cols = fake_run(steady + burst).columns()
    assert completion_rate(cols) == pytest.approx(10.0, rel=0.02)
    assert completion_rate(fake_run(stream(4)).columns()) is None  # too few to say
    assert probe_concurrency(small_engine()) == 8 and probe_concurrency(EmulatorConfig()) == 64
