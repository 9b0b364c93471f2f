"""`infermeter runs DIR...`: the catalog of runs in DuckDB, its `runs` table and `requests` view, damaged runs
skipped with a warning, and its bad input refused in one line."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import orjson
import pytest

from infermeter.catalog.entry import RECOMPUTED, UNSEALED, CatalogRun, read_run
from infermeter.catalog.find import FoundRun, find_runs
from infermeter.catalog.index import Catalog
from infermeter.errors import UserError
from infermeter.records import RECORDS, RUN_JSON, SUMMARY, RunInfo, RunWriter, records_to_table
from infermeter.suite_result import SUITE_JSON, Analysis, RunRef, SuiteResult
from tests.catalog.build import records, write_run
from tests.catalog.conftest import Invoke, one_line_error


def entry(run: Path | FoundRun) -> CatalogRun:
    return read_run(run if isinstance(run, FoundRun) else FoundRun(run))


def test_counts_the_runs_under_a_directory_at_any_depth(tmp_path: Path, runs_cli: Invoke) -> None:
    write_run(tmp_path / "a" / "run-1", seed=1, n=20)
    write_run(tmp_path / "a" / "run-2", seed=2, n=20)
    write_run(tmp_path / "b" / "deeper" / "run-3", seed=3, n=20)
    result = runs_cli(tmp_path, "--sql", "select count(*) as n from runs")
    assert result.code == 0, result.err
    assert "| n |" in result.out and "| 3 |" in result.out
    assert runs_cli("list", tmp_path, "--sql", "select count(*) as n from runs").out == result.out  # the default


def test_the_requests_view_holds_every_request_of_every_run(tmp_path: Path, runs_cli: Invoke) -> None:
    for i, n in enumerate((300, 300, 50)):
        write_run(tmp_path / f"run-{i}", seed=i, n=n)
    total = runs_cli(tmp_path, "--sql", "select count(*) as n from requests")
    assert "| 650 |" in total.out, total.out
    per_run = runs_cli(tmp_path, "--sql", "select run_id, count(*) as k from requests group by run_id order by k")
    rows = [line for line in per_run.out.splitlines() if line.startswith("| ") and "run_id" not in line]
    assert [r.split("|")[2].strip() for r in rows] == ["50", "300", "300"]
    assert str(tmp_path / "run-2") in rows[0]


def test_the_runs_table_holds_the_declarations_and_the_headline_figures(tmp_path: Path) -> None:
    run = write_run(tmp_path / "r", seed=5, n=40, model="llama")
    info = orjson.loads((run / RUN_JSON).read_bytes())
    info["config"] = {"load": {"rate": 5.0, "requests": 40}, "target": {"api": "chat", "ignore_eos": True}}
    (run / RUN_JSON).write_bytes(orjson.dumps(info))
    catalog = Catalog([entry(run)])
    got = catalog.query(
        "select name, kind, sut_model, load_rate, load_requests, target_api, target_ignore_eos, requests_total, "
        "ttft_p99_ms, started_at, suite from runs"
    )
    assert got.rows == [
        ("r", "test", "llama", 5.0, 40, "chat", True, 40.0, pytest.approx(_summary_p99(run)), _t0(), None)
    ]
    types = dict(catalog.db.execute("select column_name, column_type from (describe runs)").fetchall())
    assert types["load_requests"] == "BIGINT" and types["started_at"] == "TIMESTAMP"
    assert types["ttft_p99_ms"] == "DOUBLE" and types["target_ignore_eos"] == "BOOLEAN"


def _summary_p99(run: Path) -> float:
    return float(orjson.loads((run / SUMMARY).read_bytes())["ttft_ms"]["p99"])


def _t0() -> dt.datetime:
    return dt.datetime(2026, 1, 1)


def test_a_run_without_summary_gets_the_summary_its_records_give(tmp_path: Path) -> None:
    with_summary = write_run(tmp_path / "with", seed=7, n=60)
    without = write_run(tmp_path / "without", seed=7, n=60, summary=False)
    a, b = entry(with_summary), entry(without)
    assert a.notes == [] and b.notes == [RECOMPUTED]
    assert b.figure("ttft.p99") == pytest.approx(a.figure("ttft.p99"), rel=1e-12)
    assert b.figure("ttft.p99") == pytest.approx(_summary_p99(with_summary), rel=1e-12)


def test_a_run_that_never_closed_is_indexed_but_left_out_of_the_requests_view(tmp_path: Path) -> None:
    write_run(tmp_path / "sealed", seed=1, n=30)
    writer = RunWriter(tmp_path / "open", RunInfo(kind="test"))
    writer.extend(records_to_table(records(2, 20)))  # journaled, never sealed into records.parquet
    catalog = Catalog([entry(p) for p in (tmp_path / "sealed", tmp_path / "open")])
    assert catalog.query("select name, requests_total, note from runs order by name").rows == [
        ("open", 20.0, f"{UNSEALED}; {RECOMPUTED}"),
        ("sealed", 30.0, None),
    ]
    assert catalog.query("select run_id, count(*) from requests group by run_id").rows == [
        (str(tmp_path / "sealed"), 30)
    ]


def _suite(directory: Path, keys: dict[str, str]) -> Path:
    """A finished suite's directory: suite.json naming a run per key (at that level) under runs/."""
    result = SuiteResult(
        suite="ttft",
        section="5.1",
        reference="IETF draft, section 5.1",
        title="TTFT",
        quick=True,
        params={},
        command="infermeter test ttft",
        directory=str(directory),
        runs=[
            RunRef(key=k, label=k, run_dir=str(directory / "runs" / k), reused=False, level=v) for k, v in keys.items()
        ],
        analysis=Analysis(),
        requirements=[],
        verdict="not verifiable",
        started_at="2026-01-01T00:00:00.000Z",
        finished_at="2026-01-01T00:10:00.000Z",
    )
    for i, key in enumerate(keys):
        write_run(directory / "runs" / key, seed=i, n=20)
    (directory / SUITE_JSON).write_text(result.model_dump_json())
    return directory


def test_a_suites_runs_say_which_suite_and_level_they_belong_to(tmp_path: Path) -> None:
    out = tmp_path / "suite"
    for k in (1, 2):
        _suite(out / f"repeat-{k}", {"low": "10%", "high": "90%"})
    write_run(tmp_path / "plain", seed=9, n=20)
    found = find_runs([tmp_path])
    catalog = Catalog([entry(f) for f in found.runs])
    rows = catalog.query(
        "select name, suite_test, suite_run, suite_level, suite_repeats, suite from runs order by 1, 6"
    )
    repeat_1, repeat_2 = str(out / "repeat-1"), str(out / "repeat-2")
    assert rows.rows == [
        ("high", "ttft", "high", "90%", str(out), repeat_1),
        ("high", "ttft", "high", "90%", str(out), repeat_2),
        ("low", "ttft", "low", "10%", str(out), repeat_1),
        ("low", "ttft", "low", "10%", str(out), repeat_2),
        ("plain", None, None, None, None, None),
    ]


def test_a_damaged_run_among_good_ones_is_named_and_skipped(tmp_path: Path, runs_cli: Invoke) -> None:
    for i in range(3):
        write_run(tmp_path / f"run-{i}", seed=i, n=20)
    (tmp_path / "run-1" / RUN_JSON).write_text("{")
    parquet = tmp_path / "run-2" / RECORDS
    parquet.write_bytes(parquet.read_bytes()[:100])
    result = runs_cli(tmp_path, "--sql", "select count(*) as n from runs")
    assert result.code == 0 and "| 1 |" in result.out
    warnings = result.err.splitlines()
    assert len(warnings) == 2, result.err
    assert warnings[0].startswith(f"warning: {tmp_path / 'run-1'}: run.json is not a valid run description")
    assert warnings[1].startswith(f"warning: {tmp_path / 'run-2'}: records.parquet is unreadable")
    assert all(w.endswith("; skipped") for w in warnings)


def test_no_readable_run_is_one_line(tmp_path: Path, runs_cli: Invoke) -> None:
    (tmp_path / "empty").mkdir()
    one_line_error(runs_cli(tmp_path / "empty"), "'dirs'", "holds no run")
    one_line_error(runs_cli(tmp_path / "missing"), "'dirs'", "does not exist")
    write_run(tmp_path / "bad", seed=1, n=5)
    (tmp_path / "bad" / SUMMARY).write_text('{"requests": 5}')
    one_line_error(runs_cli(tmp_path / "bad"), "'dirs'", "no run could be read", "summary.json is not a valid summary")


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        ("selec 1", ("--sql", "Parser Error")),
        ("select * from nowhere", ("--sql", "Catalog Error", "nowhere")),
        ("select nope from runs", ("--sql", "Binder Error", "nope")),
        ("  ", ("--sql", "empty")),
        ("select * from read_csv('https://127.0.0.1:9/x.csv')", ("--sql", "httpfs")),  # never fetches an extension
    ],
)
def test_invalid_sql_is_duckdbs_first_line(tmp_path: Path, runs_cli: Invoke, sql: str, words: tuple[str, ...]) -> None:
    write_run(tmp_path / "r", seed=1, n=5)
    one_line_error(runs_cli(tmp_path, "--sql", sql), *words)


@pytest.mark.parametrize(
    ("sql", "word"),
    [
        ("copy (select 1 as x) to '{run}/summary.json' (format csv)", "COPY"),
        ("COPY runs TO '{out}' (FORMAT csv)", "COPY"),
        ("install httpfs", "INSTALL"),
        ("load httpfs", "LOAD"),
        ("create table t as select 1 as x", "CREATE"),
        ("attach '{out}' as db", "ATTACH"),
        ("set autoinstall_known_extensions = true", "SET"),
        ("pragma enable_profiling", "PRAGMA"),
        ("export database '{out}'", "EXPORT"),
        ("select 1; copy (select 1) to '{out}'", "COPY"),  # checked before the first statement runs
        ("explain analyze copy (select 1) to '{out}'", "EXPLAIN of COPY"),  # EXPLAIN ANALYZE runs what it explains
        ("/* a comment */ Copy (select 1) to '{out}'", "COPY"),
    ],
)
def test_a_query_may_only_read(tmp_path: Path, runs_cli: Invoke, sql: str, word: str) -> None:
    run = write_run(tmp_path / "r", seed=1, n=5)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    result = runs_cli(tmp_path, "--sql", sql.format(run=run, out=tmp_path / "out"))
    one_line_error(result, "--sql", "only a query that reads may run: SELECT", f"not {word}")
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before  # nothing written


@pytest.mark.parametrize(
    "sql",
    [
        "describe runs",
        "summarize select ttft_p99_ms from runs",
        "show tables",
        "explain select count(*) from requests",
        "explain analyze select count(*) from requests",
        "with r as (select * from runs) select count(*) from r",
        "from runs select count(*)",
        "select 1 as a; select 2 as b",
    ],
)
def test_the_ways_to_read_are_allowed(tmp_path: Path, runs_cli: Invoke, sql: str) -> None:
    write_run(tmp_path / "r", seed=1, n=5)
    result = runs_cli(tmp_path, "--sql", sql)
    assert result.code == 0, result.err
    assert result.err == ""


def test_the_html_table_holds_the_result(tmp_path: Path, runs_cli: Invoke) -> None:
    write_run(tmp_path / "runs" / "r", seed=1, n=5, model="tiny")
    page = tmp_path / "catalog.html"
    result = runs_cli(tmp_path / "runs", "--sql", "select sut_model, requests_total from runs", "--html", page)
    assert result.code == 0, result.err
    html = page.read_text()
    assert "<th>sut_model</th>" in html and "<td>tiny</td>" in html and ">5</td>" in html
    assert "https://" not in html.split("<body")[0]  # offline: nothing fetched by the page


def test_the_default_table_lists_each_run_oldest_first(tmp_path: Path, runs_cli: Invoke) -> None:
    write_run(tmp_path / "later", seed=1, n=5, hours=2)
    write_run(tmp_path / "earlier", seed=2, n=5, hours=1)
    out = runs_cli(tmp_path).out
    assert out.index("earlier") < out.index("later")
    assert "ttft_p99_ms" in out and "suite_test" not in out  # no suite: no suite columns


def test_find_refuses_a_file(tmp_path: Path) -> None:
    write_run(tmp_path / "r", seed=1, n=5)
    with pytest.raises(UserError, match="is not a directory"):
        find_runs([tmp_path / "r" / RUN_JSON])
