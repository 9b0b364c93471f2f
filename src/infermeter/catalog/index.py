"""The catalog in DuckDB, in memory (no server): the table `runs` (one row per run: catalog.columns) and the view
`requests` (every request of every sealed run, `run_id` first, then the record's fields, read from each
records.parquet in place).  A query may only read: every statement is checked before any runs (SELECT and its
relatives; no COPY, INSTALL, ATTACH, CREATE, SET, PRAGMA), and DuckDB may neither install nor load an extension, so a
query naming a URL fails instead of downloading one."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from infermeter.catalog.columns import Column, Scalar, run_columns
from infermeter.catalog.entry import CatalogRun
from infermeter.errors import UserError
from infermeter.records import SCHEMA

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

RUNS = "runs"
REQUESTS = "requests"
# what `infermeter runs DIR` prints without --sql: who, when, and the figures most looked at (those present)
OVERVIEW = (
    "run_id",
    "suite_test",
    "suite_level",
    "kind",
    "started_at",
    "sut_model",
    "requests_total",
    "ttft_p50_ms",
    "ttft_p99_ms",
    "tpot_p99_ms",
    "throughput_output_tok_s",
)
SUITE_COLUMNS = ("suite_test", "suite_level")
NO_DOWNLOADS = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}
READ_ONLY = "SELECT (WITH ... SELECT, FROM ..., VALUES, TABLE), DESCRIBE, SUMMARIZE, SHOW, or EXPLAIN of one"
COMMENTS = r"\s*(?:(?:--[^\n]*(?:\n|$)|/\*.*?\*/)\s*)*"  # what may come before a statement's first word
# EXPLAIN [ANALYZE] at the head of a statement: what follows is the statement it explains
EXPLAIN = re.compile(COMMENTS + r"explain(?:\s+analy[sz]e)?\b", re.IGNORECASE | re.DOTALL)
FIRST_WORD = re.compile(COMMENTS + r"(\w+)", re.DOTALL)


@dataclass(frozen=True)
class QueryResult:
    """What a query gave: its column names and rows (None: NULL)."""

    columns: list[str]
    rows: list[tuple[object, ...]]


def _quote(text: str) -> str:
    """An SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def identifier(name: str) -> str:
    """An SQL identifier, quoted."""
    return '"' + name.replace('"', '""') + '"'


def _arrow(columns: list[Column]) -> pa.Table:
    import pyarrow as pa

    types = {
        "BOOLEAN": pa.bool_(),
        "BIGINT": pa.int64(),
        "DOUBLE": pa.float64(),
        "VARCHAR": pa.string(),
        "TIMESTAMP": pa.timestamp("us"),  # DuckDB's TIMESTAMP
    }
    return pa.table({c.name: pa.array(c.values, type=types[c.sql_type]) for c in columns})


def _not_read_only(sql: str) -> str | None:
    """The kind of the first statement of `sql` that does more than read (None: every one only reads); EXPLAIN
    ANALYZE runs the statement it explains, so that one is checked too.  DuckDB's parser error passes."""
    import duckdb

    for statement in duckdb.extract_statements(sql):
        if statement.type == duckdb.StatementType.SELECT:
            continue
        if statement.type != duckdb.StatementType.EXPLAIN:
            word = FIRST_WORD.match(statement.query)  # INSTALL, not its type's name LOAD
            return word.group(1).upper() if word is not None else statement.type.name
        head = EXPLAIN.match(statement.query)
        inner = statement.query[head.end() :] if head is not None else ""
        if not inner.strip() or (found := _not_read_only(inner)) is not None:
            return f"EXPLAIN of {found}" if inner.strip() and found else "EXPLAIN of a statement that is no query"
    return None


def refuse_writes(sql: str) -> None:
    """A one-line UserError unless every statement of `sql` only reads (READ_ONLY), before any of them runs."""
    found = _not_read_only(sql)
    if found is not None:
        raise UserError(f"only a query that reads may run: {READ_ONLY}; not {found}")


class Catalog:
    """The runs in an in-memory DuckDB database: `runs` and `requests` to query with SQL."""

    def __init__(self, runs: list[CatalogRun]) -> None:
        import duckdb
        import pyarrow as pa

        self.runs = runs
        self.db: duckdb.DuckDBPyConnection = duckdb.connect(":memory:", config=dict(NO_DOWNLOADS))
        self.db.register("runs_arrow", _arrow(run_columns(runs)))
        self.db.execute(f"create table {RUNS} as select * from runs_arrow")
        self.db.unregister("runs_arrow")
        sealed = [(r.run_id, str(r.records.resolve())) for r in runs if r.records is not None]
        if sealed:
            files = ", ".join(_quote(f) for _, f in sealed)
            ids = ", ".join(f"({_quote(run_id)}, {_quote(f)})" for run_id, f in sealed)
            self.db.execute(
                f"create view {REQUESTS} as select f.run_id, r.* exclude (filename) from read_parquet([{files}], "
                "union_by_name = true, filename = true, hive_partitioning = false) r "
                f"join (values {ids}) f(run_id, file) on r.filename = f.file"
            )
        else:  # no sealed run: the view's columns, and no row
            empty = pa.schema([pa.field("run_id", pa.string()), *SCHEMA]).empty_table()
            self.db.register("requests_arrow", empty)
            self.db.execute(f"create table {REQUESTS} as select * from requests_arrow")
            self.db.unregister("requests_arrow")
        self.db.execute("set lock_configuration = true")  # no query may turn the extensions' autoloading back on

    def query(self, sql: str) -> QueryResult:
        """The result of `sql` (its last statement's), a query that only reads; a statement that would do anything
        else, and DuckDB's refusal, are a one-line UserError (DuckDB's first line)."""
        import duckdb

        if not sql.strip():
            raise UserError("the query is empty: give SQL such as 'select count(*) as n from runs'")
        try:
            refuse_writes(sql)
            cursor = self.db.execute(sql)
            if cursor is None or cursor.description is None:
                return QueryResult([], [])
            names = [d[0] for d in cursor.description]
            return QueryResult(names, [tuple(row) for row in cursor.fetchall()])
        except duckdb.Error as exc:
            text = str(exc).strip()
            raise UserError(text.splitlines()[0] if text else type(exc).__name__) from None

    def columns(self) -> list[str]:
        """The `runs` table's column names, in order."""
        return [str(row[0]) for row in self.db.execute(f"select name from pragma_table_info('{RUNS}')").fetchall()]

    def overview(self) -> str:
        """The query of the runs table `infermeter runs DIR` prints: OVERVIEW's columns the runs have (the suite's
        only when a run is in one), oldest first."""
        (in_suites,) = self.db.execute(f"select count(suite) from {RUNS}").fetchone() or (0,)
        have = set(self.columns()) - (set() if in_suites else set(SUITE_COLUMNS))
        picked = ", ".join(identifier(c) for c in OVERVIEW if c in have)
        return f"select {picked} from {RUNS} order by started_at, run_id"

    def values(self, column: str) -> dict[str, Scalar]:
        """One column of `runs` by run id (the column must be one of `columns()`)."""
        rows = self.db.execute(f"select run_id, {identifier(column)} from {RUNS}").fetchall()
        return {str(run_id): value for run_id, value in rows}

    def close(self) -> None:
        self.db.close()
