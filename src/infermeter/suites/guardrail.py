"""Guardrail Overhead (the IETF draft, section 5.10): baseline, input filter, output filter and full filtering at
25/50/75% of capacity: TTFT and E2E per configuration (Table 13), throughput reduction (Table 14), the overheads."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, ClassVar

import numpy as np
from pydantic import Field

from infermeter.config import checks
from infermeter.config.section import Flag
from infermeter.emulator.config import EmulatorConfig
from infermeter.errors import UserError
from infermeter.metrics import latency
from infermeter.metrics.columns import RecordColumns
from infermeter.report.chart import PALETTE, Chart, Trace
from infermeter.report.tables import fmt_ms, fmt_pct
from infermeter.suites.common import requirement
from infermeter.suites.framework import Analysis, Requirement, SuiteParams, Table
from infermeter.suites.lab import Lab, Run
from infermeter.suites.throughput import QUICK_WORKLOAD, small_engine

INPUT_FILTER_MS, OUTPUT_FILTER_MS = 40.0, 10.0  # the emulator's guardrails: before the engine, on every event
EMULATOR_CAPACITY = 20.0
CONFIGS = {"baseline": "Baseline", "input": "Input Filter", "output": "Output Filter", "full": "Full Filter"}


class GuardrailParams(SuiteParams):
    capacity: Annotated[float | None, Flag("the capacity the load levels are shares of, req/s", checks.RATE)] = None
    levels: Annotated[list[int], Flag("load levels in % of capacity", checks.int_list(1, 200))] = Field(
        default_factory=lambda: [25, 50, 75]
    )
    workload: Annotated[str, Flag("standard workload name or workload file", checks.WORKLOAD)] = "conversation"
    duration: Annotated[float, Flag("seconds per run", checks.SECONDS)] = 60.0
    url_baseline: Annotated[str | None, Flag("the server with every guardrail off", checks.url)] = None
    url_input_filter: Annotated[str | None, Flag("the server with input filtering only", checks.url)] = None
    url_output_filter: Annotated[str | None, Flag("the server with output filtering only", checks.url)] = None
    url_full: Annotated[str | None, Flag("the server with every production guardrail on", checks.url)] = None

    QUICK: ClassVar[dict[str, Any]] = {"duration": 2.0}


def _chart(runs: dict[str, dict[int, Run]], levels: list[int]) -> Chart:
    """Each guardrail configuration's TTFT and E2E medians and output throughput at every load level."""
    x = [float(v) for v in levels]
    traces = []
    for i, (name, by_level) in enumerate(runs.items()):
        color = PALETTE[i % len(PALETTE)]
        at = [by_level[v].summary for v in levels]
        traces += [
            Trace(
                name=f"{CONFIGS[name]}: TTFT P50",
                kind="lines+markers",
                x=x,
                y=[s.ttft_ms.p50 for s in at],
                color=color,
                dash=True,
            ),
            Trace(
                name=f"{CONFIGS[name]}: E2E P50", kind="lines+markers", x=x, y=[s.e2e_ms.p50 for s in at], color=color
            ),
            Trace(
                name=f"{CONFIGS[name]}: output",
                kind="lines+markers",
                x=x,
                row=2,
                color=color,
                y=[round(s.throughput.output_tok_s, 2) for s in at],
            ),
        ]
    return Chart(
        id="guardrail-overhead",
        title="Guardrail configurations against load (draft 5.10)",
        x_title="load (% of capacity)",
        panels=["latency P50 (ms): TTFT dashed, E2E solid", "output throughput (tok/s)"],
        traces=traces,
    )


class GuardrailSuite:
    name = "guardrail"
    section = "5.10"
    reference = "IETF draft, section 5.10"
    title = "Guardrail Overhead"
    summary = "baseline / input / output / full filtering at 25-75% of capacity (Tables 13-14)"
    params = GuardrailParams

    def emulator(self, params: GuardrailParams) -> EmulatorConfig:
        return small_engine()

    def targets(self, lab: Lab, params: GuardrailParams) -> dict[str, dict[str, Any]]:
        if lab.embedded and lab.emulator is not None:
            e = lab.emulator
            return {
                "baseline": {"emulator": e},
                "input": {"emulator": e.model_copy(update={"input_filter_ms": INPUT_FILTER_MS})},
                "output": {"emulator": e.model_copy(update={"output_filter_ms": OUTPUT_FILTER_MS})},
                "full": {
                    "emulator": e.model_copy(
                        update={"input_filter_ms": INPUT_FILTER_MS, "output_filter_ms": OUTPUT_FILTER_MS}
                    )
                },
            }
        urls = {
            "baseline": params.url_baseline,
            "input": params.url_input_filter,
            "output": params.url_output_filter,
            "full": params.url_full,
        }
        if urls["baseline"] is None:
            raise UserError(
                "against servers give --url-baseline (and the configurations to compare: "
                "--url-input-filter, --url-output-filter, --url-full)"
            )
        return {k: {"url": u} for k, u in urls.items() if u is not None}

    def procedure(self, lab: Lab, params: GuardrailParams) -> dict[str, Any]:
        if params.capacity is None and not lab.embedded:
            raise UserError("give the capacity the levels are shares of: --capacity R")
        capacity = params.capacity or EMULATOR_CAPACITY
        quick = params.duration < 60
        work = dict(QUICK_WORKLOAD) if quick else {"workload": params.workload}
        levels = sorted(set(checks.flat(params.levels) if isinstance(params.levels[0], list) else params.levels))
        runs: dict[str, dict[int, Run]] = {}
        for name, target in self.targets(lab, params).items():
            for pct in levels:
                rate = float(f"{capacity * pct / 100:.4g}")
                cfg = lab.config(workload=work, load={"rate": rate, "duration": params.duration}, **target)
                runs.setdefault(name, {})[pct] = lab.run(
                    f"{name}-{pct}pct", f"{CONFIGS[name]}, {pct}% of capacity", cfg
                )
        return {"capacity": capacity, "levels": levels, "runs": runs}

    def analyze(self, measured: dict[str, Any], params: GuardrailParams) -> Analysis:
        runs: dict[str, dict[int, Run]] = measured["runs"]
        levels: list[int] = measured["levels"]
        mid = levels[len(levels) // 2]
        t13, t14, figures = [], [], {}
        base_tput = max(r.summary.throughput.output_tok_s for r in runs["baseline"].values())
        for name, by_level in runs.items():
            s = by_level[mid].summary
            t13.append(
                [
                    CONFIGS[name],
                    fmt_ms(s.ttft_ms.p50),
                    fmt_ms(s.ttft_ms.p99),
                    fmt_ms(s.e2e_ms.p50),
                    fmt_ms(s.e2e_ms.p99),
                ]
            )
            best = max(r.summary.throughput.output_tok_s for r in by_level.values())
            t14.append(
                [CONFIGS[name], f"{best:.0f} tok/s", "-" if name == "baseline" else fmt_pct(best / base_tput - 1)]
            )
            figures[f"{name}_ttft_p50_ms"] = s.ttft_ms.p50
            figures[f"{name}_e2e_p50_ms"] = s.e2e_ms.p50
        base = runs["baseline"][mid]
        findings = [f"at {mid}% of capacity ({measured['capacity']:g} req/s = 100%)"]
        overheads = (
            ("input", latency.ttft, "input_filter_overhead_ms", "Input filter overhead", "of TTFT"),
            ("output", latency.e2e, "output_filter_overhead_ms", "Output filter overhead", "end to end"),
            ("full", latency.e2e, "total_overhead_ms", "Total guardrail overhead", "end to end"),
        )
        for name, metric, key, label, what in overheads:
            if name in runs and (over := paired_overhead_ms(base, runs[name][mid], metric)) is not None:
                figures[key] = over
                findings.append(f"{label}: {over:.1f} ms {what} (median over the same requests, paired)")
        refusals = sum(
            getattr(getattr(r.info, "stream", None), "refusals", 0) or 0 for by in runs.values() for r in by.values()
        )
        findings.append(f"requests refused by a guardrail: {refusals}")
        tables = [
            Table(
                caption=f"Table 13: Guardrail Overhead ({mid}% of capacity)",
                headers=["Configuration", "TTFT P50", "TTFT P99", "E2E P50", "E2E P99"],
                rows=t13,
            ),
            Table(
                caption="Table 14: Throughput Impact",
                headers=["Configuration", "Max Throughput", "Reduction"],
                rows=t14,
                notes=[f"max throughput: the highest output rate over the levels {levels}%"],
            ),
        ]
        return Analysis(tables=tables, findings=findings, figures=figures, charts=[_chart(runs, levels)])

    def requirements(
        self, measured: dict[str, Any], analysis: Analysis, params: GuardrailParams, quick: bool
    ) -> list[Requirement]:
        have = set(measured["runs"])
        return [
            requirement(
                "SHOULD",
                "5.10.2",
                "baseline, input, output and full filtering compared",
                have == set(CONFIGS),
                ", ".join(CONFIGS[k] for k in CONFIGS if k in have),
            ),
            requirement(
                "SHOULD",
                "5.10.2",
                "load levels of 25, 50 and 75% of capacity",
                {25, 50, 75} <= set(measured["levels"]),
                f"{measured['levels']}%",
            ),
            requirement(
                "MUST",
                "4.8.2",
                "the report notes whether safety systems are disabled",
                True,
                "each configuration's guardrails are declared in its runs",
            ),
            requirement("SHOULD", "5.10.2", "benign content", True, "generated text with no unsafe content"),
        ]


def paired_overhead_ms(base: Run, other: Run, metric: Callable[[RecordColumns], np.ndarray]) -> float | None:
    """The median over requests both runs completed of other's latency minus base's, in ms.  Every configuration
    is sent the same requests in the same order, so pairing them by id leaves the guardrail's own cost, without
    the spread of two distributions' percentiles taken apart."""
    a, b = base.columns(), other.columns()
    _, ia, ib = np.intersect1d(a.request_id, b.request_id, return_indices=True)
    diff = metric(b)[ib] - metric(a)[ia]
    diff = diff[np.isfinite(diff)]
    return float(np.median(diff)) * 1000 if len(diff) else None


SUITE = GuardrailSuite()
