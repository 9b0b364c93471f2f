"""The `runs` table's columns, one row per run: who it is (id, name, suite), what it declares (kind, start, the SUT,
a simulated engine, run.json's resolved configuration flattened with underscores: `load_rate`, `target_api`), and
every headline figure by its column name (metrics.headline: `ttft_p99_ms`).  Each column's SQL type is read from its
values: a column whose values are all whole numbers is BIGINT, numbers DOUBLE, flags BOOLEAN, anything else text
(lists and mappings as JSON)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import orjson

if TYPE_CHECKING:
    from infermeter.catalog.entry import CatalogRun

Scalar = bool | int | float | str | dt.datetime | None
SqlType = Literal["BOOLEAN", "BIGINT", "DOUBLE", "VARCHAR", "TIMESTAMP"]
INT64 = 2**63


@dataclass(frozen=True)
class Column:
    """One column of the `runs` table: its name, SQL type, and a value per run (None: NULL)."""

    name: str
    sql_type: SqlType
    values: list[Scalar]


def flatten(value: object, prefix: str = "", sep: str = "_") -> dict[str, object]:
    """A nested mapping as flat keys joined with `sep` (`load` {`rate`: 5} -> `load_rate`); anything else (a
    scalar, None, a list, a mapping with no keys) is one value, kept as it is.  The `runs` table's columns and the
    MLflow export's params both name run.json's configuration this way."""
    if isinstance(value, Mapping) and value:
        out: dict[str, object] = {}
        for key, inner in value.items():
            out.update(flatten(inner, f"{prefix}{sep}{key}" if prefix else str(key), sep))
        return out
    return {prefix: value}


def _cells(prefix: str, value: object) -> dict[str, Scalar]:
    """`flatten`'s values as cells: scalars as they are, lists and mappings as JSON text."""
    return {
        name: leaf if isinstance(leaf, bool | int | float | str) or leaf is None else _json(leaf)
        for name, leaf in flatten(value, prefix).items()
    }


def _json(value: object) -> str:
    return orjson.dumps(value, default=str, option=orjson.OPT_SORT_KEYS).decode()


def _identity(run: CatalogRun) -> dict[str, Scalar]:
    """Who the run is and where it sits: its id (the path it was found at), name, suite, kind, start, notes."""
    suite = run.suite
    return {
        "run_id": run.run_id,
        "name": run.path.name,
        "suite": str(suite.directory) if suite else None,
        "suite_test": suite.test if suite else None,
        "suite_run": suite.key if suite else None,
        "suite_level": suite.level if suite else None,
        "suite_repeats": str(suite.repeats) if suite and suite.repeats else None,
        "kind": run.info.kind,
        "started_at": run.started_at,
        "itl_option": run.info.itl_option,
        "workload_name": run.info.workload.name,
        "note": "; ".join(run.notes) or None,
    }


def _declared(run: CatalogRun) -> dict[str, Scalar]:
    """What run.json declares: the SUT, a simulated engine, and the resolved configuration (keys as written)."""
    info = run.info
    out = _cells("sut", info.sut.model_dump(mode="json"))
    if info.engine is not None:
        out.update(_cells("engine", info.engine.model_dump(mode="json", exclude={"config"})))
        out.update(_cells("engine", info.engine.config))
    out.update(_cells("", info.config) if info.config else {})
    return out


def run_columns(runs: list[CatalogRun]) -> list[Column]:
    """The `runs` table's columns in order: identity, declarations (in the order first met), headline figures; a
    name met twice keeps its first meaning."""
    rows = [(_identity(r), _declared(r)) for r in runs]
    names = dict.fromkeys(name for identity, declared in rows for name in (*identity, *declared))
    columns = [typed(name, [i[name] if name in i else d.get(name) for i, d in rows]) for name in names]
    figures = {f.column: None for r in runs for f in r.figures.values() if f.column not in names}
    by_run = [{f.column: f.value for f in r.figures.values()} for r in runs]
    columns += [Column(name, "DOUBLE", [values.get(name) for values in by_run]) for name in figures]
    return columns


def typed(name: str, values: list[Scalar]) -> Column:
    """A column whose type its values decide; values that share no type become text."""
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, dt.datetime) for v in present):
        return Column(name, "TIMESTAMP", values)
    if present and all(isinstance(v, bool) for v in present):
        return Column(name, "BOOLEAN", values)
    numbers = [v for v in present if isinstance(v, int | float) and not isinstance(v, bool)]
    if present and len(numbers) == len(present):
        if all(isinstance(v, int) and -INT64 <= v < INT64 for v in numbers):
            return Column(name, "BIGINT", values)
        return Column(name, "DOUBLE", [float(v) if isinstance(v, int | float) else None for v in values])
    return Column(name, "VARCHAR", [v if isinstance(v, str) or v is None else as_text(v) for v in values])


def as_text(value: Scalar) -> str:
    """A value as a text cell: text as it is, a flag or number as JSON writes it, a time in ISO 8601."""
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    return value if isinstance(value, str) else _json(value)
