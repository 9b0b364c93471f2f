"""A suite's runs are found by one rule (suites.execute.suite_run_dirs) by every reader: the export of its requests,
the exporters, the catalog and the suite's report; in the suite's own directory first, so a suite moved or copied
elsewhere still has its runs, and a run that is nowhere is left out (the export of rows says so)."""

from __future__ import annotations

import csv
import io
import shutil
from pathlib import Path

import pytest

from infermeter.catalog.find import find_runs
from infermeter.exports.finished import read_suite
from infermeter.metrics import RecordColumns, summarize
from infermeter.records import RunInfo, write_records, write_summary
from infermeter.suite_result import Analysis, RunRef, SuiteResult
from infermeter.suites.execute import load_result, save, suite_run_dirs
from tests.cli import exit_code
from tests.exports.test_request_rows import RECORDS_BY_HAND


def a_suite(root: Path, keys: tuple[str, ...] = ("r1", "r2")) -> Path:
    """A finished suite whose suite.json records each run's directory where it was written (absolute paths)."""
    refs = []
    for n, key in enumerate(keys, 1):
        run = root / "runs" / key
        write_records(run, RunInfo(kind="test"), RECORDS_BY_HAND[:n])  # r1 one request, r2 two
        write_summary(run, summarize(RecordColumns.of_run(run), "B"))
        refs.append(RunRef(key=key, label=key, run_dir=str(run.resolve()), reused=False, level=f"level {n}"))
    result = SuiteResult(
        suite="ttft", section="5.1", reference="IETF draft, section 5.1", title="TTFT", quick=True, params={},
        command="infermeter test ttft", directory=str(root), runs=refs, analysis=Analysis(), requirements=[],
        verdict="not verifiable", started_at="2025-01-01T00:00:00.000Z", finished_at="2025-01-01T00:01:00.000Z",
    )  # fmt: skip
    save(root, result)
    return root


def exported_runs(path: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The `run` column of `infermeter export PATH`."""
    assert exit_code(["export", str(path)]) == 0
    return [row["run"] for row in csv.DictReader(io.StringIO(capsys.readouterr().out))]


def test_a_moved_suite_keeps_its_runs_for_every_reader(tmp_path, capsys):
    moved = tmp_path / "elsewhere" / "suite"
    moved.parent.mkdir()
    shutil.move(a_suite(tmp_path / "suite"), moved)  # suite.json's run_dir paths now lead nowhere
    result = load_result(moved)
    assert not any(Path(ref.run_dir).exists() for ref in result.runs)
    assert suite_run_dirs(moved, result) == {"r1": moved / "runs" / "r1", "r2": moved / "runs" / "r2"}
    finished = read_suite(moved)
    assert [(key, run.summary.requests.total) for key, run in finished.runs] == [("r1", 1), ("r2", 2)]
    assert len(finished.infos) == 2
    assert exported_runs(moved, capsys) == ["r1", "r2", "r2"]  # one row per request, labelled by the run's key
    found = find_runs([moved.parent])
    assert [(r.path.name, r.suite.key if r.suite else None) for r in found.runs] == [("r1", "r1"), ("r2", "r2")]
    assert all(r.suite is not None and r.suite.level == f"level {n}" for n, r in enumerate(found.runs, 1))


def test_a_copied_suite_reads_its_own_runs_not_the_originals(tmp_path):
    original = a_suite(tmp_path / "suite")
    copy = tmp_path / "copy"
    shutil.copytree(original, copy)
    shutil.rmtree(copy / "runs" / "r2")
    dirs = suite_run_dirs(copy, load_result(copy))
    # r1 from the copy itself; r2, gone from the copy, where suite.json recorded it (the original's)
    assert dirs == {"r1": copy / "runs" / "r1", "r2": (original / "runs" / "r2").resolve()}
    found = find_runs([copy])  # the catalog: the copy's r1 is the copy suite's run
    assert [(r.path, r.suite.directory if r.suite else None) for r in found.runs] == [(copy / "runs" / "r1", copy)]


def test_a_run_that_is_nowhere_is_left_out_and_the_export_of_rows_says_so(tmp_path, capsys):
    suite = a_suite(tmp_path / "suite")
    shutil.rmtree(suite / "runs" / "r2")
    assert list(suite_run_dirs(suite, load_result(suite))) == ["r1"]
    assert [key for key, _ in read_suite(suite).runs] == ["r1"]  # the exporters send what is there
    assert exit_code(["export", str(suite)]) == 2
    err = capsys.readouterr().err
    assert "names the run r2 at" in err and "which is not there" in err and len(err.strip().splitlines()) == 1


def test_export_finds_runs_at_any_depth_each_labelled_by_its_path(tmp_path, capsys):
    """A folder holding runs and a suite's repeats: every run under it, as `infermeter runs` finds them."""
    top = tmp_path / "top"
    write_records(top / "alone", RunInfo(kind="test"), RECORDS_BY_HAND[:1])
    a_suite(top / "grid" / "repeat-1", keys=("r1",))
    a_suite(top / "grid" / "repeat-2", keys=("r1",))
    assert exported_runs(top, capsys) == ["alone", "grid/repeat-1/runs/r1", "grid/repeat-2/runs/r1"]
