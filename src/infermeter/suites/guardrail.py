"""Guardrail Overhead (the IETF draft, section 5.10): baseline, input filter, output filter and full filtering, each
with its own capacity search (Table 14's maximum throughput and reduction), then each loaded at 25/50/75% of the
baseline's capacity: TTFT and E2E P50/P95/P99 per configuration at every level (Table 13), the paired overheads."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

import numpy as np
from pydantic import Field

from infermeter.chart import Chart, Trace
from infermeter.config import checks
from infermeter.config.section import Flag
from infermeter.emulator.config import EmulatorConfig
from infermeter.errors import UserError
from infermeter.metrics import latency
from infermeter.metrics.columns import RecordColumns
from infermeter.report.chart import PALETTE
from infermeter.report.tables import fmt_ms, fmt_pct
from infermeter.suite_result import Analysis, Requirement, Table
from infermeter.suites.common import headline, requirement
from infermeter.suites.framework import SuiteParams
from infermeter.suites.lab import Lab, Run
from infermeter.suites.probe import emulator_capacity
from infermeter.suites.throughput import Search, ThroughputParams, search_levels, small_engine

INPUT_FILTER_MS, OUTPUT_FILTER_MS = 40.0, 10.0  # the emulator's guardrails: before the engine, on every event
CONFIGS = {"baseline": "Baseline", "input": "Input Filter", "output": "Output Filter", "full": "Full Filter"}


def configuration_text(value: Any) -> str:
    """--guardrails NAME=TEXT: what the server of one configuration runs (the IETF draft, 4.8.1), NAME one of
    baseline, input, output, full."""
    name, sep, text = str(value).partition("=")
    if not sep or name.strip() not in CONFIGS or not text.strip() or "\n" in text:
        raise ValueError(
            f"expected NAME=TEXT with NAME one of {', '.join(CONFIGS)} and TEXT the safety systems that server runs "
            f"(e.g. 'input=Llama Guard 3 on prompts'), got {value!r}"
        )
    return f"{name.strip()}={text.strip()}"


def configuration_texts(value: Any) -> list[str]:
    """Every --guardrails NAME=TEXT given: the option repeats, one per configuration (each occurrence parsed alone
    first, then the list of them), and a scenario file gives a list."""
    if not isinstance(value, list):
        return [configuration_text(value)]
    return [text for item in value for text in configuration_texts(item)]


class GuardrailParams(SuiteParams):
    capacity: Annotated[
        float | None, Flag("where each configuration's capacity search starts, req/s (else a probe)", checks.RATE)
    ] = None
    levels: Annotated[list[int], Flag("load levels in % of the baseline's capacity", checks.int_list(1, 200))] = Field(
        default_factory=lambda: [25, 50, 75]
    )
    workload: Annotated[str, Flag("standard workload name or workload file", checks.WORKLOAD)] = "conversation"
    duration: Annotated[float, Flag("seconds per run (the draft: >= 60 for the searches)", checks.SECONDS)] = 60.0
    tolerance: Annotated[
        float, Flag("each capacity search stops within this (fail - pass) / fail", checks.number(0, 1, lo_open=True))
    ] = 0.1
    max_probes: Annotated[int, Flag("at most this many levels per capacity search", checks.integer(2, 100))] = 10
    url_baseline: Annotated[str | None, Flag("the server with every guardrail off", checks.url)] = None
    url_input_filter: Annotated[str | None, Flag("the server with input filtering only", checks.url)] = None
    url_output_filter: Annotated[str | None, Flag("the server with output filtering only", checks.url)] = None
    url_full: Annotated[str | None, Flag("the server with every production guardrail on", checks.url)] = None
    guardrails: Annotated[
        list[str],
        Flag(
            "what each configuration's server runs, NAME=TEXT (NAME baseline, input, output or full), once per "
            "configuration: the IETF draft's 4.8 disclosure, per server",
            configuration_texts,
            repeatable=True,
        ),
    ] = Field(default_factory=list)

    QUICK: ClassVar[dict[str, Any]] = {"duration": 2.0, "tolerance": 0.3, "max_probes": 4}

    def declared(self) -> dict[str, str]:
        return dict(item.split("=", 1) for item in self.guardrails)


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
        x_title="load (% of the baseline's capacity)",
        panels=["latency P50 (ms): TTFT dashed, E2E solid", "output throughput (tok/s)"],
        traces=traces,
    )


@dataclass
class Measured:
    capacity: float  # req/s: the baseline's sustainable rate, which the levels are shares of
    levels: list[int]
    runs: dict[str, dict[int, Run]]  # configuration -> level -> run
    searches: dict[str, Search]  # configuration -> its capacity search (Table 14)


class GuardrailSuite:
    name = "guardrail"
    section = "5.10"
    reference = "IETF draft, section 5.10"
    title = "Guardrail Overhead"
    summary = "baseline / input / output / full filtering at 25-75% of capacity, capacity per configuration (13-14)"
    params = GuardrailParams
    own_options = ("guardrails",)  # --guardrails is per configuration here, not the one disclosure of a server

    def emulator(self, params: GuardrailParams) -> EmulatorConfig:
        return small_engine()

    def targets(self, lab: Lab, params: GuardrailParams) -> dict[str, dict[str, Any]]:
        declared = params.declared()
        if lab.embedded and lab.emulator is not None:
            if declared:
                raise UserError(
                    "--guardrails NAME=TEXT declares the servers at --url-baseline ... --url-full: the embedded "
                    "emulator declares its own guardrails; drop it"
                )
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
        if unused := sorted(set(declared) - {k for k, u in urls.items() if u is not None}):
            raise UserError(f"--guardrails declares {', '.join(unused)} but no URL is given for it: drop it or add it")
        return {
            k: {"url": u, **({"disclosures": {"guardrails": declared[k]}} if k in declared else {})}
            for k, u in urls.items()
            if u is not None
        }

    def procedure(self, lab: Lab, params: GuardrailParams) -> Measured:
        work = {"workload": params.workload}
        targets = self.targets(lab, params)
        if params.capacity is not None:
            start = params.capacity
        elif lab.embedded:
            start = emulator_capacity(lab, work, what="the baseline").rate
        else:
            raise UserError("give where the capacity searches start: --capacity R (req/s)")
        search = ThroughputParams(
            workload=params.workload,
            duration=params.duration,
            start=float(f"{start:.4g}"),
            tolerance=params.tolerance,
            max_probes=params.max_probes,
        )
        levels = sorted(set(params.levels))
        runs: dict[str, dict[int, Run]] = {}
        searches: dict[str, Search] = {}
        capacity: float | None = None
        for name, target in targets.items():
            searches[name] = search_levels(lab, search, tag=f"{name}-", target=target)
            if capacity is None:  # the baseline's: every configuration is loaded at the same rates
                best = searches[name].sustainable
                if best is None:
                    raise UserError("the baseline's capacity search found no sustainable rate: lower --capacity")
                capacity = best.offered
            for pct in levels:
                rate = float(f"{capacity * pct / 100:.4g}")
                cfg = lab.config(workload=work, load={"rate": rate, "duration": params.duration}, **target)
                label = f"{CONFIGS[name]}, {pct}% of capacity ({rate:g} req/s)"
                runs.setdefault(name, {})[pct] = lab.run(f"{name}-{pct}pct", label, cfg, level=f"{name} {pct}%")
        assert capacity is not None
        return Measured(capacity, levels, runs, searches)

    def analyze(self, measured: Measured, params: GuardrailParams) -> Analysis:
        t13, latency_figures = table13(measured)
        overheads, overhead_figures = paired_overheads(measured)
        t14, impact_figures = table14(measured)
        figures: dict[str, Any] = {"capacity_req_s": measured.capacity}
        figures |= latency_figures | overhead_figures | impact_figures
        findings = [
            f"the baseline's capacity {measured.capacity:g} req/s (its 5.2 search); every configuration is loaded at "
            + ", ".join(f"{pct}% = {rate_at(measured, pct)}" for pct in measured.levels),
            *overheads,
            refusals_finding(measured.runs),
        ]
        units = {
            "capacity_req_s": "req/s",
            "input_filter_overhead_ms_": "ms",
            "output_filter_overhead_ms_": "ms",
            "total_overhead_ms_": "ms",
            "input_throughput_reduction": "share",
            "output_throughput_reduction": "share",
            "full_throughput_reduction": "share",
        } | {f"{name}_max_output_tok_s": "tok/s" for name in CONFIGS}
        return Analysis(
            tables=[*t13, t14],
            findings=findings,
            figures=figures,
            headline=headline(figures, units),
            charts=[_chart(measured.runs, measured.levels)],
        )

    def requirements(
        self, measured: Measured, analysis: Analysis, params: GuardrailParams, quick: bool
    ) -> list[Requirement]:
        have = set(measured.runs)
        done = sorted({pct for by in measured.runs.values() for pct in by})
        declared = {name: {r.info.sut.guardrails for r in by.values()} for name, by in measured.runs.items()}
        missing = [n for n, d in declared.items() if None in d]
        alike = len({frozenset(d) for d in declared.values()}) < len(declared)
        refusals = [getattr(r.info.stream, "refusals", None) for by in measured.runs.values() for r in by.values()]
        unbracketed = [n for n, s in measured.searches.items() if s.sustainable is None or s.saturated_at is None]
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
                {25, 50, 75} <= set(done),
                ", ".join(f"{p}%" for p in done),
            ),
            requirement(
                "MUST",
                "4.8.2",
                "the report notes whether safety systems are disabled, per configuration",
                not missing and not alike,
                "; ".join(f"{CONFIGS[n]}: {', '.join(sorted(str(x) for x in d))}" for n, d in declared.items())
                if not missing and not alike
                else f"not declared for {', '.join(CONFIGS[n] for n in missing)}: give --guardrails NAME=TEXT"
                if missing
                else "configurations declared alike (one --guardrails text for different servers): give "
                "--guardrails NAME=TEXT for each",
            ),
            requirement(
                "SHOULD",
                "5.10.2",
                "benign content (nothing refused)",
                None if None in refusals else sum(r for r in refusals if r is not None) == 0,
                "refusals were not counted for some runs"
                if None in refusals
                else f"{sum(r for r in refusals if r is not None)} requests refused (finish_reason content_filter)",
            ),
            requirement(
                "SHOULD",
                "5.10.4",
                "throughput reduction from each configuration's own capacity search",
                not unbracketed,
                "every configuration's search bracketed its capacity"
                if not unbracketed
                else f"not bracketed for {', '.join(CONFIGS[n] for n in unbracketed)}",
            ),
        ]


def rate_at(measured: Measured, pct: int) -> str:
    return f"{measured.capacity * pct / 100:.4g} req/s"


def table13(measured: Measured) -> tuple[list[Table], dict[str, Any]]:
    """Table 13 at each load level (TTFT and E2E P50/P95/P99 per configuration), and each configuration's TTFT and
    E2E medians at each level by name."""
    tables: list[Table] = []
    figures: dict[str, Any] = {}
    for pct in measured.levels:
        rows = []
        for name, by_level in measured.runs.items():
            s = by_level[pct].summary
            rows.append(
                [
                    CONFIGS[name],
                    *[fmt_ms(s.ttft_ms.percentile(q)) for q in (50, 95, 99)],
                    *[fmt_ms(s.e2e_ms.percentile(q)) for q in (50, 95, 99)],
                ]
            )
            figures[f"{name}_ttft_p50_ms_{pct}"] = s.ttft_ms.p50
            figures[f"{name}_e2e_p50_ms_{pct}"] = s.e2e_ms.p50
        tables.append(
            Table(
                caption=f"Table 13: Guardrail Overhead at {pct}% of capacity ({rate_at(measured, pct)})",
                headers=["Configuration", "TTFT P50", "TTFT P95", "TTFT P99", "E2E P50", "E2E P95", "E2E P99"],
                rows=rows,
            )
        )
    return tables, figures


def paired_overheads(measured: Measured) -> tuple[list[str], dict[str, Any]]:
    """Each filter's overhead over the baseline (paired_overhead_ms) at every level, in words and by name (the
    figure without a level suffix is the middle level's)."""
    overheads = (
        ("input", latency.ttft, "input_filter_overhead_ms", "Input filter overhead", "of TTFT"),
        ("output", latency.e2e, "output_filter_overhead_ms", "Output filter overhead", "end to end"),
        ("full", latency.e2e, "total_overhead_ms", "Total guardrail overhead", "end to end"),
    )
    runs, levels = measured.runs, measured.levels
    mid = levels[len(levels) // 2]
    findings: list[str] = []
    figures: dict[str, Any] = {}
    for name, metric, key, label, what in overheads:
        if name not in runs:
            continue
        at = {pct: paired_overhead_ms(runs["baseline"][pct], runs[name][pct], metric) for pct in levels}
        for pct, over in at.items():
            figures[f"{key}_{pct}"] = over
        figures[key] = at[mid]
        shown = ", ".join(f"{pct}%: {'n/a' if v is None else f'{v:.1f} ms'}" for pct, v in at.items())
        findings.append(f"{label} {what} (median over the same requests, paired): {shown}")
    return findings, figures


def table14(measured: Measured) -> tuple[Table, dict[str, Any]]:
    """Table 14 (Throughput Impact): each configuration's maximum throughput from its own capacity search and its
    reduction from the baseline's, as a table and by name."""
    base = measured.searches["baseline"].sustainable
    base_tput = base.steady.output_tok_s if base is not None else None
    rows: list[list[str]] = []
    figures: dict[str, Any] = {}
    for name, search in measured.searches.items():
        best = search.sustainable
        tput = best.steady.output_tok_s if best is not None else None
        cut = tput / base_tput - 1 if tput is not None and base_tput else None
        rows.append(
            [
                CONFIGS[name],
                "n/a" if tput is None else f"{tput:.0f} tok/s",
                "n/a" if best is None else f"{best.offered:g} req/s",
                "-" if name == "baseline" else fmt_pct(cut),
            ]
        )
        figures[f"{name}_max_output_tok_s"] = tput
        if name != "baseline":
            figures[f"{name}_throughput_reduction"] = cut
    table = Table(
        caption="Table 14: Throughput Impact",
        headers=["Configuration", "Max Throughput", "Sustainable Load", "Reduction"],
        rows=rows,
        notes=[
            "max throughput: each configuration's own capacity search (the draft's 5.2: the highest load not "
            "saturated), output tokens per second of its steady window"
        ],
    )
    return table, figures


def refusals_finding(runs: dict[str, dict[int, Run]]) -> str:
    """How many requests a guardrail refused over every run (4.8.1), or that some run did not count them."""
    refusals = [getattr(r.info.stream, "refusals", None) for by in runs.values() for r in by.values()]
    return "requests refused by a guardrail: " + (
        str(sum(r for r in refusals if r is not None)) if None not in refusals else "not counted for some runs"
    )


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
