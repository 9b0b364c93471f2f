"""What each headline figure is called outside infermeter: its unit in UCUM (OpenTelemetry's units) and its Prometheus
name in base units (seconds, not ms; ratios, not percentages), derived from metrics.headline's declaration of each
figure's family: `ttft.p99` is the family `ttft` at the statistic `p99`."""

from __future__ import annotations

import re
from dataclasses import dataclass

from infermeter.metrics import headline
from infermeter.metrics.headline import Figure

# a unit (metrics.headline.UCUM's keys) -> its Prometheus base unit and the scale taking a value to it
BASE_UNITS: dict[str, tuple[str, float]] = {
    "ms": ("seconds", 1e-3),
    "s": ("seconds", 1.0),
    "tok/s": ("tokens_per_second", 1.0),
    "req/s": ("requests_per_second", 1.0),
    "inputs/s": ("per_second", 1.0),
    "ratio": ("ratio", 1.0),
    "J": ("joules", 1.0),
    "J/tok": ("joules", 1.0),
}
# Prometheus name stems where a figure's own name would repeat its unit or read poorly (`throughput.output_tok_s`
# -> infermeter_output_throughput_tokens_per_second); any other figure's stem is its name
STEMS: dict[str, str] = {
    "requests.total": "requests",
    "requests.success_rate": "requests_success",
    "throughput.output_tok_s": "output_throughput",
    "throughput.input_tok_s": "input_throughput",
    "throughput.req_s": "request_throughput",
    "goodput.req_s": "goodput",
    "goodput.fraction": "goodput",
    "fluidity.fluid_tok_s": "fluid_token_rate",
    "energy.energy_j": "energy",
    "energy.joules_per_output_token": "energy_per_output_token",
    "energy.output_tok_per_gpu_s": "output_throughput_per_gpu",
    "energy.cost_per_million_output_tokens": "cost_per_million_output_tokens",
    "endpoint.inputs_s": "endpoint_inputs",
}


@dataclass(frozen=True)
class Family:
    """A kind of figure as the exporters give it: what it measures (HELP, description), the UCUM unit of its value
    as the summary gives it (OTLP), and its Prometheus name stem and base unit, `scale` taking the value to that
    unit; all derived from metrics.headline's declaration."""

    help: str
    ucum: str
    stem: str
    base_unit: str = ""
    scale: float = 1.0


def exported(name: str, family: headline.Family) -> Family:
    """A headline family as the exporters name and scale it."""
    base_unit, scale = BASE_UNITS.get(family.unit, ("", 1.0))
    stem = STEMS.get(name, sanitize(name.replace(".", "_")))
    return Family(family.help, headline.UCUM.get(family.unit, "1"), stem, base_unit, scale)


@dataclass(frozen=True)
class Measure:
    """A figure placed in its family: the statistic it is of a distribution (None for a single number)."""

    figure: Figure
    family: Family
    stat: str | None

    @property
    def prometheus_name(self) -> str:
        """`infermeter_<stem>[_<stat>][_<base unit>]`, e.g. infermeter_ttft_p99_seconds."""
        parts = ["infermeter", self.family.stem]
        if self.stat is not None:
            parts.append(self.stat.replace(".", "_"))
        if self.family.base_unit:
            parts.append(self.family.base_unit)
        return "_".join(parts)

    @property
    def prometheus_value(self) -> float:
        """The value in the Prometheus name's base unit."""
        return self.figure.value * self.family.scale

    @property
    def help(self) -> str:
        """The description, with the statistic named."""
        return self.family.help if self.stat is None else f"{self.family.help}, {self.stat}"


def measure(figure: Figure) -> Measure:
    """The figure in its family; a figure this table does not know (one added to the headline later) still
    exports, named after itself, its unit read from the figure."""
    found = figure.family
    if found is not None:
        fam, stat = found
        base = figure.name if stat is None else figure.name.rpartition(".")[0]
        return Measure(figure, exported(base, fam), stat)
    return Measure(figure, exported(figure.name, headline.Family(figure.name, figure.unit, figure.better)), None)


def sanitize(name: str) -> str:
    """A name made of letters, digits and underscores (Prometheus, OTLP and MLflow all take it): `%` reads as
    `pct`, anything else not allowed as `_`."""
    return re.sub(r"[^A-Za-z0-9_]", "_", name.replace("%", "pct"))


# every headline family as the exporters give it
DISTRIBUTIONS: dict[str, Family] = {n: exported(n, f) for n, f in headline.DISTRIBUTIONS.items()}
SINGLE: dict[str, Family] = {n: exported(n, f) for n, f in headline.SINGLE.items()}

# a suite's units (suite.json's analysis.headline, the suites' own) -> UCUM; any other is a count, index or exponent
SUITE_UNITS = {"share": "ratio"}  # a suite's unit names that differ from metrics.headline's
SUITE_UCUM = {**headline.UCUM, **{k: headline.UCUM[v] for k, v in SUITE_UNITS.items()}}
SUITE_UCUM_OTHER = "1"
