"""The metric names `runs trend --metric` and `runs check --metric` take: the headline figures' names
(metrics.headline), each either a statistic of a per-request latency, whose groups are compared on the requests'
samples (`ttft.p99`, `tpot.mean`), the share of requests that succeeded, compared on the requests' pooled outcomes,
or a figure of a whole run (`throughput.output_tok_s`), compared over runs."""

from __future__ import annotations

from dataclasses import dataclass

from infermeter.catalog.entry import CatalogRun
from infermeter.errors import UserError
from infermeter.metrics.headline import HEADLINE_STATS, LATENCIES, Better

# a headline latency's name -> its samples' name in metrics.compared.Run.samples
SAMPLES = {"ttft": "ttft", "itl": "itl", "tpot": "tpot", "e2e": "e2e", "normalized_latency": "normalized"}
SUCCESS_RATE = "requests.success_rate"  # compared on the requests' outcomes pooled over the runs, not run by run


@dataclass(frozen=True)
class Metric:
    """A headline figure by name, unit and better direction; `samples` and `stat` say which per-request samples and
    which statistic of them it is (None: a figure of the whole run); `outcomes`: the success rate, compared on the
    requests' outcomes."""

    name: str
    unit: str
    better: Better
    column: str
    samples: str | None = None
    stat: str | None = None
    outcomes: bool = False

    @property
    def quantile(self) -> float | None:
        """The statistic as a quantile (p99 -> 0.99); None for a mean or a run's figure."""
        return float(self.stat[1:]) / 100 if self.stat is not None and self.stat.startswith("p") else None

    def label(self) -> str:
        return f"{self.name} ({self.unit})" if self.unit else self.name


def metric_of(name: str, unit: str, better: Better, column: str) -> Metric:
    """A headline figure as a metric: a statistic of one of the latencies has samples to compare."""
    latency, _, stat = name.rpartition(".")
    if latency in LATENCIES and stat in HEADLINE_STATS:
        return Metric(name, unit, better, column, SAMPLES[latency], stat)
    return Metric(name, unit, better, column, outcomes=name == SUCCESS_RATE)


def known_metrics(runs: list[CatalogRun]) -> dict[str, Metric]:
    """Every figure some run measured, by name, in the headline's order."""
    out: dict[str, Metric] = {}
    for run in runs:
        for f in run.figures.values():
            if f.name not in out:
                out[f.name] = metric_of(f.name, f.unit, f.better, f.column)
    return out


def resolve_metric(name: str, known: dict[str, Metric]) -> Metric:
    """The metric `name` names (its column name is taken too: `ttft_p99_ms`); a name no run measured is a one-line
    error listing those they did."""
    text = name.strip()
    found = known.get(text) or next((m for m in known.values() if m.column == text), None)
    if found is None:
        raise UserError(f"unknown metric {name!r}: the runs measured {', '.join(known)}")
    return found


def resolve_column(key: str, columns: list[str]) -> str:
    """A `runs` column by its name or dotted (`sut.model` -> `sut_model`); an unknown one is a one-line error
    listing the columns that are not figures."""
    text = key.strip()
    for candidate in (text, text.replace(".", "_")):
        if candidate in columns:
            return candidate
    raise UserError(f"{key!r} is no column of the runs table: it has {', '.join(columns)}")
