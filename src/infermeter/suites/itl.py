"""Inter-Token Latency Distribution (the IETF draft, section 5.4): at 25/50/75/90% of saturation (given, a throughput
test's, or the embedded emulator's measured by a capacity probe), Table 6, the per-request jitter and maximum-pause
distributions, the P99/P50 tail ratio, and per level a modality verdict and the tail's class (exponential or heavy)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar

import numpy as np
from pydantic import Field

from infermeter.chart import Chart, Trace
from infermeter.config import checks
from infermeter.config.section import Flag
from infermeter.emulator.config import EmulatorConfig
from infermeter.errors import UserError
from infermeter.metrics.latency import content_chunks, itl, token_times
from infermeter.metrics.modality import METHOD, modality
from infermeter.metrics.tail import METHOD as TAIL_METHOD
from infermeter.metrics.tail import tail_shape
from infermeter.report.console import ITL_OPTION_NAMES, itl_name, table6_itl
from infermeter.report.tables import as_table, fmt_ms, fmt_num
from infermeter.suite_result import Analysis, Requirement, Table
from infermeter.suites.charts import COLORS, percentile_traces
from infermeter.suites.common import at_least, from_flag, headline, requirement
from infermeter.suites.framework import SuiteParams
from infermeter.suites.lab import Lab, Run
from infermeter.suites.probe import Capacity, emulator_capacity
from infermeter.suites.throughput import small_engine
from infermeter.suites.tradeoff import from_suite
from infermeter.units import MS_PER_S
from infermeter.workload.spec import generate
from infermeter.workload.standard import resolve

MIN_OUTPUT = 50  # 5.4.2: requests MUST generate at least 50 output tokens


class ItlParams(SuiteParams):
    saturation: Annotated[float | None, Flag("the saturation rate, req/s (else --from)", checks.RATE)] = None
    from_: Annotated[
        Path | None, from_flag("a `throughput` suite directory whose sustainable rate is the saturation")
    ] = None
    levels: Annotated[list[int], Flag("load levels in % of saturation", checks.int_list(1, 200))] = Field(
        default_factory=lambda: [25, 50, 75, 90]
    )
    workload: Annotated[str, Flag("standard workload name or workload file", checks.WORKLOAD)] = "synthetic-uniform"
    output_tokens: Annotated[
        int | None, Flag("fixed output length instead of the workload's (>= 50)", checks.integer(MIN_OUTPUT, 100_000))
    ] = None
    requests: Annotated[int, Flag("requests per level (the draft: >= 100)", checks.REQUESTS)] = 100

    QUICK: ClassVar[dict[str, Any]] = {"requests": 24}


def _levels(params: ItlParams) -> list[int]:
    return sorted(set(params.levels))


class ItlSuite:
    name = "itl"
    section = "5.4"
    reference = "IETF draft, section 5.4"
    title = "Inter-Token Latency Distribution"
    summary = "ITL at 25/50/75/90% of saturation: Table 6, jitter, max pause, modality, tail"
    params = ItlParams

    def emulator(self, params: ItlParams) -> EmulatorConfig:
        return small_engine()

    def workload(self, params: ItlParams) -> dict[str, Any]:
        """The workload, refused before anything runs when its requests could produce fewer than 50 tokens."""
        if params.output_tokens is not None:
            spec = resolve(params.workload)
            inputs = generate(spec, 1, 0).input_tokens
            return {
                "input_tokens": int(inputs[0]) if spec.name != "synthetic-uniform" else 256,
                "output_tokens": params.output_tokens,
            }
        least = int(generate(resolve(params.workload), 10_000, 0).output_tokens.min())
        if least < MIN_OUTPUT:
            raise UserError(
                f"--workload {params.workload} draws outputs as short as {least} tokens: the IETF draft (5.4.2) "
                f"requires >= {MIN_OUTPUT} per request; give another workload or --output-tokens N >= {MIN_OUTPUT}"
            )
        return {"workload": params.workload}

    def saturation(self, lab: Lab, params: ItlParams, work: dict[str, Any]) -> Capacity:
        if params.saturation is not None:
            return Capacity(params.saturation, "given (--saturation)")
        if params.from_ is not None:
            rate = from_suite(params.from_, "sustainable_rate")
            return Capacity(rate, f"the throughput test (5.2) in {params.from_}")
        if lab.embedded:
            return emulator_capacity(lab, work)
        raise UserError("give the saturation rate: --saturation R, or --from DIR of a `throughput` test")

    def procedure(self, lab: Lab, params: ItlParams) -> dict[str, Any]:
        work = self.workload(params)
        sat = self.saturation(lab, params, work)
        runs = []
        for pct in _levels(params):
            rate = float(f"{sat.rate * pct / 100:.4g}")
            cfg = lab.config(workload=work, load={"rate": rate, "requests": params.requests})
            runs.append(
                (pct, lab.run(f"level-{pct}pct", f"{pct}% of saturation: {rate:g} req/s", cfg, level=f"{pct}%"))
            )
        return {"saturation": sat, "runs": runs}

    def analyze(self, measured: dict[str, Any], params: ItlParams) -> Analysis:
        sat: Capacity = measured["saturation"]
        tables: list[Table] = []
        findings = [f"saturation {sat.rate:g} req/s: {sat.source}"]
        figures: dict[str, Any] = {"saturation_req_s": sat.rate}
        rows: list[list[str]] = []
        names: set[str] = set()
        for pct, run in measured["runs"]:
            level = itl_level(pct, run)
            names.add(level.name)
            tables.append(level.table6)
            rows.append(level.row)
            findings.append(level.finding)
            figures.update(level.figures)
        label = " / ".join(sorted(names)) or "ITL"
        tables.append(jitter_table(label, rows))
        methods = {ITL_OPTION_NAMES[r.summary.itl_option] for _, r in measured["runs"]}
        findings.append(f"{label} measured with {', '.join(sorted(methods))} (draft 4.6.3); TTFT is never a sample")
        chart = itl_chart(label, measured["runs"])
        units = {"saturation_req_s": "req/s", "itl_p50_ms_": "ms", "itl_p99_p50_ratio_": "ratio"}
        return Analysis(
            tables=tables, findings=findings, figures=figures, headline=headline(figures, units), charts=[chart]
        )

    def requirements(
        self, measured: dict[str, Any], analysis: Analysis, params: ItlParams, quick: bool
    ) -> list[Requirement]:
        runs: list[Run] = [r for _, r in measured["runs"]]
        short = sum(int(np.sum(r.columns().ok & (r.columns().output_tokens < MIN_OUTPUT))) for r in runs)
        fewest = min((r.summary.requests.ok for r in runs), default=0)
        samples = min((r.summary.itl_ms.n for r in runs), default=0)
        counted = [(r.summary.itl_ms.n, gaps_expected(r)) for r in runs]
        extra = [(n, want) for n, want in counted if n != want]
        chunking = [r for r in runs if r.summary.chunking is None or not r.summary.chunking.chunks]
        done = [pct for pct, _ in measured["runs"]]
        return [
            requirement(
                "MUST",
                "5.4.2",
                "every request generates at least 50 output tokens",
                bool(runs) and short == 0,
                "all did" if short == 0 else f"{short} requests ended with fewer (EOS or errors)",
            ),
            at_least("SHOULD", "5.4.2", "at least 100 requests per level", fewest, 100, "requests (fewest level)"),
            at_least("SHOULD", "5.4.2", "5000+ ITL samples per level", samples, 5000, "samples (fewest level)"),
            requirement(
                "MUST",
                "5.4.3",
                "TTFT is not included in ITL",
                bool(runs) and not extra,
                f"{sum(n for n, _ in counted)} samples, one per gap between consecutive tokens (or chunks) of a "
                "request: none from submission to the first token"
                if not extra
                else f"a level has {extra[0][0]} samples where its gaps between tokens number {extra[0][1]}",
            ),
            requirement(
                "MUST",
                "4.6.2, 4.6.3",
                "the chunking and the ITL measurement option are declared",
                bool(runs) and not chunking,
                analysis.findings[-1] + "; tokens per chunk in each level's Table 6"
                if not chunking
                else f"{len(chunking)} levels recorded no content chunks: tokens per chunk unknown",
            ),
            requirement(
                "SHOULD",
                "5.4.2",
                "several load levels: 25, 50, 75, 90% of saturation",
                {25, 50, 75, 90} <= set(done),
                ", ".join(f"{p}%" for p in done),
            ),
        ]


@dataclass(frozen=True)
class ItlLevel:
    """One load level's ITL analysis: its Table 6, its row of the jitter table, its finding and its figures."""

    name: str  # the ITL's name under the run's option (itl_name)
    table6: Table
    row: list[str]
    finding: str
    figures: dict[str, Any]


def itl_level(pct: int, run: Run) -> ItlLevel:
    """A level's Table 6, its ITL percentiles, tail ratio, jitter and maximum pause, modality verdict and tail class."""
    s = run.summary
    name = itl_name(s.itl_option)
    samples = itl(run.columns(), s.itl_option).values * MS_PER_S
    mode, tail = modality(samples), tail_shape(samples)
    ratio = s.itl_ms.p99 / s.itl_ms.p50 if s.itl_ms.p50 and s.itl_ms.p99 else None
    t6 = as_table(table6_itl(s))
    t6.caption = f"{t6.caption}, {pct}% of saturation"
    row = [
        f"{pct}%",
        fmt_ms(s.itl_ms.p50),
        fmt_ms(s.itl_ms.p99),
        fmt_num(ratio),
        *[fmt_ms(s.jitter_ms.percentile(p)) for p in (50, 95, 99)],
        *[fmt_ms(s.max_pause_ms.percentile(p)) for p in (50, 95, 99)],
        mode.verdict,
        tail.kind,
    ]
    figures = {
        f"itl_p50_ms_{pct}": s.itl_ms.p50,
        f"itl_p99_p50_ratio_{pct}": ratio,
        f"modality_{pct}": mode.verdict,
        f"tail_{pct}": tail.kind,
        f"tail_shape_{pct}": tail.xi,
    }
    finding = f"{pct}% of saturation: {name} {mode.describe()}; tail {tail.describe()}"
    return ItlLevel(name, t6, row, finding, figures)


def jitter_table(label: str, rows: list[list[str]]) -> Table:
    """The levels' per-request jitter and maximum pause, tail ratio, modality and tail (5.4.4.2-3), `label` the ITL's
    name."""
    return Table(
        caption="Per-request jitter and maximum pause (draft 5.4.4.2), tail ratio, modality and tail (5.4.4.3)",
        headers=[
            "Load",
            f"{label} P50",
            f"{label} P99",
            "P99/P50",
            "Jitter P50",
            "Jitter P95",
            "Jitter P99",
            "Max pause P50",
            "Max pause P95",
            "Max pause P99",
            "Modality",
            "Tail",
        ],
        rows=rows,
        notes=[f"modality: {METHOD}", f"tail: {TAIL_METHOD}"],
    )


def itl_chart(label: str, runs: list[tuple[int, Run]]) -> Chart:
    """ITL percentiles and the per-request maximum pause's against load, one point per level."""
    pcts = [float(pct) for pct, _ in runs]
    summaries = [run.summary for _, run in runs]
    return Chart(
        id="itl-levels",
        title=f"{label} and per-request maximum pause against load (draft 5.4)",
        x_title="load (% of saturation)",
        panels=[f"{label} (ms)", "max pause per request (ms)"],
        traces=[
            *percentile_traces(pcts, summaries, "itl", 1, (50.0, 95.0, 99.0), label),
            *[
                Trace(
                    name=f"max pause P{p:g}",
                    kind="lines+markers",
                    x=pcts,
                    row=2,
                    color=COLORS[p],
                    y=[s.max_pause_ms.percentile(p) for s in summaries],
                )
                for p in (50.0, 99.0)
            ],
        ],
    )


def gaps_expected(run: Run) -> int:
    """The ITL samples a run's records allow: one per gap between consecutive tokens of a successful request
    (between consecutive content events under option A), never the interval before the first."""
    cols, option = run.columns(), run.summary.itl_option
    source = content_chunks(cols) if option == "A" else token_times(cols, option)
    return int(np.maximum(source.lengths[cols.ok] - 1, 0).sum())


SUITE = ItlSuite()
