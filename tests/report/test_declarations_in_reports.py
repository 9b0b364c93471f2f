"""What the reports say of a run's declarations and measurements: option A's figure named "Time Between Chunks" with
its chunk sizes (the IETF draft, 4.6.3), a cold start clearly indicated (4.5.3), the clocks' measured accuracy (4.7.2)
and the output tokens per GPU-second, in the run report, C.1, C.2 (Markdown and HTML) and the suite report."""

from __future__ import annotations

import html
from pathlib import Path

from infermeter.metrics.summary_model import Energy
from infermeter.report import console
from infermeter.report.documents import run_document
from infermeter.report.html import render_html
from infermeter.report.markdown import render_markdown
from infermeter.report.run_charts import itl_chart
from infermeter.report.suite import suite_report
from infermeter.run_info import RunInfo, Warmup
from infermeter.suite_result import Analysis, SuiteResult
from infermeter.suites.lab import Run
from tests.evidence import fake_run, info, stream

TBC = "Time Between Chunks"


def chunked(option: str, run_info: RunInfo | None = None) -> Run:
    """A run whose tokens arrive 4 to an event, summarized under ITL `option`."""
    return fake_run(stream(50, output=32, chunk=4), run_info or info(), itl_option=option)


def c2(run: Run) -> str:
    return render_markdown(run_document(Path("/nonexistent/r"), run.info, run.summary, run.columns()))


def test_option_a_reports_time_between_chunks_with_the_chunk_sizes() -> None:
    assert console.itl_name("A") == TBC and console.itl_name("B") == console.itl_name("C") == "ITL"
    run = chunked("A")
    table = console.table6_itl(run.summary)
    assert f"Table 6: {TBC} Results" in table and f"{TBC} P50" in table and "ITL P50" not in table
    assert "Chunk sizes" in table and "mean 4.00 tokens, max 4" in table
    c1 = console.minimum_report(run.summary, run.info)
    assert f"{TBC} measured with option A" in c1 and "chunk sizes mean 4.00 tokens" in c1
    full = c2(run)
    assert f"{TBC} P50 / P99" in full and "ITL P50 / P99" not in full
    assert TBC in render_html(run_document(Path("/nonexistent/r"), run.info, run.summary, run.columns()))
    chart = itl_chart(run.columns(), run.summary)
    assert chart is not None and chart.title.startswith(f"{TBC} distribution") and chart.x_title == f"{TBC} (ms)"


def test_options_b_and_c_keep_the_name_itl() -> None:
    run = chunked("B")
    table = console.table6_itl(run.summary)
    assert "Table 6: ITL Results" in table and TBC not in table and "Chunk sizes" not in table
    assert TBC not in console.minimum_report(run.summary, run.info) and TBC not in c2(run)


COLD = Warmup(done=False, cold_start=True, note="warm-up skipped (--warmup off): a cold start was measured")


def test_a_cold_start_is_clearly_indicated_in_every_report() -> None:
    run = chunked("B", info(warmup=COLD))
    c1 = console.minimum_report(run.summary, run.info)
    assert "Cold Start: yes" in c1 and "COLD START" in c1
    assert "cold start" in c2(run).lower()
    result = SuiteResult(
        suite="ttft",
        section="5.1",
        reference="IETF draft, section 5.1",
        title="TTFT",
        quick=False,
        params={},
        command="infermeter test ttft --warmup off",
        directory="/nonexistent",
        runs=[],
        analysis=Analysis(),
        requirements=[],
        verdict="not verifiable",
        started_at="2026-01-01T00:00:00.000Z",
        finished_at="2026-01-01T00:01:00.000Z",
    )
    assert "cold start" in suite_report(result, [run.info]).lower()
    warm = chunked("B")
    assert "cold start" not in console.minimum_report(warm.summary, warm.info).lower()


def test_the_measured_clock_accuracy_is_reported_with_its_figures() -> None:
    measured = info(
        clock_accuracy={
            "methods": ["chrony (chronyc tracking)", "HTTP Date bracket against the server"],
            "same_host": False,
            "ntp": {"source": "chrony (chronyc tracking)", "synchronised": True, "accuracy_ms": 1.234},
            "date": {"probes": 31, "offset_lo_ms": -2.5, "offset_hi_ms": 1.25, "rtt_ms_min": 0.4},
        }
    )
    run = chunked("B", measured)
    c1 = console.minimum_report(run.summary, run.info)
    assert "Clock accuracy (draft 4.7.2)" in c1 and "within 1.23 ms" in c1 and "[-2.5, +1.2] ms" in c1
    assert "31 HTTP Date probes" in c2(run)
    loopback = chunked("B", info(clock_accuracy={"methods": ["single machine"], "same_host": True}))
    assert "Clock accuracy" not in console.minimum_report(loopback.summary, loopback.info)


def test_a_measured_clock_is_not_called_undeclared() -> None:
    """C.1 and C.2 said "not declared (give --clock-sync)" above the measured accuracy; a mutant keeping that fails."""
    measured = info(
        clock_accuracy={
            "methods": ["chrony (chronyc tracking)"],
            "same_host": False,
            "ntp": {"source": "chrony (chronyc tracking)", "synchronised": True, "accuracy_ms": 1.0},
        }
    )
    run = chunked("B", measured)
    c1 = console.minimum_report(run.summary, run.info)
    assert "Clock synchronization: measured (below): chrony (chronyc tracking)" in c1 and "give --clock-sync" not in c1
    assert "synchronization: measured (below)" in c2(run)
    unmeasured = chunked("B", info(clock_accuracy={"same_host": False, "unavailable": ["chronyc not found"]}))
    assert "not declared (draft 4.7.2: give --clock-sync)" in console.minimum_report(
        unmeasured.summary, unmeasured.info
    )
    declared = chunked("B", info(sut={"clock_sync": "PTP, 50 us"}, clock_accuracy=measured.clock_accuracy))
    assert "Clock synchronization: PTP, 50 us" in console.minimum_report(declared.summary, declared.info)


SPECIAL = {
    "bos_eos": "BOS <s> is written by the chat template",
    "chat_template": "the chat template that comes with m",
    "system_prompt": "none is sent",
    "tool_calls": "none: no tools or functions are sent",
}


def test_the_special_token_declaration_is_in_every_run_report() -> None:
    """4.4.3's declaration was in run.json only: C.1 (and the run report that ends with it) and C.2 give it."""
    run = chunked("B", info(tokenizer={"special": SPECIAL}))
    line = "Special tokens (draft 4.4.3): BOS/EOS: BOS <s> is written by the chat template. Chat template: the chat"
    assert line in console.minimum_report(run.summary, run.info)
    assert line in console.full_report(run.summary, run.info)
    assert line in c2(run)
    page = render_html(run_document(Path("/nonexistent/r"), run.info, run.summary, run.columns()))
    assert html.escape(line, quote=False) in page  # its <s> escaped
    old = chunked("B", info(tokenizer={"special_tokens": "BOS/EOS excluded from counts"}))
    assert "Special tokens (draft 4.4.3): BOS/EOS excluded from counts" in c2(old)  # an earlier run's sentence
    assert "Special tokens (draft 4.4.3): not declared" in console.minimum_report(chunked("B").summary, info())


def test_option_a_names_time_between_chunks_in_the_comparison_and_per_request_tables() -> None:
    a, b = chunked("A"), chunked("B")
    table = console.comparison_table([("a", a.summary), ("a2", a.summary)])
    assert f"{TBC} P50" in table and f"{TBC} P99" in table and "ITL P50" not in table
    mixed = console.comparison_table([("a", a.summary), ("b", b.summary)])
    assert f"ITL / {TBC} P50" in mixed
    per_request = console.table_per_request_itl(a.summary)
    assert f"Jitter ({TBC} std)" in per_request and f"Per-request {TBC} statistics" in per_request
    assert "ITL" not in per_request
    assert "Jitter (ITL std)" in console.table_per_request_itl(b.summary)


def test_the_server_table_shows_output_tokens_per_gpu_second() -> None:
    run = chunked("B")
    run.summary.energy = Energy(
        window_s=4.0,
        sources={},
        energy_j=None,
        joules_per_output_token=None,
        gpus=2,
        gpu_seconds=8.0,
        output_tok_per_gpu_s=250.0,
        notes=[],
    )
    assert "Output tokens per GPU-second" in console.server_table(run.summary) and "250.0 (over 2 GPUs)" in (
        console.server_table(run.summary)
    )
