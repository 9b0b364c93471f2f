"""Output Token Throughput (the IETF draft, section 5.2): a binary search on the open-loop rate (or the closed-loop
concurrency) for the highest load the server sustains: without an SLO the highest load that is not saturated
(5.2.3.1), with a TTFT/TPOT P99 bound the highest that meets it.  Tables 3 and 4 and the search itself."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Literal

from infermeter.config import checks
from infermeter.config.section import Flag
from infermeter.emulator.config import EmulatorConfig
from infermeter.engine.config import EngineConfig
from infermeter.metrics.steady_state import STABILITY_SLICES, STABLE_CV
from infermeter.report.tables import fmt_ms, fmt_pct
from infermeter.suite_result import Analysis, Requirement, Table
from infermeter.suites.charts import search_chart
from infermeter.suites.common import at_least, headline, percentiles_row, requirement
from infermeter.suites.framework import SuiteParams
from infermeter.suites.lab import Lab, Run
from infermeter.suites.levels import Level, measure
from infermeter.suites.search import bisect

MS = checks.number(0, 3.6e6, lo_open=True, what="milliseconds")
SMALL_BATCH = 4  # sequences
SMALL_STEP_S = 0.0015  # a decode step's fixed cost


def small_engine(**update: Any) -> EmulatorConfig:
    """The embedded emulator as a small, fast engine: 4 sequences of 1.5 ms steps saturate near 17 req/s on the
    Synthetic-Uniform workload (2,700 tokens/s), a load a 2-core client sends and reads with room to spare, and a
    request lasts about a quarter of a second, so a level of a few seconds holds many of them."""
    engine = EngineConfig.model_validate(
        {"scheduler": {"name": "continuous", "max_num_seqs": SMALL_BATCH}, "iteration_model": {"fixed": SMALL_STEP_S}}
    )
    return EmulatorConfig(engine=engine).model_copy(update=update)


class SweepParams(SuiteParams):
    """What every load sweep shares: the workload, the time per level, the SLO."""

    workload: Annotated[str, Flag("standard workload name or workload file", checks.WORKLOAD)] = "synthetic-uniform"
    duration: Annotated[float, Flag("seconds of load per level (the draft: >= 60)", checks.SECONDS)] = 60.0
    ttft_slo: Annotated[float | None, Flag("TTFT P99 bound in ms (the draft's optional latency constraint)", MS)] = None
    tpot_slo: Annotated[float | None, Flag("TPOT P99 bound in ms", MS)] = None

    def run_workload(self) -> dict[str, Any]:
        """The workload every level sends: the one asked for (--quick shortens levels, never changes requests)."""
        return {"workload": self.workload}

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

    QUICK: ClassVar[dict[str, Any]] = {"duration": 4.0, "start": 4.0, "tolerance": 0.2, "max_probes": 6}


@dataclass
class Search:
    """The levels of a search, each with its verdict and why; the highest that passed; why it stopped early."""

    levels: list[tuple[Level, list[str]]] = field(default_factory=list)
    sustainable: Level | None = None
    note: str = ""

    @property
    def saturated_at(self) -> float | None:
        return min((lv.offered for lv, why in self.levels if why), default=None)


def search_levels(lab: Lab, params: ThroughputParams, tag: str = "", target: dict[str, Any] | None = None) -> Search:
    """The search of 5.2.3: each probe a run of `duration` seconds; the decisions use only the runs, so a resumed
    suite asks for the same levels.  Each probe's level is named by its place in the search ("probe 3"); `target`
    holds the emulator, URL or disclosures of the system searched when they are not the suite's own."""
    out = Search()
    closed = params.search == "concurrency"

    def check(x: float) -> bool:
        load: dict[str, Any] = {"duration": params.duration, "requests": None}
        load.update({"concurrency": int(x)} if closed else {"rate": x})
        cfg = lab.config(workload=params.run_workload(), load=load, **(target or {}))
        name = f"c{int(x)}" if closed else f"r{x:g}"
        what = f"{'concurrency ' if closed else ''}{x:g}{'' if closed else ' req/s'}"
        position = f"{tag.replace('-', ' ')}probe {len(out.levels) + 1}"
        run = lab.run(f"{tag}search-{name}", f"search: {what}", cfg, level=position)
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
    out.note = bracket.note
    return out


def search_table(search: Search, unit: str) -> Table:
    rows = []
    for level, why in sorted(search.levels, key=lambda lw: lw[0].offered):
        s = level.run.summary
        rows.append(
            [
                f"{level.offered:g}",
                f"{level.steady.req_s:.2f}",
                f"{level.steady.output_tok_s:.0f}",
                "n/a" if level.steady.cv is None else f"{100 * level.steady.cv:.1f}%",
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
            "Throughput CV",
            "Queue",
            "Completion",
            "TTFT P99",
            "E2E P99",
            "Result",
        ],
        rows=rows,
        notes=[
            "achieved, output tok/s and CV over each level's steady window (sending less its first 10%); CV: the "
            f"output throughput's variation across {STABILITY_SLICES} equal slices of it (5.2.3.2: stable <= "
            f"{100 * STABLE_CV:g}%)"
        ],
    )


def gpu_count(run: Run) -> tuple[int | None, str]:
    """The GPUs the throughput is shared by (draft 5.2.4.2, 6.2), and where the count came from."""
    if run.info.kind == "emulated":
        return 1, "the embedded emulator models one GPU"
    gpus = run.summary.energy.gpus if run.summary.energy is not None else None
    if gpus:
        return gpus, "the server's GPU count as declared (--gpus)"
    return None, "the server's GPU count was not declared: give --gpus"


def table3(best: Level, params: ThroughputParams, unit: str, gpus: int | None, gpu_source: str) -> Table:
    """Table 3 (Throughput Summary) over the sustainable level's steady window, with the latency constraint the search
    held and where the GPU count came from."""
    s, w = best.run.summary, best.steady
    util = s.server_metrics.batch_utilization if s.server_metrics else None
    rows = [
        ["Max Output Throughput", f"{w.output_tok_s:.0f} tok/s"],
        ["Max Request Throughput", f"{w.req_s:.2f} req/s"],
        ["Max Input Throughput", f"{w.input_tok_s:.0f} tok/s"],
        ["Sustainable Load", f"{best.offered:g} {unit}"],
        ["Tokens per GPU-second", f"{w.output_tok_s / gpus:.0f} tok/s/GPU" if gpus else f"n/a ({gpu_source})"],
        ["Batch Utilization", fmt_pct(util) if util is not None else "not reported by the server"],
        ["Throughput Stability", "n/a" if w.cv is None else f"{100 * w.cv:.1f}% CV"],
    ]
    constraint = [f"TTFT P99 <= {params.ttft_slo:g} ms"] if params.ttft_slo else []
    constraint += [f"TPOT P99 <= {params.tpot_slo:g} ms"] if params.tpot_slo else []
    return Table(
        caption="Table 3: Throughput Summary",
        headers=["Metric", "Value"],
        rows=rows,
        notes=[
            f"latency constraint: {', '.join(constraint) or 'none (saturation search)'}",
            f"over the sustainable level's {w.describe()}",
            f"GPUs: {gpus if gpus else 'unknown'} ({gpu_source})",
        ],
    )


def table4(best: Level) -> Table:
    """Table 4 (Latency at Maximum Throughput): the requests sent in the sustainable level's steady window."""
    return Table(
        caption="Table 4: Latency at Maximum Throughput",
        headers=["Metric", "P50", "P95", "P99"],
        rows=[
            percentiles_row("TTFT", best.steady_latency("ttft")),
            percentiles_row("TPOT", best.steady_latency("tpot")),
            percentiles_row("End-to-End", best.steady_latency("e2e")),
        ],
        notes=[f"the {int(best.steady.sent.sum())} requests sent in the steady window of the sustainable level"],
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
        return search_levels(lab, params)

    def analyze(self, search: Search, params: ThroughputParams) -> Analysis:
        unit = "concurrency" if params.search == "concurrency" else "req/s"
        best = search.sustainable
        saturated_at = search.saturated_at
        tables = [search_table(search, unit)]
        figures: dict[str, Any] = {"sustainable_load": best.offered if best else None, "saturated_at": saturated_at}
        findings = []
        if best is None:
            findings.append("no level probed was sustainable: lower --start")
        else:
            w = best.steady
            gpus, gpu_source = gpu_count(best.run)
            tables += [table3(best, params, unit, gpus, gpu_source), table4(best)]
            findings.append(f"sustainable load {best.offered:g} {unit}: {w.output_tok_s:.0f} output tok/s")
            findings.append(f"at the sustainable level: {w.describe()}")
            figures.update(
                max_output_tok_s=w.output_tok_s,
                max_req_s=w.req_s,
                max_input_tok_s=w.input_tok_s,
                throughput_cv=w.cv,
                output_tok_per_gpu_s=w.output_tok_s / gpus if gpus else None,
                sustainable_rate=best.offered if unit == "req/s" else None,
            )
        if saturated_at is not None:
            why = next(w for lv, w in search.levels if lv.offered == saturated_at)
            findings.append(f"saturated at {saturated_at:g} {unit}: {'; '.join(why)}")
            figures["saturation_reasons"] = "; ".join(why)
        chart = search_chart(
            "throughput-search",
            "The search for the maximum sustainable load (draft 5.2)",
            unit,
            [(lv.offered, lv.run.summary, why) for lv, why in search.levels],
            params.ttft_slo,
        )
        units = {
            "max_output_tok_s": "tok/s",
            "max_req_s": "req/s",
            "max_input_tok_s": "tok/s",
            "output_tok_per_gpu_s": "tok/s/GPU",
            "sustainable_load": unit,
            "saturated_at": unit,
            "throughput_cv": "share",
        }
        return Analysis(
            tables=tables,
            findings=findings,
            figures=figures,
            headline=headline(figures, units),
            notes=[search.note] if search.note else [],
            charts=[chart],
        )

    def requirements(
        self, search: Search, analysis: Analysis, params: ThroughputParams, quick: bool
    ) -> list[Requirement]:
        shortest = min((lv.run.summary.duration_s for lv, _ in search.levels), default=0.0)
        best = search.sustainable
        found = best is not None and search.saturated_at is not None
        return [
            at_least("MUST", "5.2.2.1", "test duration of at least 60 seconds per level", round(shortest, 1), 60, "s"),
            requirement(
                "MUST",
                "5.2.3",
                "binary search to the maximum sustainable load",
                found,
                f"bracketed between {best.offered:g} (passed) and {search.saturated_at:g} (failed)"
                if found and best is not None
                else "the search did not bracket it: " + (search.note or "no level passed"),
            ),
            steady_state(best),
            requirement(
                "SHOULD",
                "5.2.4.2",
                "tokens per GPU-second (output throughput divided by the GPU count)",
                best is not None and gpu_count(best.run)[0] is not None,
                gpu_count(best.run)[1] if best is not None else "no sustainable level",
            ),
            requirement(
                "SHOULD",
                "5.2.2.1",
                "300 seconds per level for stable measurement",
                shortest >= 300,
                f"shortest level {shortest:.0f} s",
            ),
        ]


def steady_state(level: Level | None) -> Requirement:
    """5.2.3.2 at the level reported: the queue not growing and the throughput stable, after the first 10%."""
    text = "steady state at the level reported: queue stable, throughput stable, the first 10% excluded"
    met = level is not None and not level.growing and level.steady.stable
    if level is None:
        return requirement("MUST", "5.2.3.2", text, met, "no sustainable level to verify")
    q = level.queue
    queue = f"queue {'growing' if level.growing else 'stable'} ({q.start_level:.1f} -> {q.end_level:.1f} in flight)"
    return requirement("MUST", "5.2.3.2", text, met, f"{queue}; {level.steady.describe()}")


SUITE = ThroughputSuite()
