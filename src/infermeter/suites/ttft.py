"""Time to First Token (the IETF draft, section 5.1): one measured load, Table 1, Table 2 when input lengths vary,
a TTFT histogram (5.1.5.4), and the queue-wait and prefill components of TTFT when the server reports them (5.1.4.2,
vLLM's request queue and prefill time histograms, as deltas over the measurement window)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

import numpy as np

from infermeter.config import checks
from infermeter.config.section import Flag
from infermeter.emulator.config import EmulatorConfig
from infermeter.metrics.latency import ttft
from infermeter.metrics.summary_model import HistogramDelta
from infermeter.report.console import table1_ttft, table2_ttft_by_input
from infermeter.report.run_charts import ttft_charts
from infermeter.report.tables import as_table, fmt_ms
from infermeter.report.text_plot import histogram
from infermeter.suite_result import Analysis, Requirement, Table
from infermeter.suites.common import LoadParams, at_least, headline, requirement
from infermeter.suites.lab import Lab, Run
from infermeter.units import MS_PER_S

P99_SAMPLES, P999_SAMPLES = 1000, 10_000  # draft 5.1.2.1 / 5.1.4.3


class TtftParams(LoadParams):
    workload: Annotated[str, Flag("standard workload name or workload file", checks.WORKLOAD)] = "synthetic-uniform"
    requests: Annotated[
        int, Flag("requests to measure (the draft: >= 1000 for P99, >= 10000 for P99.9)", checks.REQUESTS)
    ] = P999_SAMPLES
    arrival: Annotated[
        str, Flag("poisson, gamma, constant or uniform", checks.choice("poisson", "gamma", "constant", "uniform"))
    ] = "poisson"

    QUICK: ClassVar[dict[str, Any]] = {"requests": 200}


class TtftSuite:
    name = "ttft"
    section = "5.1"
    reference = "IETF draft, section 5.1"
    title = "Time to First Token"
    summary = "TTFT percentiles (Tables 1-2), histogram, queue-wait and prefill components"
    params = TtftParams

    def emulator(self, params: TtftParams) -> EmulatorConfig:
        return EmulatorConfig()

    def procedure(self, lab: Lab, params: TtftParams) -> Run:
        load = {**params.load(lab.embedded), "requests": params.requests, "arrival": params.arrival}
        cfg = lab.config(workload={"workload": params.workload}, load=load)
        what = f"{load['rate']:g} req/s open loop" if "rate" in load else f"concurrency {load['concurrency']}"
        return lab.run("ttft", f"TTFT at {what}, {params.requests} requests", cfg)

    def analyze(self, run: Run, params: TtftParams) -> Analysis:
        s = run.summary
        tables = [as_table(table1_ttft(s))]
        if len(s.ttft_by_input_tokens) > 1:
            tables.append(as_table(table2_ttft_by_input(s)))
        components = _components(run)
        if components is not None:
            tables.append(components)
        values = ttft(run.columns()) * MS_PER_S
        n = s.ttft_ms.n
        findings = [
            f"TTFT P50 {fmt_ms(s.ttft_ms.p50)}, P99 {fmt_ms(s.ttft_ms.p99)}, "
            f"P99.9 {fmt_ms(s.ttft_ms.percentile(99.9))} over {n} samples ({run.info.load.description})",
            "TTFT measures time to the first content token (draft 5.1.3.1)",
        ]
        notes = []
        if n < P999_SAMPLES:
            notes.append(f"P99.9 is reported from {n} samples; the draft asks for >= {P999_SAMPLES} (5.1.4.3)")
        if components is None:
            notes.append("the server reports no queue-wait or prefill histograms: TTFT is not decomposed (5.1.4.2)")
        hist = histogram(values[values == values], "TTFT histogram (draft 5.1.5.4)")
        figures: dict[str, Any] = {
            "samples": n,
            "ttft_p50_ms": s.ttft_ms.p50,
            "ttft_p99_ms": s.ttft_ms.p99,
            "queue_p50_ms": _stat(run, "queue_time", "p50_ms"),
            "prefill_p50_ms": _stat(run, "prefill_time", "p50_ms"),
        }
        charts = ttft_charts(run.columns(), s)
        units = {"ttft_p50_ms": "ms", "ttft_p99_ms": "ms", "queue_p50_ms": "ms", "prefill_p50_ms": "ms"}
        return Analysis(
            tables=tables,
            findings=findings,
            figures=figures,
            headline=headline(figures, units),
            notes=notes,
            plots=[hist],
            charts=charts,
        )

    def requirements(self, run: Run, analysis: Analysis, params: TtftParams, quick: bool) -> list[Requirement]:
        t = run.summary.ttft_ms
        n = t.n
        values = {
            "P50": t.p50, "P90": t.p90, "P95": t.p95, "P99": t.p99, "P99.9": t.percentile(99.9), "mean": t.mean,
            "min": t.min, "max": t.max,
        }  # fmt: skip
        missing = [k for k, v in values.items() if v is None]
        table1 = next((tb for tb in analysis.tables if tb.caption.startswith("Table 1")), None)
        shown = dict((r[0], r[1]) for r in table1.rows) if table1 is not None else {}
        cols = run.columns()
        lengths = len(np.unique(cols.input_tokens[cols.ok]))
        by_length = any(tb.caption.startswith("Table 2") for tb in analysis.tables)
        drawn = [p for p in analysis.plots if "no samples" not in p]
        return [
            at_least("MUST", "5.1.2.1", "at least 1000 requests for the P99", n, P99_SAMPLES, "TTFT samples"),
            at_least("MUST", "5.1.2.1", "at least 10000 requests for the P99.9", n, P999_SAMPLES, "TTFT samples"),
            requirement(
                "MUST",
                "5.1.4.1",
                "P50, P90, P95, P99, P99.9, mean, min and max reported",
                not missing,
                "all in Table 1" if not missing else f"no {', '.join(missing)}: no successful request had a TTFT",
            ),
            requirement(
                "MUST",
                "5.1.4.3",
                "the sample count is stated",
                shown.get("Requests") == str(n),
                f"{n} samples (Table 1, Requests)" if shown.get("Requests") == str(n) else "Table 1 states no count",
            ),
            requirement(
                "SHOULD", "5.1.5.2", "results in tabular form", table1 is not None and bool(table1.rows), "Table 1"
            ),
            requirement(
                "SHOULD",
                "5.1.4.2",
                "TTFT by input length when input lengths vary",
                lengths <= 1 or by_length,
                f"{lengths} input lengths: " + ("Table 2" if by_length else "not bucketed" if lengths > 1 else "n/a"),
            ),
            requirement(
                "SHOULD",
                "5.1.5.4",
                "a histogram or CDF of TTFT",
                bool(drawn) and n > 0,
                f"histogram of {n} samples in the report, CDF in the HTML report" if drawn else "no samples to draw",
            ),
        ]


def _component(run: Run, block: str) -> HistogramDelta | None:
    server = run.summary.server_metrics
    return None if server is None else server.queue_time if block == "queue_time" else server.prefill_time


def _stat(run: Run, block: str, field: str) -> float | None:
    hist = _component(run, block)
    return getattr(hist, field) if hist is not None else None


def _components(run: Run) -> Table | None:
    """Queue wait and prefill, the two components of TTFT the draft names (5.1.4.2), from the server's histograms."""
    rows = []
    for name, block in (("Queue wait", "queue_time"), ("Prefill", "prefill_time")):
        if _component(run, block) is None:
            continue
        rows.append([name, *[fmt_ms(_stat(run, block, f)) for f in ("mean_ms", "p50_ms", "p95_ms", "p99_ms")]])
    if not rows:
        return None
    return Table(
        caption="TTFT components reported by the server (draft 5.1.4.2)",
        headers=["Component", "Mean", "P50", "P95", "P99"],
        rows=rows,
        notes=["from the server's histograms over the measurement window (bucket interpolation)"],
    )


SUITE = TtftSuite()
