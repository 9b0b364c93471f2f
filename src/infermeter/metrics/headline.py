"""A run's headline figures as flat named numbers, one definition for everything that carries them out of the run
directory: the exporters (MLflow, OpenTelemetry, Prometheus) and the catalog of runs.  Each figure's meaning, unit and
better direction are declared once here; a figure the run did not measure (no SLO, no deadlines, no GPU count) is left
out, never given as zero."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from infermeter.metrics.summary_model import Stats, Summary

Better = Literal["lower", "higher", "neither"]

HEADLINE_STATS = ("mean", "p50", "p90", "p95", "p99")
# the units figures come in, each with its UCUM spelling (OpenTelemetry's units)
UCUM: dict[str, str] = {
    "ms": "ms",
    "s": "s",
    "tok/s": "{token}/s",
    "req/s": "{request}/s",
    "inputs/s": "{input}/s",
    "requests": "{request}",
    "ratio": "1",
    "J": "J",
    "J/tok": "J/{token}",
    "price": "{price}",
}
COLUMN_SUFFIX = {"ms": "_ms", "s": "_s"}  # a time's unit is part of its column name; the other names say theirs


@dataclass(frozen=True)
class Family:
    """What a figure (or each statistic of a distribution) measures, its unit, and which way is better."""

    help: str
    unit: str  # a key of UCUM
    better: Better


# distributions: each gives one figure per statistic of HEADLINE_STATS, `ttft.p99`; summary.json's `<name>_ms` Stats
LATENCIES = ("ttft", "itl", "tpot", "e2e", "normalized_latency")
DISTRIBUTIONS: dict[str, Family] = {
    "ttft": Family("time to first token (IETF draft, section 5.1)", "ms", "lower"),
    "itl": Family("inter-token latency (IETF draft, section 5.4)", "ms", "lower"),
    "tpot": Family("time per output token after the first", "ms", "lower"),
    "e2e": Family("end-to-end request latency", "ms", "lower"),
    "normalized_latency": Family("end-to-end latency per output token", "ms", "lower"),
    "fluidity.index": Family("Metron's fluidity-index of a request", "ratio", "higher"),
    "endpoint.latency": Family("latency of a one-body reply (embeddings, rerank)", "ms", "lower"),
}
SINGLE: dict[str, Family] = {
    "requests.total": Family("requests measured, ok and failed", "requests", "neither"),
    "requests.ok": Family("requests that succeeded", "requests", "higher"),
    "requests.failed": Family("requests that failed (error, timeout, cancelled)", "requests", "lower"),
    "requests.success_rate": Family("share of requests that succeeded", "ratio", "higher"),
    "duration": Family("measurement window: first submission to last completion", "s", "neither"),
    "throughput.output_tok_s": Family("output tokens per second of the measurement window", "tok/s", "higher"),
    "throughput.input_tok_s": Family("input tokens per second of the measurement window", "tok/s", "higher"),
    "throughput.req_s": Family("requests completed per second of the measurement window", "req/s", "higher"),
    "goodput.req_s": Family("requests per second meeting every SLO at once", "req/s", "higher"),
    "goodput.fraction": Family("share of requests meeting every SLO at once", "ratio", "higher"),
    "fluidity.fluid_tok_s": Family("Metron's fluid token generation rate", "tok/s", "higher"),
    "energy.energy_j": Family("energy used over the measurement window", "J", "lower"),
    "energy.joules_per_output_token": Family("energy per output token", "J/tok", "lower"),
    "energy.output_tok_per_gpu_s": Family("output tokens per GPU-second", "tok/s", "higher"),
    "energy.cost_per_million_output_tokens": Family(
        "cost of a million output tokens at the given GPU price", "price", "lower"
    ),
    "endpoint.inputs_s": Family("inputs (texts embedded, documents ranked) per second", "inputs/s", "higher"),
}


@dataclass(frozen=True)
class Figure:
    """One number of a run: `name` as the catalog, `runs trend --metric` and the exporters spell it (`ttft.p99`),
    its unit (a key of UCUM), and which way is better (for regression checks)."""

    name: str
    unit: str
    value: float
    better: Better

    @property
    def column(self) -> str:
        """The name as an SQL column and a metric key: dots become underscores, a time's unit is appended
        (`ttft.p99` in ms -> `ttft_p99_ms`)."""
        return column_name(self.name, self.unit)

    @property
    def family(self) -> tuple[Family, str | None] | None:
        """The family the figure belongs to and its statistic (None for a single number); None if unknown."""
        return family_of(self.name)


def column_name(name: str, unit: str) -> str:
    """`ttft.p99`, ms -> `ttft_p99_ms`; `p99.9` keeps its point as `p99_9`; only a time gets a unit suffix."""
    return name.replace(".", "_") + COLUMN_SUFFIX.get(unit, "")


def family_of(name: str) -> tuple[Family, str | None] | None:
    """A figure name's family and statistic: `ttft.p99` -> (ttft's, "p99"), `throughput.req_s` -> (its, None)."""
    if name in SINGLE:
        return SINGLE[name], None
    base, _, stat = name.rpartition(".")
    if stat in HEADLINE_STATS and base in DISTRIBUTIONS:
        return DISTRIBUTIONS[base], stat
    return None


def _stats(name: str, s: Stats | None) -> list[Figure]:
    if s is None or s.n == 0:
        return []
    fam = DISTRIBUTIONS[name]
    out = []
    for stat in HEADLINE_STATS:
        value = s.value(stat)
        if value is not None:
            out.append(Figure(f"{name}.{stat}", fam.unit, float(value), fam.better))
    return out


def _single(name: str, value: float | None) -> list[Figure]:
    fam = SINGLE[name]
    return [] if value is None else [Figure(name, fam.unit, float(value), fam.better)]


def headline(summary: Summary) -> list[Figure]:
    """The run's headline figures, in a fixed order: latency distributions, request counts, throughput, goodput,
    fluidity, energy and cost, and the one-body endpoint's latency, each where the run measured it."""
    out: list[Figure] = []
    for name in LATENCIES:
        out += _stats(name, getattr(summary, f"{name}_ms"))
    req, tp, gp = summary.requests, summary.throughput, summary.goodput
    for name, value in (
        ("requests.total", req.total),
        ("requests.ok", req.ok),
        ("requests.failed", req.failed),
        ("requests.success_rate", req.success_rate),
        ("duration", summary.duration_s),
        ("throughput.output_tok_s", tp.output_tok_s),
        ("throughput.input_tok_s", tp.input_tok_s),
        ("throughput.req_s", tp.req_s),
        ("goodput.req_s", gp.req_s),
        ("goodput.fraction", gp.fraction),
    ):
        out += _single(name, value)
    if (fl := summary.fluidity) is not None:
        out += _stats("fluidity.index", fl.index)
        out += _single("fluidity.fluid_tok_s", fl.fluid_tok_s)
    if (en := summary.energy) is not None:
        for key in ("energy_j", "joules_per_output_token", "output_tok_per_gpu_s", "cost_per_million_output_tokens"):
            out += _single(f"energy.{key}", getattr(en, key))
    if (ep := summary.endpoint) is not None:
        out += _stats("endpoint.latency", ep.latency_ms)
        out += _single("endpoint.inputs_s", ep.inputs_s)
    return out
