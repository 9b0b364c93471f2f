"""OpenTelemetry's ExportMetricsServiceRequest in its JSON encoding (OTLP/JSON: lowerCamelCase keys, 64-bit integers
as strings), built for a run or a suite: one Gauge per headline figure stamped with the run's end, the resource
saying which run, model and API it measured.  `otlp` sends it."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from infermeter import __version__
from infermeter.exports.finished import FinishedRun, FinishedSuite
from infermeter.exports.measures import SUITE_UCUM, SUITE_UCUM_OTHER, measure, sanitize

Json = dict[str, Any]  # an OTLP/JSON message, as the wire format spells it


def _value(value: str | float | int | bool) -> Json:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}  # int64 is a string in OTLP/JSON
    if isinstance(value, float):
        return {"doubleValue": _double(value)}
    return {"stringValue": value}


def _double(value: float) -> float | str:
    """A double as proto3 JSON spells it: a number, or "NaN" / "Infinity" / "-Infinity"."""
    if math.isfinite(value):
        return value
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


def attributes(values: Mapping[str, str | float | int | bool]) -> list[Json]:
    """OTLP KeyValues, those with an empty string left out."""
    return [{"key": k, "value": _value(v)} for k, v in values.items() if v != ""]


def gauge(
    name: str, unit: str, description: str, value: float, end_ns: int, attrs: Mapping[str, str] | None = None
) -> Json:
    """One Gauge with one data point at `end_ns`."""
    point: Json = {"timeUnixNano": str(end_ns), "asDouble": _double(value)}
    if attrs:
        point["attributes"] = attributes(attrs)
    return {"name": name, "unit": unit, "description": description, "gauge": {"dataPoints": [point]}}


def _scope(metrics: list[Json]) -> Json:
    return {"scope": {"name": "infermeter", "version": __version__}, "metrics": metrics}


def run_resource(run: FinishedRun, suite: str = "") -> Json:
    """A run's ResourceMetrics: which run, model and API (the resource), a Gauge per headline figure."""
    resource = {
        "service.name": "infermeter",
        "service.version": __version__,
        "infermeter.run.name": run.name,
        "infermeter.run.kind": run.info.kind,
        "infermeter.run.started_at": run.info.started_at,
        "infermeter.sut.model": run.model,
        "infermeter.api": run.api,
        "infermeter.suite.name": suite,
    }
    metrics = []
    for figure in run.figures:
        m = measure(figure)
        metrics.append(gauge(f"infermeter.{figure.name}", m.family.ucum, m.help, figure.value, run.end_ns))
    return {"resource": {"attributes": attributes(resource)}, "scopeMetrics": [_scope(metrics)]}


def suite_resource(suite: FinishedSuite) -> Json:
    """A suite's ResourceMetrics: its verdict (a Gauge of 1 with the verdict as an attribute) and a Gauge per
    headline figure of its analysis."""
    result = suite.result
    resource: dict[str, str | bool] = {
        "service.name": "infermeter",
        "service.version": __version__,
        "infermeter.suite.name": suite.name,
        "infermeter.suite.test": result.suite,
        "infermeter.suite.section": result.section,
        "infermeter.suite.quick": result.quick,
    }
    verdict = gauge(
        "infermeter.suite.verdict",
        "1",
        f"the suite's compliance verdict ({result.reference})",
        1.0,
        suite.end_ns,
        {"verdict": result.verdict},
    )
    metrics = [verdict]
    for name, (value, unit) in suite.figures.items():
        ucum = SUITE_UCUM.get(unit, SUITE_UCUM_OTHER)
        metrics.append(gauge(f"infermeter.suite.{sanitize(name)}", ucum, f"{name} ({unit})", value, suite.end_ns))
    return {"resource": {"attributes": attributes(resource)}, "scopeMetrics": [_scope(metrics)]}


def run_request(run: FinishedRun) -> Json:
    """The ExportMetricsServiceRequest of one run."""
    return {"resourceMetrics": [run_resource(run)]}


def suite_request(suite: FinishedSuite) -> Json:
    """The ExportMetricsServiceRequest of a suite: the suite's resource, then one per run."""
    return {"resourceMetrics": [suite_resource(suite), *(run_resource(run, suite.name) for _, run in suite.runs)]}
