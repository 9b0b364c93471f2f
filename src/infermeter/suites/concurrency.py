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
from infermeter.suite_result import Analysis, Requirement, Table
from infermeter.suites.charts import search_chart
from infermeter.suites.common import headline, requirement
from infermeter.suites.framework import SuiteParams
from infermeter.suites.lab import Lab, Run
from infermeter.suites.search import bisect
from infermeter.suites.throughput import small_engine

OOM = re.compile(r"out of memory|\bOOM\b|CUDA error|KV cache (is )?full|insufficient memory", re.IGNORECASE)
COMPLETION = 0.99
MIN_SECONDS, MIN_PER_SLOT = 60.0, 100  # 5.5.3 c: at least 60 s or 100 completions per slot, whichever is longer


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
        int, Flag("requests per slot at each level, at least (the draft: >= 100)", checks.integer(1, 10_000))
    ] = 100
    duration: Annotated[
        float,
        Flag("seconds per level, at least (the draft: 60 s or 100 per slot, whichever is longer)", checks.SECONDS),
    ] = 60.0

    QUICK: ClassVar[dict[str, Any]] = {"completions_per_slot": 3, "duration": 3.0}


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
                load={
                    "concurrency": n,
                    "requests": n * params.completions_per_slot,
                    "min_duration": params.duration,
                    "barrier": True,
                },
            )
            run = lab.run(f"concurrency-{n}", f"concurrency {n}", cfg, level=f"probe {len(probes) + 1}")
            probe = Probe(n, run, params)
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
        units = {"max_concurrency": "requests", "output_tok_s": "tok/s", "tokens_in_flight": "tokens"}
        return Analysis(
            tables=[table], findings=findings, figures=figures, headline=headline(figures, units), charts=[chart]
        )

    def requirements(
        self, probes: list[Probe], analysis: Analysis, params: CapacityParams, quick: bool
    ) -> list[Requirement]:
        short = [p for p in probes if too_short(p)]
        best, failed = analysis.figures.get("max_concurrency"), analysis.figures.get("first_failure")
        bracketed = isinstance(best, int) and isinstance(failed, int) and failed - best <= 1
        apart = [p.concurrency for p in probes if not p.run.info.load.barrier]
        lengths = [p for p in probes if not fixed_output(p.run.columns())]
        return [
            requirement(
                "MUST",
                "5.5.3",
                "each level runs >= 60 s and >= 100 completions per slot (whichever is longer)",
                bool(probes) and not short,
                "every level"
                if probes and not short
                else "; ".join(
                    f"concurrency {p.concurrency}: {p.run.summary.duration_s:.1f} s, "
                    f"{p.run.summary.requests.ok / p.concurrency:.1f} completions per slot"
                    for p in short[:3]
                )
                or "no levels",
            ),
            requirement(
                "MUST",
                "5.5.3",
                "binary search to convergence",
                bracketed,
                f"{best} passed, {failed} failed" if bracketed else f"not converged (passed {best}, failed {failed})",
            ),
            requirement(
                "MUST",
                "5.5.3",
                "each level's first [concurrency] requests submitted simultaneously",
                bool(probes) and not apart,
                "released through a barrier at every level (run.json)"
                if not apart
                else f"no barrier at concurrency {', '.join(map(str, apart))}",
            ),
            requirement(
                "SHOULD",
                "5.5.2",
                "a fixed output length",
                bool(probes) and not lengths,
                f"every successful request returned its {params.output_tokens} tokens (EOS ignored)"
                if not lengths
                else f"replies of other lengths at concurrency {', '.join(str(p.concurrency) for p in lengths)}",
            ),
        ]


def too_short(probe: Probe) -> bool:
    """5.5.3 c: a level runs for at least 60 seconds and at least 100 completions per slot, whichever is longer."""
    s = probe.run.summary
    return s.duration_s < MIN_SECONDS or s.requests.ok < MIN_PER_SLOT * probe.concurrency


def fixed_output(cols: RecordColumns) -> bool:
    """Every successful request's reply has exactly the length it asked for."""
    ok = cols.ok
    return bool(ok.any()) and bool(np.all(cols.output_tokens[ok] == cols.max_tokens[ok]))


SUITE = CapacitySuite()
