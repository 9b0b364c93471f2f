"""The suite report's test configuration: the requests each run sent (its summary's count), with what it planned
beside it where a duration or a stop cut the run short (run.json's load.requests counts the requests generated)."""

from __future__ import annotations

from pathlib import Path

import pytest

from infermeter.report.suite import requests_per_run
from tests.evidence import info


def test_requests_per_run_counts_what_was_sent_and_says_the_plan_where_it_differs() -> None:
    planned = [info(load={"requests": 300}), info(load={"requests": 100}), info(load={"requests": 100})]
    assert requests_per_run(planned, [212, 100, 100]) == "300 planned, 212 sent; 100"
    assert requests_per_run(planned[1:], [100, 100]) == "100"
    assert requests_per_run([info(load={"requests": None})], [57]) == "57"  # nothing planned: a count of what was sent
    assert requests_per_run(planned[:1], [None]) == "300 planned, sent not recorded"
    assert requests_per_run(planned[:2], None) == "300; 100 planned (the requests sent are not known here)"


def test_the_suite_report_of_a_suite_directory_reads_the_requests_sent_from_each_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`infermeter report SUITE_DIR`: a run bounded by a duration generated 300 requests and sent 25 (summary.json),
    a run bounded by its count sent its 20."""
    from infermeter.metrics import RecordColumns, summarize
    from infermeter.records import write_records, write_summary
    from infermeter.suites.execute import save
    from infermeter.suites.framework import Analysis, RunRef, SuiteResult
    from tests.cli import exit_code
    from tests.evidence import stream

    refs = []
    for key, planned, sent, duration in (("timed", 300, 25, 5.0), ("counted", 20, 20, None)):
        run = tmp_path / "runs" / key
        arrivals = {"kind": "poisson", "rate": 5.0}
        run_info = info(load={"requests": planned, "duration_s": duration, "arrivals": arrivals})
        write_records(run, run_info, stream(sent, rate=5.0))
        write_summary(run, summarize(RecordColumns.of_run(run, run_info), "B"))
        refs.append(RunRef(key=key, label=key, run_dir=str(run), reused=False))
    result = SuiteResult(
        suite="tradeoff",
        section="5.3",
        reference="IETF draft, section 5.3",
        title="t",
        quick=True,
        params={},
        command="c",
        directory=str(tmp_path),
        runs=refs,
        analysis=Analysis(),
        requirements=[],
        verdict="not compliant",
        started_at="s",
        finished_at="f",
    )
    save(tmp_path, result)
    assert exit_code(["report", str(tmp_path)]) == 0
    assert "- Requests per run: 300 planned, 25 sent; 20\n" in capsys.readouterr().out
