"""No file a command writes where it is told may land on a run's or a test suite's own file: one guard
(config.checks.results_file) refuses them when the option is read (`--out`, `--html`, `--export prometheus:FILE`) and
again when the file is written, for a run or suite that appeared since."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from infermeter.config.checks import results_file
from infermeter.errors import UserError
from infermeter.exports.send import export_run
from infermeter.exports.spec import ExportSpec
from infermeter.exports.table_files import write_table
from infermeter.metrics import RecordColumns, summarize
from infermeter.records import JOURNAL, LEDGER, RECORDS, RUN_JSON, SUMMARY, RunInfo, write_records, write_summary
from infermeter.suite_result import SUITE_JSON, SUITE_SETTINGS, Analysis, SuiteResult
from tests.cli import exit_code
from tests.exports.test_request_rows import RECORDS_BY_HAND


def a_run(where: Path) -> Path:
    write_records(where, RunInfo(kind="test"), RECORDS_BY_HAND)
    return where


def a_suite(where: Path, finished: bool = True) -> Path:
    """A suite's directory: its settings, and its suite.json once `finished`."""
    where.mkdir(parents=True)
    (where / SUITE_SETTINGS).write_text('{"suite": "ttft"}')
    if finished:
        result = SuiteResult(
            suite="ttft", section="5.1", reference="IETF draft, section 5.1", title="TTFT", quick=True, params={},
            command="infermeter test ttft", directory=str(where), runs=[], analysis=Analysis(), requirements=[],
            verdict="not verifiable", started_at="s", finished_at="f",
        )  # fmt: skip
        (where / SUITE_JSON).write_text(result.model_dump_json())
    return where


def contents(*paths: Path) -> list[bytes]:
    return [p.read_bytes() for p in paths]


def test_the_guard_names_a_runs_and_a_suites_files_and_nothing_else(tmp_path: Path) -> None:
    run = a_run(tmp_path / "a3")
    suite, started = a_suite(tmp_path / "st"), a_suite(tmp_path / "st2", finished=False)
    for name in (RUN_JSON, RECORDS, SUMMARY, JOURNAL, LEDGER):  # the journal and ledger: a run's too, there or not
        assert results_file(run / name) == f"a file of the run in {run}", name
    for folder in (suite, started):  # a suite that has not finished is a suite: its suite.json is on its way
        for name in (SUITE_JSON, SUITE_SETTINGS):
            assert results_file(folder / name) == f"a file of the test suite in {folder}", (folder, name)
    (tmp_path / "plain").mkdir()
    assert results_file(run / "report.html") is None and results_file(suite / "report.html") is None
    assert results_file(tmp_path / "plain" / RUN_JSON) is None  # a name alone is no run
    assert results_file(tmp_path / "plain" / SUITE_JSON) is None
    link = tmp_path / "plain" / "figures.prom"
    link.symlink_to(run / RUN_JSON)  # a link that leads to a run's file: written through, it would replace it
    assert results_file(link) == f"a file of the run in {run}"


def test_prometheus_aimed_at_a_runs_file_stops_the_simulation_before_it_starts(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    run = a_run(tmp_path / "a3")
    before = contents(run / RUN_JSON, run / RECORDS)
    for target in ("a3/run.json", "a3/summary.json"):
        code = exit_code(["sim", "--requests", "20", "--out", "s3", "--export", f"prometheus:{target}"])
        err = capsys.readouterr().err
        assert code == 2 and f"--export prometheus:{target} is a file of the run in a3" in err, err
        assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "s3").exists() and not (run / SUMMARY).exists()
    assert contents(run / RUN_JSON, run / RECORDS) == before


def test_prometheus_checks_again_as_it_writes(tmp_path: Path) -> None:
    """A run written into the file's directory after the check: the export is a warning and the run untouched."""
    source = a_run(tmp_path / "source")
    write_summary(source, summarize(RecordColumns.of_run(source), "B"))  # a finished run: what the export sends
    later = a_run(tmp_path / "later")
    before = contents(later / RUN_JSON, later / RECORDS)
    [warning] = export_run([ExportSpec("prometheus", str(later / RUN_JSON))], source)
    assert warning == (
        f"--export prometheus:{later / RUN_JSON} failed: {later / RUN_JSON} is a file of the run in {later}: "
        "choose another file"
    )
    assert contents(later / RUN_JSON, later / RECORDS) == before
    assert export_run([ExportSpec("prometheus", str(tmp_path / "ok.prom"))], source) == []  # elsewhere: written
    assert "infermeter_ttft_p50_seconds" in (tmp_path / "ok.prom").read_text()


@pytest.mark.parametrize("name", [SUITE_JSON, SUITE_SETTINGS])
def test_export_and_report_refuse_a_suites_files(name, tmp_path, capsys):
    run = a_run(tmp_path / "a3")
    suite = a_suite(tmp_path / "st" / "s1")
    before = contents(suite / SUITE_JSON, suite / SUITE_SETTINGS)
    for command in (["export", str(run), "--format", "csv", "--out"], ["report", str(run), "--html"]):
        code = exit_code([*command, str(suite / name)])
        err = capsys.readouterr().err
        assert code == 2 and f"is a file of the test suite in {suite}" in err and len(err.strip().splitlines()) == 1
    assert contents(suite / SUITE_JSON, suite / SUITE_SETTINGS) == before


def test_a_table_is_not_written_over_a_suite_that_appeared_since_the_check(tmp_path: Path) -> None:
    suite = a_suite(tmp_path / "st")
    table = pa.table({"x": [1, 2]})
    with pytest.raises(UserError, match=f"--out {suite / SUITE_JSON} is a file of the test suite in {suite}"):
        write_table(table, "csv", suite / SUITE_JSON)
    assert SuiteResult.model_validate_json((suite / SUITE_JSON).read_bytes()).suite == "ttft"
    write_table(table, "csv", suite / "requests.csv")
    assert (suite / "requests.csv").read_text() == "x\n1\n2\n"
