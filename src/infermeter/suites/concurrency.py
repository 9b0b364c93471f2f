"""Concurrent Request Capacity (the IETF draft, section 5.5): a closed-loop binary search on concurrency for the
highest level meeting the success criteria (completion >= 99%, TTFT P99 within a threshold, no out-of-memory
errors), Table 7, throughput and tokens in flight at the maximum."""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar

import numpy as np

from infermeter.config import checks
from infermeter.config.section import Flag
from infermeter.emulator.config import EmulatorConfig
from infermeter.metrics.columns import RecordColumns
from infermeter.report.tables import fmt_ms, fmt_pct
from infermeter.suites.charts import search_chart
from infermeter.suites.common import requirement
from infermeter.suites.framework import Analysis, Requirement, SuiteParams, Table
from infermeter.suites.lab import Lab, Run
from infermeter.suites.search import bisect
from infermeter.suites.throughput import small_engine

OOM = re.compile(r"out of memory|\bOOM\b|CUDA error|KV cache (is )?full|insufficient memory", re.IGNORECASE)
COMPLETION = 0.99


def oom_errors(cols: RecordColumns) -> int:
    """Failed requests whose error names memory exhaustion (the draft's third success criterion)."""
    return int(sum(bool(OOM.search(str(e))) for e, ok in zip(cols.error, cols.ok, strict=True) if not ok))


def tokens_in_flight(cols: RecordColumns, points: int = 200) -> float:
    """The mean over the run of the tokens held by requests in flight: their prompts plus the tokens received so far
    (draft 5.5.4 "tokens in flight")."""
    ok = cols.ok & (cols.tokens.lengths > 0)
    sub, fin = cols.submitted_at[ok], cols.tokens.last()[ok]
    if not len(sub):
        return 0.0
    t = np.linspace(sub.min(), fin.max(), points)
    order_s, order_f = np.argsort(sub), np.argsort(fin)
    cum_in = np.concatenate([[0], np.cumsum(cols.input_tokens[ok][order_s])])
    cum_in_done = np.concatenate([[0], np.cumsum(cols.input_tokens[ok][order_f])])
    cum_out_done = np.concatenate([[0], np.cumsum(cols.tokens.lengths[ok][order_f])])
    started, ended = np.searchsorted(sub[order_s], t, "right"), np.searchsorted(fin[order_f], t, "right")
    prompts = cum_in[started] - cum_in_done[ended]
    received = np.searchsorted(np.sort(cols.tokens.values[np.repeat(ok, cols.tokens.lengths)]), t, "right")
    return float(np.mean(prompts + received - cum_out_done[ended]))


class CapacityParams(SuiteParams):
    initial_concurrency: Annotated[int, Flag("first concurrency probed", checks.integer(1, 100_000))] = 8
    max_concurrency: Annotated[int, Flag("upper bound of the search", checks.integer(1, 100_000))] = 512
    ttft_p99: Annotated[float, Flag("TTFT P99 threshold in ms", checks.number(0, 3.6e6, lo_open=True))] = 1000.0
    input_tokens: Annotated[int, Flag("prompt length (fixed)", checks.integer(1, 1_000_000))] = 256
    output_tokens: Annotated[int, Flag("fixed output length (the draft: e.g. 256)", checks.integer(1, 100_000))] = 256
    completions_per_slot: Annotated[
        int, Flag("requests per slot at each level (the draft: >= 100)", checks.integer(1, 10_000))
    ] = 100

    QUICK: ClassVar[dict[str, Any]] = {"output_tokens": 32, "completions_per_slot": 3, "ttft_p99": 500.0}


class Probe:
    def __init__(self, concurrency: int, run: Run, params: CapacityParams) -> None:
        self.concurrency, self.run = concurrency, run
        s, cols = run.summary, run.columns()
        self.completion = s.requests.success_rate or 0.0
        self.ttft_p99 = s.ttft_ms.p99
        self.errors = s.requests.failed
        self.oom = oom_errors(cols)
        self.why = []
        if self.completion < COMPLETION:
            self.why.append(f"completion {fmt_pct(self.completion)} < 99%")
        if self.ttft_p99 is None or self.ttft_p99 > params.ttft_p99:
            self.why.append(f"TTFT P99 {fmt_ms(self.ttft_p99)} > {params.ttft_p99:g} ms")
        if self.oom:
            self.why.append(f"{self.oom} out-of-memory errors")


class CapacitySuite:
    name = "capacity"
    section = "5.5"
    reference = "IETF draft, section 5.5"
    title = "Concurrent Request Capacity"
    summary = "closed-loop search for the highest concurrency meeting the success criteria (Table 7)"
    params = CapacityParams

    def emulator(self, params: CapacityParams) -> EmulatorConfig:
        return small_engine()

    def procedure(self, lab: Lab, params: CapacityParams) -> list[Probe]:
        probes: list[Probe] = []

        def check(c: float) -> bool:
            n = int(c)
            cfg = lab.config(
                workload={"input_tokens": params.input_tokens, "output_tokens": params.output_tokens},
                load={"concurrency": n, "requests": n * params.completions_per_slot, "barrier": True},
            )
            probe = Probe(n, lab.run(f"concurrency-{n}", f"concurrency {n}", cfg), params)
            probes.append(probe)
            return not probe.why

        bisect(check, params.initial_concurrency, params.max_concurrency, integer=True, max_probes=16)
        return probes

    def analyze(self, probes: list[Probe], params: CapacityParams) -> Analysis:
        rows = [
            [
                str(p.concurrency),
                fmt_pct(p.completion),
                fmt_ms(p.ttft_p99),
                fmt_ms(p.run.summary.tpot_ms.p99),
                str(p.errors),
                "Pass" if not p.why else "Fail: " + "; ".join(p.why),
            ]
            for p in sorted(probes, key=lambda p: p.concurrency)
        ]
        best = max((p for p in probes if not p.why), key=lambda p: p.concurrency, default=None)
        failed = min((p.concurrency for p in probes if p.why), default=None)
        figures: dict[str, Any] = {"max_concurrency": best.concurrency if best else None, "first_failure": failed}
        findings = []
        if best is None:
            findings.append("Maximum concurrent requests meeting criteria: none (the lowest level failed)")
        else:
            tif = tokens_in_flight(best.run.columns())
            findings += [
                f"Maximum concurrent requests meeting criteria: {best.concurrency}",
                f"Achieved throughput at maximum: {best.run.summary.throughput.output_tok_s:.0f} output tok/s",
                f"Tokens in flight at maximum: {tif:.0f} (prompt + received tokens of the requests in flight, mean)",
            ]
            figures.update(output_tok_s=best.run.summary.throughput.output_tok_s, tokens_in_flight=tif)
        table = Table(
            caption="Table 7: Capacity Search Results",
            headers=["Concurrency", "Completion", "TTFT P99", "TPOT P99", "Errors", "Status"],
            rows=rows,
            notes=[f"criteria: completion >= 99%, TTFT P99 <= {params.ttft_p99:g} ms, no out-of-memory errors"],
        )
        chart = search_chart(
            "capacity-search",
            "The closed-loop search for the maximum concurrency (draft 5.5)",
            "concurrent requests",
            [(float(p.concurrency), p.run.summary, p.why) for p in probes],
            params.ttft_p99,
        )
        return Analysis(tables=[table], findings=findings, figures=figures, charts=[chart])

    def requirements(
        self, probes: list[Probe], analysis: Analysis, params: CapacityParams, quick: bool
    ) -> list[Requirement]:
        short = [p for p in probes if p.run.summary.duration_s < 60 and p.run.summary.requests.ok < 100 * p.concurrency]
        bracketed = (
            analysis.figures.get("max_concurrency") is not None and analysis.figures.get("first_failure") is not None
        )
        return [
            requirement(
                "MUST",
                "5.5.3",
                "each level runs >= 60 s or 100 completions per slot, whichever is longer",
                not short,
                "every level" if not short else f"{len(short)} levels shorter",
            ),
            requirement(
                "MUST",
                "5.5.3",
                "binary search to convergence",
                bracketed,
                "a passing level next to a failing one" if bracketed else "not bracketed",
            ),
            requirement(
                "SHOULD", "5.5.2", "a fixed output length", True, f"{params.output_tokens} tokens, EOS ignored"
            ),
        ]


SUITE = CapacitySuite()
