"""`open_run`: a run directory's run.json, summary and records, read when asked for; a run that left no
summary.json gets one computed from its records, as `infermeter report` computes it."""

import orjson
import pytest

from infermeter import UserError, open_run
from infermeter.records import SUMMARY, RunInfo, write_records, write_summary
from infermeter.suite_result import SUITE_JSON


@pytest.fixture
def hand_run(tmp_path, records):
    """tests/conftest.py's four hand-made requests (one failed) as a run that left no summary.json."""
    out = tmp_path / "run"
    write_records(out, RunInfo(kind="test", itl_option="B"), records)
    assert not (out / SUMMARY).exists()
    return out


def test_a_run_without_summary_is_summarized_from_its_records(hand_run):
    run = open_run(hand_run)
    s = run.summary
    assert (s.requests.total, s.requests.ok, s.requests.failed) == (4, 3, 1)
    # TTFT of the three that succeeded: 1.10 - 1.00, 2.2 - 2.0 and 0.6 - 0.5 s; E2E: 0.19, 0.2 and 0.2 s
    assert s.ttft_ms.min == pytest.approx(100.0) and s.ttft_ms.max == pytest.approx(200.0)
    assert s.ttft_ms.mean == pytest.approx(400.0 / 3)
    assert s.e2e_ms.min == pytest.approx(190.0) and s.e2e_ms.max == pytest.approx(200.0)
    assert not (hand_run / SUMMARY).exists()  # reading writes nothing


def test_a_stored_summary_is_read_as_written(hand_run):
    computed = open_run(hand_run).summary
    computed.requests.total = 99  # a value the records cannot give: proves the file is what is read
    write_summary(hand_run, computed)
    assert open_run(hand_run).summary.requests.total == 99


def test_each_part_is_read_once_and_lazily(hand_run):
    run = open_run(hand_run)
    assert {"info", "summary", "records"} & set(vars(run)) == set()  # nothing read yet
    info = run.info
    (hand_run / "run.json").write_text("damaged")
    assert run.info is info and run.info.kind == "test"  # kept: not read again
    assert {"info"} == {"info", "summary", "records"} & set(vars(run))


def test_records_are_a_table_pandas_reads(hand_run):
    pytest.importorskip("pandas")
    frame = open_run(hand_run).records.to_pandas()
    assert list(frame["request_id"]) == [0, 1, 2, 3]
    assert list(frame["status"]) == ["ok", "ok", "error", "ok"]
    assert list(frame["token_times"][0]) == [1.10, 1.13, 1.19, 1.19]


def test_report_is_the_text_report_and_writes_the_documents_asked_for(hand_run, tmp_path):
    run = open_run(hand_run)
    html, markdown = tmp_path / "r.html", tmp_path / "r.md"
    text = run.report(html=html, markdown=str(markdown))
    assert "Table 1" in text and "Failures (1 of 4 requests)" in text
    assert html.read_text().lstrip().lower().startswith("<!doctype html>")
    assert "Table 1" in markdown.read_text()
    assert run.report() == text


def test_a_directory_without_a_run_is_refused_at_once(tmp_path):
    with pytest.raises(UserError, match=r"is not a run directory: it has no run\.json"):
        open_run(tmp_path)
    (tmp_path / SUITE_JSON).write_bytes(orjson.dumps({}))
    with pytest.raises(UserError, match="is a test suite's directory: its runs are in"):
        open_run(tmp_path)


def test_a_report_file_of_the_run_itself_is_refused(hand_run):
    with pytest.raises(UserError, match="markdown="):
        open_run(hand_run).report(markdown=hand_run / "summary.json")
