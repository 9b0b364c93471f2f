"""The suite report's test configuration: the requests each run sent (suite.json's runs[].sent, its summary's count),
with what it planned beside it where a duration or a stop cut the run short (run.json's load.requests counts the
requests generated)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from infermeter.report.suite import requests_per_run
from infermeter.suite_result import Analysis, RunRef, SuiteResult
from tests.evidence import info


def suite(tmp_path: Path, sent: list[int | None]) -> SuiteResult:
    runs = [RunRef(key=f"r{k}", label=f"r{k}", run_dir=str(tmp_path / f"r{k}"), reused=False, sent=s)
            for k, s in enumerate(sent)]  # fmt: skip
    return SuiteResult(
        suite="tradeoff", section="5.3", reference="IETF draft, section 5.3", title="t", quick=True, params={},
        command="c", directory=str(tmp_path), runs=runs, analysis=Analysis(), requirements=[],
        verdict="not compliant", started_at="s", finished_at="f",
    )  # fmt: skip


def test_requests_per_run_counts_what_was_sent_and_says_the_plan_where_it_differs(tmp_path: Path) -> None:
    planned = [info(load={"requests": 300}), info(load={"requests": 100}), info(load={"requests": 100})]
    assert requests_per_run(suite(tmp_path, [212, 100, 100]), planned) == "300 planned, 212 sent; 100"
    assert requests_per_run(suite(tmp_path, [100, 100]), planned[1:]) == "100"
    nothing_planned = [info(load={"requests": None})]
    assert requests_per_run(suite(tmp_path, [57]), nothing_planned) == "57"  # a count of what was sent
    assert requests_per_run(suite(tmp_path, [None, 100]), planned[:2]) == "300 planned, sent not recorded; 100"
    # a suite.json written before runs[].sent existed
    assert requests_per_run(suite(tmp_path, [None, None]), planned[:2]) == (
        "300; 100 planned (suite.json does not say how many were sent)"
    )


def test_the_suite_report_of_a_suite_directory_says_what_each_run_sent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`infermeter report SUITE_DIR`: a run bounded by a duration generated 300 requests and sent 25, a run bounded
    by its count sent its 20."""
    from infermeter.records import write_records
    from infermeter.suites.execute import save
    from tests.cli import exit_code
    from tests.evidence import stream

    result = suite(tmp_path, [25, 20])
    for ref, planned, duration in zip(result.runs, (300, 20), (5.0, None), strict=True):
        load = {"requests": planned, "duration_s": duration, "arrivals": {"kind": "poisson", "rate": 5.0}}
        write_records(Path(ref.run_dir), info(load=load), stream(ref.sent or 0, rate=5.0))
    save(tmp_path, result)
    assert exit_code(["report", str(tmp_path)]) == 0
    assert "- Requests per run: 300 planned, 25 sent; 20\n" in capsys.readouterr().out


def test_a_suite_records_what_each_run_sent_from_its_summary(tradeoff_suite: Path) -> None:
    runs = orjson.loads((tradeoff_suite / "suite.json").read_bytes())["runs"]
    assert runs
    for run in runs:
        summary = orjson.loads((Path(run["run_dir"]) / "summary.json").read_bytes())
        assert run["sent"] == summary["requests"]["total"] > 0, run
