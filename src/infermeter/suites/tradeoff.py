"""Throughput-Latency Tradeoff (the IETF draft, section 5.3): open loop at 10%, 20%, ..., 120% of an estimated
capacity (given, read from a `throughput` suite, or found by a preliminary search kept as runs of this suite),
Table 5, the knee point, the saturation point and the optimal operating point under an SLO, and the curve."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar

from pydantic import Field

from infermeter.chart import Chart, Mark
from infermeter.config import checks
from infermeter.config.section import Flag
from infermeter.emulator.config import EmulatorConfig
from infermeter.errors import UserError
from infermeter.metrics.curves import knee_point, optimal_point, saturation_point
from infermeter.report.tables import fmt_ms, fmt_pct
from infermeter.report.text_plot import curve
from infermeter.suite_result import SUITE_JSON, Analysis, Requirement, Table
from infermeter.suites.charts import percentile_traces
from infermeter.suites.common import at_least, from_flag, headline, not_verifiable, requirement
from infermeter.suites.lab import Lab
from infermeter.suites.levels import Level, measure
from infermeter.suites.throughput import SweepParams, ThroughputParams, search_levels, small_engine

SATURATION_TOLERANCE = 0.03  # a drop in achieved throughput smaller than this is measurement noise
SHORTFALL = 0.90
"""A level has fallen behind its load when the output tokens it delivered per second are under this fraction of those
its requests asked for per second (levels.Level.flow, each rate over its own span): the draft's 90% completion floor
(5.2.3.1), in tokens.  Noise at a stable level stays within a few percent of 1; a saturated server, delivering at its
capacity, falls further short with every level above it."""
FEW_REQUESTS = 30
"""Completed requests under which a level's percentiles, queue trend and rates rest on too few samples to be relied on:
a knee or saturation judgment resting on such a level is printed with a sample-size warning beside it."""


def from_suite(path: Path, figure: str) -> float:
    """A figure of a finished suite's suite.json (e.g. a `throughput` suite's sustainable rate)."""
    from infermeter.suites.execute import load_result

    if not (path / SUITE_JSON).is_file():
        raise UserError(f"--from {path}: no finished test suite there (it has no {SUITE_JSON})")
    try:
        result = load_result(path)
    except UserError as exc:
        raise UserError(f"--from {path}: {exc}") from None
    value = result.analysis.figures.get(figure)
    if not isinstance(value, int | float) or value <= 0:
        raise UserError(f"--from {path}: its '{result.suite}' test found no {figure.replace('_', ' ')}")
    return float(value)


class TradeoffParams(SweepParams):
    capacity: Annotated[float | None, Flag("estimated capacity, req/s (else --from, else a search)", checks.RATE)] = (
        None
    )
    from_: Annotated[
        Path | None, from_flag("a `throughput` suite directory whose sustainable rate is the estimate")
    ] = None
    levels: Annotated[list[int], Flag("load levels in % of the capacity", checks.int_list(1, 1000))] = Field(
        default_factory=lambda: list(range(10, 130, 10))
    )
    ttft_slo: Annotated[
        float | None,
        Flag("TTFT P99 bound in ms for the optimal operating point", checks.number(0, 3.6e6, lo_open=True)),
    ] = 500.0

    QUICK: ClassVar[dict[str, Any]] = {"duration": 4.0}


class TradeoffSuite:
    name = "tradeoff"
    section = "5.3"
    reference = "IETF draft, section 5.3"
    title = "Throughput-Latency Tradeoff"
    summary = "open loop at 10%..120% of capacity: Table 5, knee, saturation and optimal points"
    params = TradeoffParams

    def emulator(self, params: TradeoffParams) -> EmulatorConfig:
        return small_engine()

    def estimate(self, lab: Lab, params: TradeoffParams) -> tuple[float, str]:
        if params.capacity is not None:
            return params.capacity, "given (--capacity)"
        if params.from_ is not None:
            return from_suite(params.from_, "sustainable_rate"), f"the throughput test in {params.from_}"
        if not lab.embedded:
            raise UserError("give the estimated capacity: --capacity R, or --from DIR of a `throughput` test")
        search = ThroughputParams(
            workload=params.workload, duration=params.duration, start=8.0, tolerance=0.2, max_probes=5
        )
        found = search_levels(lab, search, tag="estimate-").sustainable
        if found is None:
            raise UserError("the preliminary throughput search found no sustainable rate: give --capacity")
        return found.offered, "a preliminary throughput search (5.2) run in this suite"

    def procedure(self, lab: Lab, params: TradeoffParams) -> dict[str, Any]:
        capacity, source = self.estimate(lab, params)
        levels = []
        for pct in sorted(set(params.levels)):
            rate = float(f"{capacity * pct / 100:.4g}")
            cfg = lab.config(workload=params.run_workload(), load={"rate": rate, "duration": params.duration})
            run = lab.run(f"level-{pct}pct", f"{pct}% of capacity: {rate:g} req/s", cfg, level=f"{pct}%")
            levels.append((pct, measure(rate, run)))
        return {"capacity": capacity, "source": source, "levels": levels}

    def analyze(self, measured: dict[str, Any], params: TradeoffParams) -> Analysis:
        levels: list[tuple[int, Level]] = measured["levels"]
        p99 = [lv.run.summary.e2e_ms.p99 for _, lv in levels]
        achieved = [lv.output_tok_s for _, lv in levels]
        meets = [not params.meets_slo(lv) and (lv.run.summary.requests.success_rate or 0) >= 0.99 for _, lv in levels]
        points = Points(
            knee_point(p99), saturation_verdict(levels), first_saturated(levels), optimal_point(achieved, meets)
        )
        figures = tradeoff_figures(measured["capacity"], levels, p99, achieved, points)
        units = {
            "knee_rate": "req/s",
            "saturation_rate": "req/s",
            "first_saturated_rate": "req/s",
            "optimal_rate": "req/s",
            "peak_output_tok_s": "tok/s",
            "min_e2e_p99_ms": "ms",
        }
        return Analysis(
            tables=[table5(levels)],
            findings=tradeoff_findings(measured, levels, p99, achieved, points, self._slo(params)),
            figures=figures,
            headline=headline(figures, units),
            plots=[curve(achieved, [v or 0.0 for v in p99], "E2E P99 (ms) against achieved throughput (tok/s)")],
            charts=[tradeoff_chart(levels, achieved, points)],
        )

    @staticmethod
    def _slo(params: TradeoffParams) -> str:
        parts = [f"TTFT P99 <= {params.ttft_slo:g} ms"] if params.ttft_slo else []
        parts += [f"TPOT P99 <= {params.tpot_slo:g} ms"] if params.tpot_slo else []
        return " and ".join([*parts, "success >= 99%"])

    def requirements(
        self, measured: dict[str, Any], analysis: Analysis, params: TradeoffParams, quick: bool
    ) -> list[Requirement]:
        levels: list[tuple[int, Level]] = measured["levels"]
        shortest = min((lv.run.summary.duration_s for _, lv in levels), default=0.0)
        closed = [
            p for p, lv in levels if lv.run.info.load.concurrency is not None or lv.run.info.load.arrivals is None
        ]
        by_time = [p for p, lv in sorted(levels, key=lambda pl: pl[1].run.info.started_at)]
        return [
            at_least("MUST", "5.3.2", "at least 10 load levels", len(levels), 10, "levels"),
            spans_to_saturation(levels),
            at_least("MUST", "5.3.2", "at least 60 seconds per load level", round(shortest, 1), 60, "s (shortest)"),
            requirement(
                "MUST",
                "5.3.2",
                "open loop at every level",
                bool(levels) and not closed,
                "open-loop arrivals at every level (run.json)"
                if not closed
                else f"closed loop at {', '.join(f'{p}%' for p in closed)}",
            ),
            requirement(
                "MUST",
                "5.3.3",
                "levels run in ascending order",
                by_time == sorted(by_time),
                "in the order run: " + ", ".join(f"{p}%" for p in by_time),
            ),
        ]


def few_requests(lv: Level) -> str | None:
    """The sample-size warning for a level with under FEW_REQUESTS completed requests (None: enough of them)."""
    n = lv.run.summary.requests.ok
    if n >= FEW_REQUESTS:
        return None
    return (
        f"level at {lv.offered:g} req/s: only {n} completed request{'' if n == 1 else 's'} (under {FEW_REQUESTS}): "
        "its percentiles and trends are not reliable"
    )


def warned(text: str, levels: list[Level]) -> str:
    """A judgment with the sample-size warnings of the levels it rests on beside it."""
    warnings = list(dict.fromkeys(w for lv in levels if (w := few_requests(lv)) is not None))
    return text + (f" [sample size: {'; '.join(warnings)}]" if warnings else "")


def knee_finding(levels: list[tuple[int, Level]], p99: list[float | None], knee: int | None) -> str:
    """5.3.4's knee (the first level whose E2E P99 exceeds 2x the sweep's minimum), with the levels it rests on: the
    knee and the minimum's level, or every level when none exceeded it; not verifiable under two levels with a P99."""
    known = [i for i, v in enumerate(p99) if v is not None]
    if len(known) < 2:
        return (
            f"Knee point: not verifiable ({len(known)} level{'' if len(known) == 1 else 's'} with an E2E P99: a knee "
            "needs a P99 at two levels or more)"
        )
    floor = min(known, key=lambda i: p99[i] or 0.0)
    if knee is None:
        return warned("Knee point: none (E2E P99 never exceeded 2x its minimum)", [levels[i][1] for i in known])
    return warned(
        f"Knee point: {levels[knee][1].offered:g} req/s (E2E P99 {fmt_ms(p99[knee])} exceeds 2x the minimum, "
        f"{fmt_ms(p99[floor])} at {levels[floor][1].offered:g} req/s)",
        [levels[knee][1], levels[floor][1]],
    )


def level_saturation(levels: list[tuple[int, Level]], i: int, decreased: int | None) -> list[str]:
    """Why level `i` is past saturation (empty: it shows no sign): 5.2.3.1's criteria (its queue grows, completions
    or successes under 90% of arrivals), its output falling short of what was asked for (SHORTFALL), and achieved
    throughput falling from the previous level's (`decreased`: the first level where it fell, saturation_point)."""
    lv = levels[i][1]
    why = lv.saturation(None)
    if lv.flow is not None and lv.flow.ratio < SHORTFALL:
        why.append(
            f"delivered {lv.flow.delivered_tok_s:.0f} of the {lv.flow.offered_tok_s:.0f} output tok/s offered "
            f"({fmt_pct(lv.flow.ratio)}, under {100 * SHORTFALL:g}%)"
        )
    if decreased == i:
        before = levels[i - 1][1]
        why.append(
            f"achieved throughput fell from {before.output_tok_s:.0f} tok/s at {before.offered:g} req/s to "
            f"{lv.output_tok_s:.0f} tok/s (by more than {100 * SATURATION_TOLERANCE:g}%)"
        )
    return why


@dataclass(frozen=True)
class Saturation:
    """The saturation point: the first level (ascending load) past saturation and why, and the levels that could
    show nothing either way (under 3 requests sent: no queue trend, no rates)."""

    index: int | None
    reasons: tuple[str, ...]
    unmeasured: tuple[int, ...]
    decreased: bool = False  # the reasons include the fall from the previous level

    def finding(self, levels: list[tuple[int, Level]]) -> str:
        """The finding's line, with the sample-size warnings of the levels it rests on."""
        if self.index is not None:
            lv = levels[self.index][1]
            rests = [levels[self.index - 1][1], lv] if self.decreased else [lv]
            lowest = "; the lowest level run: saturation may begin below it" if self.index == 0 else ""
            return warned(f"Saturation point: {lv.offered:g} req/s ({'; '.join(self.reasons)}{lowest})", rests)
        if not levels:
            return "Saturation point: not verifiable (no levels were measured)"
        checked = [lv for i, (_, lv) in enumerate(levels) if i not in self.unmeasured]
        evidence = (
            "no level's queue grew, none completed or succeeded under 90% of its arrivals or delivered under "
            f"{100 * SHORTFALL:g}% of the output tokens offered, and achieved throughput never fell between levels "
            f"by more than {100 * SATURATION_TOLERANCE:g}%"
        )
        if self.unmeasured:
            rates = ", ".join(f"{levels[i][1].offered:g}" for i in self.unmeasured)
            return warned(
                f"Saturation point: not verifiable (the levels at {rates} req/s sent under 3 requests, too few for a "
                f"queue trend or a rate; at the others {evidence})",
                checked,
            )
        return warned(f"Saturation point: not reached ({evidence})", checked)


def saturation_verdict(levels: list[tuple[int, Level]]) -> Saturation:
    """The first level past saturation by every piece of evidence (level_saturation), in ascending load."""
    decreased = saturation_point([lv.output_tok_s for _, lv in levels], SATURATION_TOLERANCE)
    unmeasured = tuple(i for i, (_, lv) in enumerate(levels) if lv.flow is None)
    for i in range(len(levels)):
        why = level_saturation(levels, i, decreased)
        if why:
            return Saturation(i, tuple(why), unmeasured, decreased == i)
    return Saturation(None, (), unmeasured)


@dataclass(frozen=True)
class Points:
    """The sweep's marked levels, by index in ascending load (None: no such level): the knee, the saturation point
    (with its evidence), the first level saturated by 5.2.3.1's criteria, and the optimal operating point."""

    knee: int | None
    saturation: Saturation
    first: int | None
    best: int | None


def table5_row(lv: Level) -> list[str]:
    """One level's row of Table 5: offered and achieved load, latency percentiles, success and queue trend."""
    s = lv.run.summary
    return [
        f"{lv.offered:g}",
        f"{lv.output_tok_s:.0f}",
        fmt_ms(s.ttft_ms.p50, ""),
        fmt_ms(s.ttft_ms.p99, ""),
        fmt_ms(s.tpot_ms.p50, ""),
        fmt_ms(s.tpot_ms.p99, ""),
        fmt_ms(s.e2e_ms.p50, ""),
        fmt_ms(s.e2e_ms.p99, ""),
        fmt_pct(s.requests.success_rate),
        "growing" if lv.growing else "stable",
    ]


def table5(levels: list[tuple[int, Level]]) -> Table:
    """Table 5 (Throughput-Latency Table): a row per level, with the notes on what its figures mean."""
    return Table(
        caption="Table 5: Throughput-Latency Table",
        headers=[
            "Offered (r/s)",
            "Achieved (tok/s)",
            "TTFT P50",
            "TTFT P99",
            "TPOT P50",
            "TPOT P99",
            "E2E P50",
            "E2E P99",
            "Success",
            "Queue",
        ],
        rows=[table5_row(lv) for _, lv in levels],
        notes=[
            'latencies in ms; the knee uses the end-to-end P99 (the draft: "P99 latency"); achieved: output '
            "tokens delivered per second of each level's steady window (sending less its first 10%)",
            *few_samples(levels),
        ],
    )


def tradeoff_findings(
    measured: dict[str, Any],
    levels: list[tuple[int, Level]],
    p99: list[float | None],
    achieved: list[float],
    points: Points,
    slo: str,
) -> list[str]:
    """The capacity estimate's source, the knee, the saturation point, the first saturated level and the optimal
    operating point under `slo`, in words."""
    rate = [lv.offered for _, lv in levels]
    first, best = points.first, points.best
    return [
        f"capacity estimate {measured['capacity']:g} req/s from {measured['source']}",
        knee_finding(levels, p99, points.knee),
        points.saturation.finding(levels),
        f"First saturated level (5.2.3.1): {rate[first]:g} req/s ({'; '.join(levels[first][1].saturation(None))})"
        if first is not None
        else "First saturated level (5.2.3.1): none (no level's queue grew or fell behind its arrivals)",
        f"Optimal operating point: {rate[best]:g} req/s, {achieved[best]:.0f} tok/s under {slo}"
        if best is not None
        else f"Optimal operating point: no level met {slo}",
    ]


def tradeoff_figures(
    capacity: float, levels: list[tuple[int, Level]], p99: list[float | None], achieved: list[float], points: Points
) -> dict[str, Any]:
    """The sweep's key figures by name: the marked levels' rates, the E2E P99 range and the achieved throughput."""
    rate = [lv.offered for _, lv in levels]
    knee, sat, first, best = points.knee, points.saturation.index, points.first, points.best
    return {
        "capacity_req_s": capacity,
        "levels": len(levels),
        "knee_rate": rate[knee] if knee is not None else None,
        "knee_index": knee,
        "saturation_rate": rate[sat] if sat is not None else None,
        "saturation_reasons": "; ".join(points.saturation.reasons) or None,
        "first_saturated_rate": rate[first] if first is not None else None,
        "optimal_rate": rate[best] if best is not None else None,
        "min_e2e_p99_ms": min((v for v in p99 if v is not None), default=None),
        "last_e2e_p99_ms": p99[-1] if p99 else None,
        "peak_output_tok_s": max(achieved, default=None),
        "last_output_tok_s": achieved[-1] if achieved else None,
    }


def tradeoff_chart(levels: list[tuple[int, Level]], achieved: list[float], points: Points) -> Chart:
    """TTFT and TPOT percentiles against achieved throughput, one point per level, the knee, saturation and optimal
    levels marked."""
    rate = [lv.offered for _, lv in levels]
    summaries = [lv.run.summary for _, lv in levels]
    marked = (("knee", points.knee), ("saturation", points.saturation.index), ("optimal", points.best))
    return Chart(
        id="tradeoff-curve",
        title="Throughput-latency trade-off (draft 5.3): latency percentiles against achieved throughput",
        x_title="achieved output throughput (tok/s)",
        panels=["TTFT (ms)", "TPOT (ms)"],
        traces=[
            *percentile_traces(achieved, summaries, "ttft", 1),
            *percentile_traces(achieved, summaries, "tpot", 2),
        ],
        marks=[
            Mark(label=f"{name} ({rate[i]:g} req/s)", x=round(achieved[i], 3)) for name, i in marked if i is not None
        ],
        note="One point per load level, in ascending offered load; the knee is judged on the E2E P99 (Table 5).",
    )


def spans_to_saturation(levels: list[tuple[int, Level]]) -> Requirement:
    """5.3.2: the levels start at 10% of capacity or lower and reach saturation (saturation_verdict); not verifiable
    where no measured level saturated and some level sent too few requests to show it."""
    text = "levels span low load (10% of capacity) to saturation"
    pcts = [p for p, _ in levels]
    saturation = saturation_verdict(levels)
    low = bool(pcts) and min(pcts) <= 10
    met = low and saturation.index is not None
    span = f"{min(pcts)}%..{max(pcts)}% of capacity; " if pcts else "no levels; "
    if saturation.index is not None:
        why = f"saturated from {pcts[saturation.index]}% ({'; '.join(saturation.reasons)})"
    elif saturation.unmeasured and low:
        few = ", ".join(f"{pcts[i]}%" for i in saturation.unmeasured)
        return not_verifiable("MUST", "5.3.2", text, f"{span}no measured level saturated; {few} sent under 3 requests")
    else:
        why = "no level saturated: raise the levels or the capacity estimate"
    return requirement("MUST", "5.3.2", text, met, span + why)


def first_saturated(levels: list[tuple[int, Level]]) -> int | None:
    """The first level (in ascending load) that shows saturation by 5.2.3.1's queue and completion criteria."""
    return next((i for i, (_, lv) in enumerate(levels) if lv.saturation(None)), None)


def few_samples(levels: list[tuple[int, Level]]) -> list[str]:
    """Levels whose P99 rests on fewer than 100 requests (it is then their slowest few), said in the table's notes."""
    few = [(p, lv.run.summary.requests.ok) for p, lv in levels if lv.run.summary.requests.ok < 100]
    return (
        ["few samples: " + ", ".join(f"{p}% ({n} requests)" for p, n in few) + "; a P99 of under 100 is their maximum"]
        if few
        else []
    )


SUITE = TradeoffSuite()
