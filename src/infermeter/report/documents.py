"""The IETF draft's Appendix C.2 full report of a run or of a test suite, as a Document (Markdown and HTML render
it): system identification, test configuration, results, detailed results with the charts, methodology compliance,
reproduction."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from infermeter.metrics import RecordColumns
from infermeter.metrics.summary_model import Stats, Summary
from infermeter.records import RunInfo
from infermeter.report import console
from infermeter.report.breakdowns import breakdown_tables
from infermeter.report.document import Document, Section
from infermeter.report.endpoint import (
    endpoint_lines,
    endpoint_table,
    generates,
    measured_line,
    measured_text,
    not_applicable,
)
from infermeter.report.run_charts import run_charts
from infermeter.report.server_table import server_table
from infermeter.report.suite import QUICK_BANNER, suite_sections
from infermeter.report.tables import as_table, fmt_ms, fmt_pct
from infermeter.suite_result import SuiteResult, Table


def _identification(info: RunInfo) -> Section:
    sut = info.sut
    target = "embedded emulator" if info.kind == "emulated" else (sut.url or "not declared")
    measured = measured_line(info)
    return Section(
        "1. System Identification",
        [
            *([measured] if measured is not None else []),
            f"Model: {sut.model or 'not declared'}",
            f"Hardware: {sut.hardware or 'not declared'}",
            f"Software: {sut.software or 'not declared'}",
            f"SUT Boundary: {sut.boundary or 'not declared (draft 4.1: give --boundary)'}",
            f"Target: {target} ({info.kind} run)",
        ],
    )


def _configuration(info: RunInfo, summary: Summary) -> Section:
    w, load = info.workload, info.load
    return Section(
        "2. Test Configuration",
        [
            f"Workload: {w.name or 'not declared'} (seed {'n/a' if w.seed is None else w.seed}); "
            f"content: {w.content or 'not declared'}",
            f"Load model: {load.description or 'not declared'}",
            f"Requests: {summary.requests.total}; measurement window {summary.duration_s:.1f} s",
            f"Warm-up: {console.warmup_text(info.warmup)}",
            console.counting_text(info.tokenizer),
            console.itl_text(summary) if generates(summary, info) else not_applicable(info),
            f"Prefix caching: {info.sut.prefix_caching or 'not declared'}; guardrails: "
            f"{info.sut.guardrails or 'not declared'}",
            f"Clock: {info.clock}; synchronization: {console.clock_sync_text(info)}",
        ],
    )


def _results(summary: Summary, info: RunInfo | None = None) -> Section:
    t, r = summary.throughput, summary.requests

    def pair(name: str, s: Stats) -> str:
        return f"{name} P50 / P99: {fmt_ms(s.p50)} / {fmt_ms(s.p99)}"

    if generates(summary, info):
        bullets = [
            pair("TTFT", summary.ttft_ms),
            pair("TPOT", summary.tpot_ms),
            pair(console.itl_name(summary.itl_option), summary.itl_ms),
            pair("E2E", summary.e2e_ms),
            f"Output throughput: {t.output_tok_s:.1f} tok/s; request throughput {t.req_s:.3f} req/s",
        ]
    else:  # one body per request: its latency and input rates, and the line saying why there is no TTFT
        bullets = [b.removeprefix("- ") for b in endpoint_lines(summary, info)]
    bullets.append(f"Success: {r.ok} of {r.total} requests ({fmt_pct(r.success_rate)})")
    if summary.goodput.slo:
        bullets.append(f"Goodput: {summary.goodput.req_s or 0.0:.3f} req/s ({fmt_pct(summary.goodput.fraction)})")
    return Section("3. Results", bullets)


def run_tables(summary: Summary, info: RunInfo | None = None) -> list[Table]:
    """The console's tables of a run, as cells, each captioned with the endpoint it measured (run.json's client, when
    given); an API that answers in one body gets its latency table in place of Tables 1 to 6."""
    measured = measured_text(info)
    streams = generates(summary, info)
    texts = []
    if streams:
        texts.append(console.table1_ttft(summary, measured))
        if len(summary.ttft_by_input_tokens) > 1:
            texts.append(console.table2_ttft_by_input(summary, measured))
        texts += [console.table6_itl(summary, measured), console.table_per_request_itl(summary, measured)]
        texts.append(console.throughput_table(summary, measured))
    if not streams or summary.endpoint is not None:
        texts.append(endpoint_table(summary, measured))
    if summary.requests.failed:
        texts.append(console.failures_table(summary))
    texts += breakdown_tables(summary, console.itl_name(summary.itl_option))
    if streams and len(summary.fairness.classes) > 1:
        texts += [console.table8_classes(summary, measured), console.table9_fairness(summary, measured)]
    if summary.fluidity is not None:
        texts.append(console.fluidity_table(summary))
    if summary.server_metrics is not None or summary.energy is not None:
        texts.append(server_table(summary))
    if summary.sim is not None:
        texts.append(console.sim_table(summary))
    return [as_table(t) for t in texts if t]


def run_document(run_dir: Path, info: RunInfo, summary: Summary, cols: RecordColumns) -> Document:
    """The full report of one run directory."""
    notes = [f"Warm-up: {console.warmup_text(info.warmup)}", *console.disclosure_notes(info), *info.notes]
    for name, s in (("TTFT", summary.ttft_ms), (console.itl_name(summary.itl_option), summary.itl_ms)):
        notes += [f"{name}: {w}" for w in s.warnings if w != "no samples"]
    warning = console.client_warning(info)
    return Document(
        title=f"infermeter run report: {run_dir.name or run_dir}",
        banners=[warning] if warning is not None else [],
        sections=[
            _identification(info),
            _configuration(info, summary),
            _results(summary, info),
            Section(
                "4. Detailed Results",
                tables=run_tables(summary, info),
                charts=run_charts(cols, summary, run_dir, info.token_times == "endpoints"),
            ),
            Section("5. Methodology Compliance (deviations and limitations)", notes),
            Section(
                "6. Reproduction",
                [
                    f"Run directory: {run_dir} (run.json, records.parquet, summary.json)",
                    f"Same requests again: infermeter run --config {run_dir / 'run.json'}",
                    f"Recompute this report: infermeter report {run_dir} --html FILE",
                    "Software: " + ", ".join(f"{k} {v}" for k, v in info.software.items()),
                ],
            ),
        ],
    )


def suite_document(result: SuiteResult, infos: Sequence[RunInfo]) -> Document:
    """The full report of a test suite, from its suite.json and its runs' run.json."""
    return Document(
        title=f"infermeter test {result.suite}: {result.title} ({result.reference})",
        banners=[QUICK_BANNER] if result.quick else [],
        sections=suite_sections(result, infos),
    )
