"""Metrics of APIs that answer with one body, not a token stream (embeddings, rerank): a request's latency ends at its
reply's last byte, the window at the last completion, the token metrics are absent (n 0, nulls), and the `endpoint`
block gives inputs per request, inputs/s and input tokens/s; streamed runs have no such block."""

from __future__ import annotations

import orjson
import pytest

from infermeter.metrics import RecordColumns, latency, summarize
from infermeter.metrics.summary_model import Stats, parse_summary
from infermeter.metrics.throughput import measurement_window
from infermeter.records import RequestRecord, RunInfo, records_to_table, write_records


def embedding(
    request_id: int,
    submitted: float,
    completed: float | None,
    inputs: int,
    input_tokens: int,
    status: str = "ok",
) -> RequestRecord:
    """An embeddings request: `inputs` texts of `input_tokens` tokens in all, answered in one body at `completed`."""
    return RequestRecord(
        request_id=request_id,
        input_tokens=input_tokens,
        output_tokens=0,
        max_tokens=0,
        scheduled_at=submitted,
        submitted_at=submitted,
        status=status,  # type: ignore[arg-type]
        error="" if status == "ok" else "HTTP 500: boom",
        completed_at=completed,
        inputs=inputs,
    )


def streamed(request_id: int, submitted: float, times: list[float], input_tokens: int = 10) -> RequestRecord:
    """A chat request whose tokens arrive one per event at `times`."""
    return RequestRecord(
        request_id=request_id,
        input_tokens=input_tokens,
        output_tokens=len(times),
        max_tokens=len(times),
        scheduled_at=submitted,
        submitted_at=submitted,
        token_times=times,
        chunk_times=times,
        chunk_tokens=[1] * len(times),
    )


EMBEDDINGS = [
    embedding(0, 0.0, 0.050, inputs=4, input_tokens=40),
    embedding(1, 0.1, 0.130, inputs=4, input_tokens=48),
    embedding(2, 0.2, 0.290, inputs=2, input_tokens=20),
    embedding(3, 0.3, None, inputs=4, input_tokens=40, status="error"),  # failed: in no rate, no latency
]


def absent(s: Stats) -> bool:
    return s.n == 0 and all(s.value(k) is None for k in ("mean", "std", "min", "max", "p50", "p99", "p99.9"))


def test_an_embeddings_run_has_latency_window_and_rates_and_no_token_metrics() -> None:
    cols = RecordColumns.from_table(records_to_table(EMBEDDINGS))
    assert list(latency.e2e(cols)[:3]) == pytest.approx([0.050, 0.030, 0.090])
    assert measurement_window(cols) == pytest.approx((0.0, 0.290))  # the last ok reply's last byte
    s = summarize(cols, slo={"e2e": 0.060})
    assert s.duration_s == pytest.approx(0.290)
    assert s.e2e_ms.n == 3 and s.e2e_ms.p50 == pytest.approx(50.0) and s.e2e_ms.max == pytest.approx(90.0)
    assert s.e2e_ms.mean == pytest.approx((50 + 30 + 90) / 3)
    for name in ("ttft_ms", "itl_ms", "tpot_ms", "normalized_latency_ms", "jitter_ms", "max_pause_ms"):
        assert absent(getattr(s, name)), name
    t = s.throughput
    assert t.output_tok_s == 0.0
    assert t.input_tok_s == pytest.approx((40 + 48 + 20) / 0.290)
    assert t.req_s == pytest.approx(3 / 0.290)
    assert s.goodput.met == 2  # 50 ms and 30 ms meet e2e <= 60 ms; 90 ms does not
    e = s.endpoint
    assert e is not None
    assert e.inputs_s == pytest.approx((4 + 4 + 2) / 0.290)
    assert e.input_tok_s == pytest.approx((40 + 48 + 20) / 0.290)
    assert e.inputs.n == 3 and e.inputs.mean == pytest.approx(10 / 3) and e.inputs.min == 2 and e.inputs.max == 4
    assert e.latency_ms.n == 3 and e.latency_ms.p50 == pytest.approx(50.0) and e.latency_ms.min == pytest.approx(30.0)


def test_a_mixed_run_keeps_token_metrics_to_the_streams_and_the_block_to_the_bodies() -> None:
    records = [
        streamed(0, 0.0, [0.05, 0.06, 0.07]),
        embedding(1, 0.1, 0.400, inputs=8, input_tokens=80),
        embedding(2, 0.2, 0.250, inputs=2, input_tokens=20),
    ]
    s = summarize(RecordColumns.from_records(records))
    assert s.duration_s == pytest.approx(0.400)
    assert s.ttft_ms.n == 1 and s.ttft_ms.p50 == pytest.approx(50.0)
    assert s.tpot_ms.n == 1 and s.tpot_ms.p50 == pytest.approx(10.0)
    assert s.itl_ms.n == 2 and s.normalized_latency_ms.n == 1
    assert s.e2e_ms.n == 3 and sorted([s.e2e_ms.min, s.e2e_ms.p50, s.e2e_ms.max]) == pytest.approx([50, 70, 300])
    assert s.throughput.input_tok_s == pytest.approx(110 / 0.400)
    assert s.throughput.output_tok_s == pytest.approx(3 / 0.400)
    e = s.endpoint
    assert e is not None and e.latency_ms.n == 2
    assert [e.latency_ms.min, e.latency_ms.max] == pytest.approx([50.0, 300.0])
    assert e.inputs_s == pytest.approx(10 / 0.400) and e.input_tok_s == pytest.approx(100 / 0.400)


def test_a_streamed_run_has_no_endpoint_block_and_the_summary_reads_back_equal() -> None:
    chat = summarize(RecordColumns.from_records([streamed(0, 0.0, [0.05, 0.06]), streamed(1, 0.1, [0.2, 0.25])]))
    doc = chat.model_dump(mode="json")
    assert chat.endpoint is None and "endpoint" not in doc
    assert doc["e2e_ms"]["max"] == pytest.approx(150.0)  # the last token, as ever
    embeddings = summarize(RecordColumns.from_records(EMBEDDINGS))
    for summary in (chat, embeddings):
        written = orjson.dumps(summary.model_dump(mode="json"))
        back = parse_summary(orjson.loads(written), "summary.json")
        assert back == summary and orjson.dumps(back.model_dump(mode="json")) == written
    assert set(orjson.loads(orjson.dumps(embeddings.model_dump(mode="json")))["endpoint"]) == {
        "inputs",
        "inputs_s",
        "input_tok_s",
        "latency_ms",
    }


def test_a_run_directory_reads_the_one_body_fields_as_a_table_does(tmp_path) -> None:
    write_records(tmp_path / "run", RunInfo(kind="test"), EMBEDDINGS)
    lazy = summarize(RecordColumns.of_run(tmp_path / "run"))
    assert lazy.model_dump() == summarize(RecordColumns.from_records(EMBEDDINGS)).model_dump()
    assert lazy.endpoint is not None and lazy.e2e_ms.n == 3
