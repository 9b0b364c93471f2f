"""A query of the catalog of runs (`infermeter runs`) as a text grid for the console and as an offline HTML table."""

from __future__ import annotations

import datetime as dt
import math

import orjson

from infermeter.catalog.index import QueryResult
from infermeter.metrics.headline import UCUM
from infermeter.report.document import Document, Section
from infermeter.report.tables import grid
from infermeter.suite_result import Table


def cell(value: object) -> str:
    """A value as a table cell: NULL as 'null', numbers to six significant digits, times in ISO 8601, lists and
    mappings as JSON."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.6g}" if math.isfinite(value) else str(value)
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ", timespec="milliseconds" if value.microsecond else "seconds")
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, list | tuple | dict):
        return orjson.dumps(value, default=str).decode()
    return str(value)


def _unit(unit: str) -> str:
    """A unit as written after a figure: none for a dimensionless one (a ratio)."""
    return f" {unit}" if unit and UCUM.get(unit) != "1" else ""


def number(value: float | None, unit: str = "") -> str:
    """A figure for a trend or check table: four significant digits (whole numbers from 1000), its unit after."""
    if value is None or not math.isfinite(value):
        return "n/a"
    text = f"{value:.0f}" if abs(value) >= 1000 else f"{value:.4g}"
    return text + _unit(unit)


def interval(lo: float | None, hi: float | None, unit: str = "") -> str:
    """A confidence interval as [lo, hi] with its unit; 'none' when a side is missing."""
    if lo is None or hi is None:
        return "none"
    return f"[{number(lo)}, {number(hi)}]" + _unit(unit)


def query_table(result: QueryResult, caption: str) -> Table:
    """The result's cells as a report table."""
    return Table(caption=caption, headers=result.columns, rows=[[cell(v) for v in row] for row in result.rows])


def query_text(result: QueryResult, caption: str) -> str:
    """The result as a grid (the query's caption below), or a line saying it returned no table."""
    if not result.columns:
        return "the query returned no table"
    table = query_table(result, caption)
    return grid(table.headers, table.rows, table.caption)


def query_document(result: QueryResult, caption: str, query: str, notes: list[str]) -> Document:
    """The result as a report document: the query, notes on how the runs were read, the table."""
    table = query_table(result, caption)
    bullets = [f"Query: {query}", *notes]
    return Document("infermeter runs", [Section("Catalog of runs", bullets=bullets, tables=[table])])
