"""The emulator's /metrics in SGLang's, TGI's or Triton's (TensorRT-LLM's) names and units: the engine's same state
and the same series vLLM's names expose (emulator/metrics.py), read at scrape time.  SGLang's are prometheus_client
families (counters with `_total`); TGI's histograms are in seconds, its batch histograms labelled by method (prefill,
decode), and it exports no KV usage; Triton's durations are cumulative microsecond counters labelled by model and
version, beside TensorRT-LLM's request, KV-block and in-flight batcher gauges."""

from __future__ import annotations

import time
from typing import Any

from infermeter.emulator.engine_loop import RealClockEngine
from infermeter.emulator.exposition_text import Family, counter, gauge, histogram, render
from infermeter.emulator.metrics import ServerMetrics
from infermeter.emulator.metrics_series import DialectSeries


def exposition(metrics: ServerMetrics, engine: RealClockEngine) -> bytes:
    """The emulator's /metrics text in its dialect: vLLM's names, or SGLang's, TGI's or Triton's."""
    if metrics.more is None:
        return metrics.vllm_exposition(engine)
    metrics.count_preemptions(engine)
    return dialect_exposition(metrics.dialect, metrics, metrics.more, engine)


def dialect_exposition(dialect: str, metrics: ServerMetrics, more: DialectSeries, engine: RealClockEngine) -> bytes:
    """The exposition text of one dialect (sglang, tgi or triton)."""
    build = {"sglang": sglang_families, "tgi": tgi_families, "triton": triton_families}[dialect]
    return render(build(metrics, more, engine))


def sglang_families(metrics: ServerMetrics, more: DialectSeries, engine: RealClockEngine) -> list[Family]:
    labels = {"model_name": metrics.model}
    queries, hits = _value(metrics.prefix_queries), _value(metrics.prefix_hits)
    generated = _value(metrics.generation_tokens)
    now = time.perf_counter()
    then = more.throughput_mark
    rate = (generated - then[1]) / (now - then[0]) if then is not None and now > then[0] else 0.0
    more.throughput_mark = (now, generated)
    return [
        gauge("sglang:num_running_reqs", "The number of running requests.", [(labels, engine.running)]),
        gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.", [(labels, engine.waiting)]),
        gauge("sglang:token_usage", "The token usage of the KV cache (0-1).", [(labels, engine.core.memory.usage)]),
        gauge("sglang:cache_hit_rate", "The prefix cache hit rate.", [(labels, hits / queries if queries else 0.0)]),
        gauge("sglang:gen_throughput", "The generation throughput (token/s).", [(labels, rate)]),
        counter("sglang:prompt_tokens", "Number of prefill tokens processed.",
                [(labels, _value(metrics.prefill_tokens))], "sglang:prompt_tokens_total"),
        counter("sglang:generation_tokens", "Number of generation tokens processed.", [(labels, generated)],
                "sglang:generation_tokens_total"),
        counter("sglang:num_requests", "The number of requests processed.", [(labels, _value(metrics.requests_ok))],
                "sglang:num_requests_total"),
        histogram("sglang:queue_time_seconds", "Histogram of queueing time in seconds.",
                  [(labels, metrics.queue_time)]),
        histogram("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                  [(labels, metrics.ttft)]),
        histogram("sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
                  [(labels, metrics.itl)]),
        histogram("sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds",
                  [(labels, metrics.e2e)]),
    ]  # fmt: skip


def tgi_families(metrics: ServerMetrics, more: DialectSeries, engine: RealClockEngine) -> list[Family]:
    none: dict[str, str] = {}
    ok = _value(metrics.requests_ok)
    steps = [({"method": "prefill"}, more.prefill_steps), ({"method": "decode"}, more.decode_steps)]
    batch_tokens = sum(r.prompt + r.output for r in engine.core.running)
    return [
        gauge("tgi_queue_size", "Requests waiting in the queue.", [(none, engine.waiting)]),
        gauge("tgi_batch_current_size", "Requests in the current batch.", [(none, engine.running)]),
        gauge("tgi_batch_current_max_tokens", "Most tokens the current batch may hold.", [(none, batch_tokens)]),
        counter("tgi_request_count", "Requests received.", [(none, ok + metrics.failures)]),
        counter("tgi_request_success", "Requests served.", [(none, ok)]),
        histogram("tgi_request_duration", "Request duration (s).", [(none, metrics.e2e)]),
        histogram("tgi_request_queue_duration", "Time in the queue (s).", [(none, metrics.queue_time)]),
        histogram("tgi_request_inference_duration", "Inference duration (s).", [(none, more.inference_time)]),
        histogram("tgi_request_mean_time_per_token_duration", "Mean time per output token (s).",
                  [(none, more.mean_time_per_token)]),
        histogram("tgi_request_input_length", "Input tokens per request.", [(none, more.input_length)]),
        histogram("tgi_request_generated_tokens", "Generated tokens per request.", [(none, more.generated)]),
        histogram("tgi_batch_inference_duration", "Batch inference duration (s).", steps),
        histogram("tgi_batch_forward_duration", "Batch forward duration (s).", steps),
    ]  # fmt: skip


def triton_families(metrics: ServerMetrics, more: DialectSeries, engine: RealClockEngine) -> list[Family]:
    model = {"model": metrics.model, "version": "1"}
    ok = _value(metrics.requests_ok)
    config = engine.config
    guard_in_us = ok * config.input_filter_ms * 1e3  # each finished request passed the input guardrail once
    guard_out_us = _value(metrics.generation_tokens) * config.output_filter_ms * 1e3

    def us(h: Any) -> int:
        return round(h.snapshot()[1] * 1e6)

    def cumulative(name: str, doc: str, value: float) -> Family:
        return counter(name, doc, [(model, value)])

    running = engine.core.running
    context = [r for r in running if r.prefilling]
    memory = engine.core.memory
    paused = engine.paused
    return [
        cumulative("nv_inference_request_success", "Number of successful inference requests, all batch sizes", ok),
        cumulative("nv_inference_request_failure", "Number of failed inference requests, all batch sizes",
                   metrics.failures),
        cumulative("nv_inference_count", "Number of inferences performed (does not include cached requests)",
                   more.inferences),
        cumulative("nv_inference_exec_count", "Number of model executions performed", more.steps),
        cumulative("nv_inference_request_duration_us", "Cumulative inference request duration in microseconds",
                   us(metrics.e2e)),
        cumulative("nv_inference_queue_duration_us", "Cumulative inference queuing duration in microseconds",
                   us(metrics.queue_time)),
        cumulative("nv_inference_compute_input_duration_us", "Cumulative compute input duration in microseconds",
                   round(guard_in_us)),
        cumulative("nv_inference_compute_infer_duration_us", "Cumulative compute inference duration in microseconds",
                   us(more.inference_time)),
        cumulative("nv_inference_compute_output_duration_us", "Cumulative inference compute output duration in "
                   "microseconds", round(guard_out_us)),
        gauge("nv_inference_pending_request_count", "Instantaneous number of pending requests awaiting execution "
              "per-model.", [(model, engine.waiting)]),
        gauge("nv_trt_llm_request_metrics", "TRT LLM request metrics", [
            ({**model, "request_type": "active"}, len(running)),
            ({**model, "request_type": "max"}, config.engine.scheduler.max_batch()),
            ({**model, "request_type": "scheduled"}, len(running)),
            ({**model, "request_type": "context"}, len(context)),
            ({**model, "request_type": "waiting"}, engine.waiting),
        ]),
        gauge("nv_trt_llm_kv_cache_block_metrics", "TRT LLM KV cache block metrics", [
            ({**model, "kv_cache_block_type": "max"}, memory.total),
            ({**model, "kv_cache_block_type": "free"}, memory.free),
            ({**model, "kv_cache_block_type": "used"}, memory.used),
            ({**model, "kv_cache_block_type": "tokens_per"}, memory.block_size),
            ({**model, "kv_cache_block_type": "fraction"}, memory.usage),
        ]),
        gauge("nv_trt_llm_inflight_batcher_metrics", "TRT LLM inflight batcher metrics", [
            ({**model, "inflight_batcher_specific_metric": "total_context_tokens"},
             sum(r.prefill_target - r.prefilled for r in context)),
            ({**model, "inflight_batcher_specific_metric": "generation_requests"}, len(running) - len(context)),
            ({**model, "inflight_batcher_specific_metric": "paused_requests"}, paused),
        ]),
    ]  # fmt: skip


def _value(child: Any) -> float:
    """A prometheus_client counter's current value."""
    return float(child._value.get())
