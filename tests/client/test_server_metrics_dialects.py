"""Each engine's /metrics, taken before and after a run (tests/fixtures/metrics), read into the same roles: queue
time, the prefill/decode split and KV usage where the engine exports them, absent where it does not."""

from __future__ import annotations

from pathlib import Path

import pytest

from infermeter.client.metric_dialects import recognise
from infermeter.client.server_metrics import ROLES, MetricsSeries
from infermeter.metrics.summary_model import ServerMetrics

FIXTURES = Path(__file__).parent.parent / "fixtures" / "metrics"


def scraped(engine: str) -> MetricsSeries:
    m = MetricsSeries()
    m.add(0.0, (FIXTURES / f"{engine}_before.txt").read_text())
    m.add(10.0, (FIXTURES / f"{engine}_after.txt").read_text())
    return m


def summary(engine: str) -> ServerMetrics:
    return scraped(engine).summary()


def test_vllm_queue_prefill_decode_and_kv_from_histogram_deltas():
    s = summary("vllm")
    assert s.dialect == "vllm"
    # queue: +20 observations, sum 1.0 -> 5.0 s: mean 200 ms; buckets +10 <= 0.3, +6 <= 0.5, +4 <= 0.8
    q = s.queue_time
    assert q is not None and q.count == 20 and q.mean_ms == pytest.approx(200.0)
    assert q.p50_ms == pytest.approx(300.0)  # rank 10 closes the first bucket
    assert q.p95_ms == pytest.approx(500 + 300 * 3 / 4)  # rank 19: 3 of the 4 in (0.5, 0.8]
    # prefill: +20, sum +6.0 s: 300 ms; rank 10 is 2 of the 12 in (0.3, 0.5]
    p = s.prefill_time
    assert p is not None and p.count == 20 and p.mean_ms == pytest.approx(300.0)
    assert p.p50_ms == pytest.approx(300 + 200 * 2 / 12)
    # decode: +20, sum +60 s: 3 s; rank 10 is 6 of the 16 in (2.5, 5]
    d = s.decode_time
    assert d is not None and d.count == 20 and d.mean_ms == pytest.approx(3000.0)
    assert d.p50_ms == pytest.approx(2500 + 2500 * 6 / 16) and s.per_batch is None  # per request
    assert s.kv_usage is not None and s.kv_usage.max == pytest.approx(0.42) and s.kv_usage.mean == pytest.approx(0.21)
    assert s.prefix_cache_hit_rate == pytest.approx(1000 / 4000)
    assert s.prompt_tokens is not None and s.prompt_tokens.delta == 5120
    assert s.generation_tokens is not None and s.generation_tokens.delta == 2560


def test_sglang_queue_time_histogram_and_token_usage():
    s = summary("sglang")
    assert s.dialect == "sglang"
    q = s.queue_time
    # +40 observations, sum 0.1 -> 8.1 s: mean 200 ms; 20 of them <= 0.1 s, so P50 (rank 20) is 100 ms
    assert q is not None and q.count == 40 and q.mean_ms == pytest.approx(200.0) and q.p50_ms == pytest.approx(100.0)
    assert q.p95_ms == pytest.approx(500 + 500 * 2 / 4)  # rank 38: 2 of the 4 in (0.5, 1]
    assert s.waiting is not None and s.waiting.metric == "sglang:num_queue_reqs" and s.waiting.max == 5
    assert s.kv_usage is not None and s.kv_usage.mean == pytest.approx((0.05 + 0.61) / 2)
    assert s.prefix_cache_hit_rate == pytest.approx(0.25)  # the gauge's last value
    dumped = s.model_dump(mode="json")
    assert "prefill_time" not in dumped and "decode_time" not in dumped  # SGLang does not export them


def test_tgi_batch_split_queue_time_and_no_kv_usage():
    """TGI's series appear once first recorded: the run's window starts them at zero (the `before` lacks them)."""
    s = summary("tgi")
    assert s.dialect == "tgi"
    q = s.queue_time
    assert q is not None and q.metric == "tgi_request_queue_duration"
    assert q.count == 20 and q.mean_ms == pytest.approx(25.0)  # 10 x 10 ms + 10 x 40 ms
    p, d = s.prefill_time, s.decode_time
    assert p is not None and p.metric == 'tgi_batch_inference_duration{method="prefill"}'
    assert p.count == 12 and p.mean_ms == pytest.approx(80.0)  # 6 x 50 ms + 6 x 110 ms
    assert d is not None and d.count == 400 and d.mean_ms == pytest.approx(25.0)
    assert s.per_batch == ["prefill_time", "decode_time"]  # one observation per batch step, not per request
    assert s.waiting is not None and s.waiting.metric == "tgi_queue_size" and s.waiting.max == 4
    assert s.running is not None and s.running.metric == "tgi_batch_current_size" and s.running.mean == 8
    assert s.prompt_tokens is not None and s.prompt_tokens.delta == pytest.approx(4096)
    dumped = s.model_dump(mode="json")
    assert "kv_usage" not in dumped  # TGI exports none: absent, not zero


def test_tgi_falls_back_to_the_forward_duration():
    text = (FIXTURES / "tgi_after.txt").read_text()
    kept = "\n".join(line for line in text.splitlines() if "tgi_batch_inference_duration" not in line)
    m = MetricsSeries()
    m.add(0.0, (FIXTURES / "tgi_before.txt").read_text())
    m.add(10.0, kept)
    p = m.summary().prefill_time
    assert p is not None and p.metric == 'tgi_batch_forward_duration{method="prefill"}'
    assert p.count == 12 and p.mean_ms == pytest.approx((6 * 45 + 6 * 100) / 12)


def test_triton_trtllm_counter_mean_queue_and_kv_blocks():
    s = summary("triton_trtllm")
    assert s.dialect == "triton"
    q = s.queue_time
    # tensorrt_llm's queue counter +80000 us over its +40 successful requests: 2 ms; no quantiles from a counter.
    # Summed over the ensemble's models it would be (80000 + 400 + 40000 + 512000) us / (40 + 40 + 40 + 5120): 0.12 ms
    assert q is not None and q.count == 40 and q.mean_ms == pytest.approx(2.0)
    assert q.metric == (
        'nv_inference_queue_duration_us{model="tensorrt_llm"} / nv_inference_request_success{model="tensorrt_llm"}'
    )
    assert set(q.model_dump(mode="json")) == {"metric", "count", "mean_ms"}
    kv = s.kv_usage
    assert kv is not None and kv.max == pytest.approx(2500 / 6250) and kv.mean == pytest.approx(0.2)
    assert s.waiting is not None and s.waiting.metric == 'nv_trt_llm_request_metrics{request_type="waiting"}'
    assert s.waiting.max == 6  # TensorRT-LLM's queue, not Triton's pending count (0)
    assert s.running is not None and s.running.mean == 12
    assert s.batch_utilization == pytest.approx(12 / 256)  # the mean active over request_type="max"
    dumped = s.model_dump(mode="json")
    assert "prefill_time" not in dumped and "decode_time" not in dumped


def _triton_models(keep: set[str], rename: dict[str, str] | None = None) -> MetricsSeries:
    """The Triton fixtures with only the `keep` models' nv_inference_* lines (each renamed as `rename` says)."""

    def kept(name: str) -> str:
        lines = []
        for line in (FIXTURES / name).read_text().splitlines():
            model = line.partition('model="')[2].partition('"')[0]
            if line.startswith("nv_inference_") and model not in keep:
                continue
            for old, new in (rename or {}).items():
                line = line.replace(f'model="{old}"', f'model="{new}"')
            lines.append(line)
        return "\n".join(lines) + "\n"

    m = MetricsSeries()
    m.add(0.0, kept("triton_trtllm_before.txt"))
    m.add(10.0, kept("triton_trtllm_after.txt"))
    return m


def test_triton_queue_time_of_a_single_model_is_that_models():
    q = _triton_models({"tensorrt_llm"}, rename={"tensorrt_llm": "llama"}).summary().queue_time
    assert q is not None and q.count == 40 and q.mean_ms == pytest.approx(2.0)  # +80000 us / +40
    assert q.metric == 'nv_inference_queue_duration_us{model="llama"} / nv_inference_request_success{model="llama"}'


def test_triton_queue_time_of_several_models_without_tensorrt_llm_is_their_sum_and_says_so():
    q = _triton_models({"ensemble", "preprocessing", "postprocessing"}).summary().queue_time
    # (400 + 40000 + 512000) us over (40 + 40 + 5120) successes
    assert q is not None and q.count == 5200 and q.mean_ms == pytest.approx(552400 / 5200 / 1000)
    assert q.metric == (
        "nv_inference_queue_duration_us / nv_inference_request_success, summed over models ensemble, "
        "postprocessing, preprocessing"
    )


def test_triton_kv_fraction_when_block_counts_are_absent():
    def without_blocks(name: str) -> str:
        text = (FIXTURES / name).read_text()
        return "\n".join(line for line in text.splitlines() if 'type="used"' not in line)

    m = MetricsSeries()
    m.add(0.0, without_blocks("triton_trtllm_before.txt"))
    m.add(10.0, without_blocks("triton_trtllm_after.txt"))
    kv = m.summary().kv_usage
    assert kv is not None and kv.metric.endswith('kv_cache_block_type="fraction"}') and kv.max == pytest.approx(0.4)


def test_llamacpp_busy_seconds_split_prefill_and_decode():
    s = summary("llamacpp")
    assert s.dialect == "llamacpp"
    assert s.prefill_seconds is not None and s.prefill_seconds.delta == pytest.approx(10.0)
    assert s.decode_seconds is not None and s.decode_seconds.delta == pytest.approx(80.0)
    assert s.generation_tokens is not None and s.generation_tokens.delta == 4000
    assert s.kv_usage is not None and s.kv_usage.max == pytest.approx(0.25)
    assert "queue_time" not in s.model_dump(mode="json")


@pytest.mark.parametrize(
    ("names", "dialect"),
    [
        ({"vllm:num_requests_running", "python_gc_objects_collected_total"}, "vllm"),
        ({"sglang:token_usage"}, "sglang"),
        ({"tgi_queue_size"}, "tgi"),
        ({"nv_inference_count_total"}, "triton"),
        ({"llamacpp:requests_processing"}, "llamacpp"),
        ({"process_cpu_seconds_total"}, "unknown"),
    ],
)
def test_the_dialect_is_recognised_by_its_prefixes(names, dialect):
    assert recognise(names) == dialect


def test_charts_still_find_the_plain_names_of_each_role():
    assert "vllm:num_requests_waiting" in ROLES["waiting"] and "tgi_queue_size" in ROLES["waiting"]
    assert "sglang:token_usage" in ROLES["kv_usage"]
    assert not any("{" in name for names in ROLES.values() for name in names)  # labelled selectors stay out
