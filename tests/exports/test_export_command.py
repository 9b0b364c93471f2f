"""`infermeter export RUN --format csv|jsonl|parquet [--out FILE]` as a user runs it (in-process): a header and one
row per request, JSONL with each token's time, a Parquet round trip, suites and folders of runs, and bad input as
one line with exit code 2."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest

from infermeter.exports.request_rows import COLUMNS, LIST_COLUMNS, request_rows
from infermeter.records import RECORDS, RUN_JSON, SUMMARY, RunInfo, write_records
from infermeter.suite_result import SUITE_JSON, Analysis, RunRef, SuiteResult
from tests.cli import exit_code
from tests.exports.test_request_rows import RECORDS_BY_HAND

SCALARS = [c.name for c in COLUMNS]


@pytest.fixture
def run(tmp_path: Path) -> Path:
    out = tmp_path / "run"
    write_records(out, RunInfo(kind="test"), RECORDS_BY_HAND)
    return out


def export(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    code = exit_code(["export", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_csv_has_a_header_and_one_row_per_request(run, tmp_path, capsys):
    out = tmp_path / "r.csv"
    code, _, err = export(capsys, run, "--format", "csv", "--out", out)
    assert code == 0 and "5 requests written" in err
    rows = list(csv.reader(out.read_text().splitlines()))
    assert rows[0] == SCALARS  # no list column in a CSV
    assert len(rows) == 6 and [r[0] for r in rows[1:]] == ["0", "1", "2", "3", "4"]
    by_name = [dict(zip(rows[0], r, strict=True)) for r in rows[1:]]
    assert float(by_name[0]["ttft_ms"]) == pytest.approx(100.0) and float(by_name[0]["tpot_ms"]) == pytest.approx(30)
    failed = by_name[1]
    assert failed["ok"] == "false" and failed["error_reason"] == "http 500"
    assert failed["ttft_ms"] == failed["e2e_ms"] == failed["itl_count"] == ""  # null, never 0


def test_the_format_follows_the_suffix_and_stdout_gets_csv(run, tmp_path, capsys):
    code, out, _ = export(capsys, run)
    assert code == 0 and out.splitlines()[0].split(",") == SCALARS and len(out.splitlines()) == 6
    code, _, _ = export(capsys, run, "--out", tmp_path / "r.jsonl")
    assert code == 0 and len((tmp_path / "r.jsonl").read_text().splitlines()) == 5
    code, _, _ = export(capsys, run, "--out", tmp_path / "r.parquet")
    assert code == 0 and pq.read_table(tmp_path / "r.parquet").num_rows == 5


def test_jsonl_rows_carry_each_tokens_time(run, capsys):
    code, out, _ = export(capsys, run, "--format", "jsonl")
    assert code == 0
    rows = [orjson.loads(line) for line in out.splitlines()]
    assert len(rows) == 5 and list(rows[0]) == [*SCALARS, *(c.name for c in LIST_COLUMNS)]
    assert rows[0]["token_times_ms"] == pytest.approx([100.0, 130.0, 190.0, 190.0])
    assert rows[0]["itl_ms"] == pytest.approx([30.0, 60.0, 0.0])
    assert rows[1]["token_times_ms"] == [] and rows[1]["itl_ms"] is None and rows[1]["ttft_ms"] is None
    assert rows[2]["itl_ms"] == [] and rows[2]["tpot_ms"] is None  # one token: no gap, no TPOT
    assert rows[3]["e2e_ms"] == pytest.approx(50.0) and rows[3]["ttft_ms"] is None  # an embeddings reply


def test_parquet_round_trip(run, tmp_path, capsys):
    out = tmp_path / "r.parquet"
    code, _, _ = export(capsys, run, "--format", "parquet", "--out", out)
    assert code == 0
    back = pq.read_table(out)
    assert back.equals(request_rows(run, lists=True).table)
    assert back.column("token_times_ms").to_pylist()[2] == pytest.approx([250.0])


def test_a_folder_of_runs_and_a_suite_export_every_runs_rows(run, tmp_path, capsys):
    other = tmp_path / "run2"
    write_records(other, RunInfo(kind="test"), RECORDS_BY_HAND[:2])
    code, out, _ = export(capsys, tmp_path)
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["run"] for r in rows] == ["run"] * 5 + ["run2"] * 2
    assert [r["request_id"] for r in rows] == ["0", "1", "2", "3", "4", "0", "1"]

    suite = tmp_path / "suite"
    suite.mkdir()
    refs = [RunRef(key="level-1", label="1 req/s", run_dir=str(other), reused=False)]
    refs.append(RunRef(key="level-2", label="2 req/s", run_dir=str(suite / "moved"), reused=False))
    (suite / "runs").mkdir()
    write_records(suite / "runs" / "level-2", RunInfo(kind="test"), RECORDS_BY_HAND[:1])  # found under runs/
    result = SuiteResult(
        suite="ttft", section="5.1", reference="IETF draft, section 5.1", title="TTFT", quick=True, params={},
        command="infermeter test ttft", directory=str(suite), runs=refs, analysis=Analysis(), requirements=[],
        verdict="not verifiable", started_at="s", finished_at="f",
    )  # fmt: skip
    (suite / SUITE_JSON).write_text(result.model_dump_json())
    code, out, _ = export(capsys, suite, "--format", "jsonl")
    assert code == 0
    assert [orjson.loads(line)["run"] for line in out.splitlines()] == ["level-1", "level-1", "level-2"]


def test_a_long_note_stays_on_one_line(tmp_path, capsys):
    """A note longer than the terminal is one line on stderr: a script can read it back whole."""
    out = tmp_path / "odd"
    write_records(out, RunInfo(kind="test", deadlines="tbt=oops"), RECORDS_BY_HAND)
    code, rows, err = export(capsys, out, "--format", "csv")
    assert code == 0 and len(rows.splitlines()) == 6
    [note] = [line for line in err.splitlines() if line.startswith("note:")]
    assert len(note) > 100 and note.startswith("note: fluidity is null: run.json's deadlines cannot be read again")
    assert note.endswith("is not a duration like 25ms or 0.3s)")


BAD = [
    (["missing"], "no such run directory"),
    (["{tmp}/file.txt"], "is a file"),
    (["{tmp}/empty"], "no run.json"),
    (["{run}", "--format", "xlsx"], "must be one of csv, jsonl, parquet"),
    (["{run}", "--format", "parquet"], "give --out"),
    (["{run}", "--out", "{tmp}/r.txt"], "cannot tell the format"),
    (["{run}", "--out", "{tmp}/nowhere/r.csv"], "does not exist"),
    (["{run}", "--out", "{tmp}"], "is a directory"),
    (["{run}", "--out", "{run}/" + RUN_JSON, "--format", "csv"], "is a file of the run"),
    (["{run}", "--out", "{run}/" + RECORDS], "is a file of the run"),
    (["{run}", "--out", "{run}/" + SUMMARY], "is a file of the run"),
    (["{damaged}"], "damaged"),
]


@pytest.mark.parametrize(("args", "says"), BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_input_is_one_line_and_exit_2(run, tmp_path, capsys, monkeypatch, args, says):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "file.txt").write_text("x")
    (tmp_path / "empty").mkdir()
    damaged = tmp_path / "damaged"
    write_records(damaged, RunInfo(kind="test"), RECORDS_BY_HAND)
    (damaged / RECORDS).write_bytes(b"PAR1 not really parquet")
    records_before = (run / RECORDS).read_bytes()
    code, out, err = export(capsys, *(a.format(tmp=tmp_path, run=run, damaged=damaged) for a in args))
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and says in err and "Traceback" not in err
    assert out == "" and (run / RECORDS).read_bytes() == records_before  # nothing written, the run untouched
