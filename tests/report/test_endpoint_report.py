"""Reports of APIs that answer in one body (embeddings, rerank): the latency and inputs table and a line saying TTFT,
ITL and TPOT do not apply, in place of Tables 1 to 6; and every run's report naming the endpoint it measured (the run
report's first line, the draft tables' captions, the suite report and the comparison's groups)."""

from __future__ import annotations

from pathlib import Path

from infermeter.metrics import RecordColumns, summarize
from infermeter.report import console
from infermeter.report.documents import run_document, run_tables
from infermeter.report.endpoint import measured_text
from infermeter.report.html import render_html
from infermeter.report.markdown import render_markdown
from infermeter.report.suite import suite_report
from infermeter.run_info import RunInfo
from infermeter.suite_result import Analysis, SuiteResult, Table
from tests.evidence import info, stream
from tests.metrics.test_endpoint_metrics import EMBEDDINGS

EMBED_CLIENT = {"api": "embeddings", "endpoint": "http://10.0.0.2:8000/v1/embeddings", "generates": False}
CHAT_CLIENT = {"api": "chat", "endpoint": "http://10.0.0.2:8000/v1/chat/completions", "generates": True}
NOT_APPLY = "TTFT, ITL and TPOT do not apply to --api embeddings (one body per request, no token stream)"
CHAT = "measured: --api chat, POST /v1/chat/completions"
# EMBEDDINGS' latencies are 50, 30 and 90 ms: P90 50 + 0.8 x 40, P99 50 + 0.98 x 40; 10 inputs and 108 input tokens
# over a 0.29 s window; 10 / 3 inputs per request on average, at most 4
LATENCY_ROW = "| Latency P50 / P90 / P99         | 50.0 ms / 82.0 ms / 89.2 ms |"
RATE_ROWS = (
    "| Inputs/s                        | 34.5 inputs/s",
    "| Inputs per request (mean / max) | 3.33 / 4 ",
    "| Input throughput                | 372.4 tok/s",
)


def embeddings_run(client: dict[str, object] | None = EMBED_CLIENT) -> tuple[RunInfo, RecordColumns]:
    return info(client=client) if client is not None else info(), RecordColumns.from_records(EMBEDDINGS)


def markdown(run_info: RunInfo, cols: RecordColumns) -> str:
    return render_markdown(run_document(Path("/nonexistent/r"), run_info, summarize(cols), cols))


def test_an_embeddings_report_shows_latency_and_inputs_and_no_ttft_table() -> None:
    run_info, cols = embeddings_run()
    summary = summarize(cols)
    full = console.full_report(summary, run_info)
    assert full.startswith("measured: --api embeddings, POST /v1/embeddings\n")
    assert LATENCY_ROW in full and all(row in full for row in RATE_ROWS)
    assert "Latency and inputs (one body per request); measured: --api embeddings, POST /v1/embeddings" in full
    assert full.count(NOT_APPLY) == 2  # above the table, and in the minimum report's key results
    assert "Table 1" not in full and "Table 6" not in full and "TTFT P50" not in full
    minimum = console.minimum_report(summary, run_info)  # what `infermeter run` ends with: the table drawn in it
    assert LATENCY_ROW in minimum and "- Latency P50 / P90 / P99: 50.0 ms / 82.0 ms / 89.2 ms" in minimum
    assert f"- {NOT_APPLY}" in minimum and "TTFT P50" not in minimum and "Throughput at P99 TTFT" not in minimum
    md = markdown(run_info, cols)
    assert "**Latency and inputs (one body per request); measured: --api embeddings, POST /v1/embeddings**" in md
    assert "| Latency P50 / P90 / P99 | 50.0 ms / 82.0 ms / 89.2 ms |" in md and "| Inputs/s | 34.5 inputs/s |" in md
    assert f"- {NOT_APPLY}" in md and "Table 1" not in md and "TTFT P50" not in md and "Table 6" not in md
    assert "- measured: --api embeddings, POST /v1/embeddings" in md
    assert "Latency (one body per request): cumulative distribution" in md  # its chart, drawn in the HTML report


def test_a_run_json_without_a_client_block_is_known_by_its_records() -> None:
    run_info, cols = embeddings_run(client=None)
    summary = summarize(cols)
    full = console.full_report(summary, run_info)
    assert "measured:" not in full and LATENCY_ROW in full and "Table 1" not in full
    assert "TTFT, ITL and TPOT do not apply to this API (one body per request, no token stream)" in full


def test_a_chat_report_names_its_endpoint_in_its_first_line_and_its_captions() -> None:
    run_info = info(client=CHAT_CLIENT)
    cols = RecordColumns.from_records(stream(5, ttft=0.05, itl=0.01, output=4))
    summary = summarize(cols)
    full = console.full_report(summary, run_info)
    assert full.startswith(CHAT + "\n")
    assert f"Table 1: TTFT Results; {CHAT}" in full and "Table 6: ITL Results (option B" in full
    assert f"chunk time given to each of its tokens)); {CHAT}" in full and "do not apply" not in full
    assert "Latency and inputs" not in full  # no request carried inputs
    assert f"=== LLM Benchmark Report (Minimum) ===\n{CHAT}\n" in console.minimum_report(summary, run_info)
    captions = [t.caption for t in run_tables(summary, run_info)]
    assert f"Table 1: TTFT Results; {CHAT}" in captions and f"Throughput and goodput; {CHAT}" in captions
    md = markdown(run_info, cols)
    assert f"**Table 1: TTFT Results; {CHAT}**" in md and f"- {CHAT}" in md
    assert f"<caption>Table 1: TTFT Results; {CHAT}</caption>" in render_html(
        run_document(Path("/nonexistent/r"), run_info, summary, cols)
    )
    assert next(t.caption for t in run_tables(summary)) == "Table 1: TTFT Results"  # no run.json: as before


def test_the_endpoint_is_named_for_grpc_and_for_runs_before_apis() -> None:
    grpc = info(client={"backend": "grpc", "transport": "gRPC, KServe v2 / Triton ModelStreamInfer", "endpoint": "h:1"})
    assert measured_text(grpc) == "--backend grpc, gRPC, KServe v2 / Triton ModelStreamInfer at h:1"
    assert measured_text(info(client={"endpoint": "http://h:8000/v1/completions"})) == (
        "--api completions, POST /v1/completions"
    )
    assert measured_text(info()) is None


def test_a_suite_report_names_the_endpoint_its_runs_measured() -> None:
    table = Table(caption="Table 1: TTFT Results", headers=["Metric", "Value"], rows=[["TTFT P50", "12.5 ms"]])
    result = SuiteResult(
        suite="ttft", section="5.1", reference="IETF draft, section 5.1", title="TTFT", quick=False, params={},
        command="infermeter test ttft", directory="/nonexistent", runs=[], analysis=Analysis(tables=[table]),
        requirements=[], verdict="not verifiable", started_at="s", finished_at="f",
    )  # fmt: skip
    text = suite_report(result, [info(client=CHAT_CLIENT), info(client=CHAT_CLIENT)])
    assert "- Measured: --api chat, POST /v1/chat/completions\n" in text
    assert f"Table 1: TTFT Results; {CHAT}" in text
    assert "Measured" not in suite_report(result, [info()])  # runs that name no endpoint (simulated)


def test_runs_compared_side_by_side_show_inputs_per_second_where_one_was_answered_in_one_body() -> None:
    chat = summarize(RecordColumns.from_records(stream(5, ttft=0.05, itl=0.01, output=4)))
    embeddings = summarize(RecordColumns.from_records(EMBEDDINGS))
    table = console.comparison_table([("chat", chat), ("embeddings", embeddings)])
    assert "| Inputs/s           | n/a          | 34.5         |" in table
    assert "Inputs/s" not in console.comparison_table([("a", chat), ("b", chat)])


def test_the_server_table_shows_the_engines_phase_timings_and_the_dcgm_energy() -> None:
    from infermeter.metrics.columns import RecordColumns
    from infermeter.metrics.summary import summarize
    from infermeter.metrics.summary_model import Energy, GpuTelemetry, HistogramDelta, ServerGpus, ServerMetrics
    from infermeter.records import RequestRecord
    from infermeter.report.server_table import server_table

    rec = RequestRecord(0, output_tokens=2, submitted_at=0.0, token_times=[0.1, 0.2], chunk_times=[0.1, 0.2],
                        chunk_tokens=[1, 1])  # fmt: skip
    metrics = ServerMetrics(
        scrapes=3,
        failed_scrapes=0,
        dialect="tgi",
        queue_time=HistogramDelta(metric="tgi_request_queue_duration", count=4, mean_ms=12.5, p95_ms=30.0),
        prefill_time=HistogramDelta(metric="tgi_batch_inference_duration", count=2, mean_ms=80.0),
        per_batch=["prefill_time"],
    )
    gpu = GpuTelemetry(gpu="0", uuid=None, model=None, energy_j=120.0, power_w_mean=None, util_pct_mean=None,
                       mem_used_mib_max=None, mem_free_mib_min=None, sm_clock_mhz_mean=None)  # fmt: skip
    dcgm = ServerGpus(source="DCGM exporter http://h:9400/metrics: total energy counter", window_s=2.0, scrapes=3,
                      energy_j=120.0, power_w=60.0, joules_per_output_token=60.0, gpus=[gpu])  # fmt: skip
    energy = Energy(window_s=2.0, sources={}, energy_j=None, joules_per_output_token=None, notes=[], server_gpus=dcgm)
    summary = summarize(RecordColumns.from_records([rec])).model_copy(
        update={"server_metrics": metrics, "energy": energy}
    )
    text = server_table(summary)
    assert "Metric names read" in text and "tgi" in text
    assert "Queue time (per request, as the server reports it)" in text and "mean 12.5 ms, p95 30.0 ms" in text
    assert "Prefill time (per batch step, as the server reports it)" in text and "mean 80.0 ms" in text
    assert "Decode time" not in text  # not exported: absent, not zero
    assert "Server GPUs' energy (1 GPUs, DCGM)" in text and "120.0 J (60 J/token)" in text
