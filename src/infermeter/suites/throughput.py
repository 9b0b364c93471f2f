"""Output Token Throughput (the IETF draft, section 5.2): a binary search on the open-loop rate (or the closed-loop
concurrency) for the highest load the server sustains: without an SLO the highest load that is not saturated
(5.2.3.1), with a TTFT/TPOT P99 bound the highest that meets it.  Tables 3 and 4 and the search itself."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from infermeter.config import checks
from infermeter.config.section import Flag
from infermeter.emulator.config import EmulatorConfig
from infermeter.engine.config import EngineConfig
from infermeter.report.tables import fmt_ms, fmt_pct
from infermeter.suites.charts import search_chart
from infermeter.suites.common import at_least, percentiles_row, requirement
from infermeter.suites.framework import Analysis, Requirement, SuiteParams, Table
from infermeter.suites.lab import Lab
from infermeter.suites.levels import Level, measure
from infermeter.suites.search import bisect

MS = checks.number(0, 3.6e6, lo_open=True, what="milliseconds")
QUICK_WORKLOAD = {"input_tokens": 128, "output_tokens": 32}


def small_engine(**update: Any) -> EmulatorConfig:
    """The embedded emulator with a batch of 4 sequences: saturates at a rate a 2-core client drives easily."""
    engine = EngineConfig.model_validate({"scheduler": {"name": "continuous", "max_num_seqs": 4}})
    return EmulatorConfig(engine=engine).model_copy(update=update)


class SweepParams(SuiteParams):
    """What every load sweep shares: the workload, the time per level, the SLO."""

    workload: Annotated[str, Flag("standard workload name or workload file", checks.WORKLOAD)] = "synthetic-uniform"
    duration: Annotated[float, Flag("seconds of load per level (the draft: >= 60)", checks.SECONDS)] = 60.0
    ttft_slo: Annotated[float | None, Flag("TTFT P99 bound in ms (the draft's optional latency constraint)", MS)] = None
    tpot_slo: Annotated[float | None, Flag("TPOT P99 bound in ms", MS)] = None

    def run_workload(self, quick: bool) -> dict[str, Any]:
        return dict(QUICK_WORKLOAD) if quick and self.workload == "synthetic-uniform" else {"workload": self.workload}

    def meets_slo(self, level: Level) -> list[str]:
        s, why = level.run.summary, []
        if self.ttft_slo is not None and (s.ttft_ms.p99 is None or s.ttft_ms.p99 > self.ttft_slo):
            why.append(f"TTFT P99 {fmt_ms(s.ttft_ms.p99)} > {self.ttft_slo:g} ms")
        if self.tpot_slo is not None and (s.tpot_ms.p99 is None or s.tpot_ms.p99 > self.tpot_slo):
            why.append(f"TPOT P99 {fmt_ms(s.tpot_ms.p99)} > {self.tpot_slo:g} ms")
        return why


class ThroughputParams(SweepParams):
    search: Annotated[
        Literal["rate", "concurrency"],
        Flag("search the open-loop rate or the closed-loop concurrency", checks.choice("rate", "concurrency")),
    ] = "rate"
    start: Annotated[float, Flag("first load probed (req/s or concurrency)", checks.RATE)] = 1.0
    max_load: Annotated[float, Flag("never probe above this load", checks.RATE)] = 1000.0
    tolerance: Annotated[
        float, Flag("stop when (fail - pass) / fail is below this", checks.number(0, 1, lo_open=True))
    ] = 0.1
    max_probes: Annotated[int, Flag("at most this many levels", checks.integer(2, 100))] = 12

    QUICK: ClassVar[dict[str, Any]] = {"duration": 3.0, "start": 4.0, "tolerance": 0.2, "max_probes": 7}


class Search:
    """The levels of a search, each with its verdict and why."""

    def __init__(self) -> None:
        self.levels: list[tuple[Level, list[str]]] = []
        self.sustainable: Level | None = None


def search_levels(lab: Lab, params: ThroughputParams, quick: bool, tag: str = "") -> Search:
    """The search of 5.2.3: each probe a run of `duration` seconds; the decisions use only the runs, so a resumed
    suite asks for the same levels."""
    out = Search()
    closed = params.search == "concurrency"

    def check(x: float) -> bool:
        load: dict[str, Any] = {"duration": params.duration, "requests": None}
        load.update({"concurrency": int(x)} if closed else {"rate": x})
        cfg = lab.config(workload=params.run_workload(quick), load=load)
        name = f"c{int(x)}" if closed else f"r{x:g}"
        run = lab.run(
            f"{tag}search-{name}", f"search: {'concurrency ' if closed else ''}{x:g}{'' if closed else ' req/s'}", cfg
        )
        level = measure(x, run)
        passed_below = [lv for lv, why in out.levels if not why and lv.offered < x]
        baseline = passed_below[0].run.summary.e2e_ms.p50 if passed_below else None
        why = level.saturation(baseline) + params.meets_slo(level)
        out.levels.append((level, why))
        if not why and (out.sustainable is None or x > out.sustainable.offered):
            out.sustainable = level
        return not why

    bracket = bisect(
        check, params.start, params.max_load, tolerance=params.tolerance, max_probes=params.max_probes, integer=closed
    )
    out.note = bracket.note  # type: ignore[attr-defined]
    return out


def search_table(search: Search, unit: str) -> Table:
    rows = []
    for level, why in sorted(search.levels, key=lambda lw: lw[0].offered):
        s = level.run.summary
        rows.append(
            [
                f"{level.offered:g}",
                f"{s.throughput.req_s:.2f}",
                f"{level.output_tok_s:.0f}",
                "growing" if level.growing else "stable",
                fmt_pct(level.completion),
                fmt_ms(s.ttft_ms.p99),
                fmt_ms(s.e2e_ms.p99),
                "pass" if not why else "FAIL: " + "; ".join(why),
            ]
        )
    return Table(
        caption="Search levels (draft 5.2.3; saturation per 5.2.3.1, the first 10% of each level excluded)",
        headers=[
            f"Offered ({unit})",
            "Achieved req/s",
            "Output tok/s",
            "Queue",
            "Completion",
            "TTFT P99",
            "E2E P99",
            "Result",
        ],
        rows=rows,
    )


class ThroughputSuite:
    name = "throughput"
    section = "5.2"
    reference = "IETF draft, section 5.2"
    title = "Output Token Throughput"
    summary = "binary search for the maximum sustainable load, with or without an SLO (Tables 3-4)"
    params = ThroughputParams

    def emulator(self, params: ThroughputParams) -> EmulatorConfig:
        return small_engine()

    def procedure(self, lab: Lab, params: ThroughputParams) -> Search:
        return search_levels(lab, params, params.duration < 60)

    def analyze(self, search: Search, params: ThroughputParams) -> Analysis:
        unit = "concurrency" if params.search == "concurrency" else "req/s"
        best = search.sustainable
        failed = [lv for lv, why in search.levels if why]
        saturated_at = min((lv.offered for lv in failed), default=None)
        tables = [search_table(search, unit)]
        figures: dict[str, Any] = {"sustainable_load": best.offered if best else None, "saturated_at": saturated_at}
        findings = []
        if best is None:
            findings.append("no level probed was sustainable: lower --start")
        else:
            s = best.run.summary
            gpus = best.run.summary.energy.gpus if best.run.summary.energy else None
            gpus = gpus or (1 if best.run.info.kind == "emulated" else None)
            util = s.server_metrics.batch_utilization if s.server_metrics else None
            rows = [
                ["Max Output Throughput", f"{s.throughput.output_tok_s:.0f} tok/s"],
                ["Max Request Throughput", f"{s.throughput.req_s:.2f} req/s"],
                ["Max Input Throughput", f"{s.throughput.input_tok_s:.0f} tok/s"],
                ["Sustainable Load", f"{best.offered:g} {unit}"],
                [
                    "Tokens per GPU-second",
                    f"{s.throughput.output_tok_s / gpus:.0f} tok/s/GPU" if gpus else "n/a (give --gpus)",
                ],
                ["Batch Utilization", fmt_pct(util) if util is not None else "not reported by the server"],
            ]
            constraint = [f"TTFT P99 <= {params.ttft_slo:g} ms"] if params.ttft_slo else []
            constraint += [f"TPOT P99 <= {params.tpot_slo:g} ms"] if params.tpot_slo else []
            tables.append(
                Table(
                    caption="Table 3: Throughput Summary",
                    headers=["Metric", "Value"],
                    rows=rows,
                    notes=[f"latency constraint: {', '.join(constraint) or 'none (saturation search)'}"],
                )
            )
            tables.append(
                Table(
                    caption="Table 4: Latency at Maximum Throughput",
                    headers=["Metric", "P50", "P95", "P99"],
                    rows=[
                        percentiles_row("TTFT", s.ttft_ms),
                        percentiles_row("TPOT", s.tpot_ms),
                        percentiles_row("End-to-End", s.e2e_ms),
                    ],
                )
            )
            findings.append(f"sustainable load {best.offered:g} {unit}: {s.throughput.output_tok_s:.0f} output tok/s")
            figures.update(
                max_output_tok_s=s.throughput.output_tok_s, sustainable_rate=best.offered if unit == "req/s" else None
            )
        if saturated_at is not None:
            why = next(w for lv, w in search.levels if lv.offered == saturated_at)
            findings.append(f"saturated at {saturated_at:g} {unit}: {'; '.join(why)}")
            figures["saturation_reasons"] = "; ".join(why)
        notes = [search.note] if getattr(search, "note", "") else []  # type: ignore[attr-defined]
        chart = search_chart(
            "throughput-search",
            "The search for the maximum sustainable load (draft 5.2)",
            unit,
            [(lv.offered, lv.run.summary, why) for lv, why in search.levels],
            params.ttft_slo,
        )
        return Analysis(tables=tables, findings=findings, figures=figures, notes=notes, charts=[chart])

    def requirements(
        self, search: Search, analysis: Analysis, params: ThroughputParams, quick: bool
    ) -> list[Requirement]:
        shortest = min((lv.run.summary.duration_s for lv, _ in search.levels), default=0.0)
        found = search.sustainable is not None and analysis.figures.get("saturated_at") is not None
        return [
            at_least("MUST", "5.2.2.1", "test duration of at least 60 seconds per level", round(shortest, 1), 60, "s"),
            requirement(
                "MUST",
                "5.2.3",
                "binary search to the maximum sustainable load",
                found,
                "bracketed between a passing and a failing level" if found else "the search did not bracket it",
            ),
            requirement(
                "MUST",
                "5.2.3.2",
                "steady state: the first 10% of each level excluded",
                True,
                "queue trend fitted after the first 10% of the sending window",
            ),
            requirement(
                "SHOULD",
                "5.2.2.1",
                "300 seconds per level for stable measurement",
                shortest >= 300,
                f"shortest level {shortest:.0f} s",
            ),
        ]


SUITE = ThroughputSuite()
