"""Which metric names each serving engine writes on /metrics, by role: the tables the scraper reads a dialect with.

A role (waiting, running, kv_usage, queue_time, ...) is read from the first of its selectors the server exposes.
Names come from each engine's metrics documentation: vLLM's "Production Metrics", SGLang's "Production Metrics",
TGI's "Metrics" reference, Triton's "Metrics" user guide with the TensorRT-LLM backend's "Triton Metrics", and
llama.cpp's server README (`--metrics`).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Series:
    """Samples of one metric name carrying these labels (summed over every other label)."""

    name: str
    labels: tuple[tuple[str, str], ...] = ()

    def describe(self) -> str:
        if not self.labels:
            return self.name
        return self.name + "{" + ",".join(f'{k}="{v}"' for k, v in self.labels) + "}"


@dataclass(frozen=True)
class Ratio:
    """A gauge read as one series over another at each scrape (TensorRT-LLM's used / max KV-cache blocks)."""

    part: Series
    whole: Series

    def describe(self) -> str:
        return f"{self.part.describe()} / {self.whole.describe()}"


@dataclass(frozen=True)
class CounterMean:
    """A mean per request from a cumulative time counter over a request counter (Triton's µs counters): no
    quantiles, only the mean over the window.

    `by` names the label that tells models apart: one server may expose several (a TensorRT-LLM ensemble's
    preprocessing, tensorrt_llm and postprocessing, the last counted once per streamed token), and the `prefer`
    model is the one read when present."""

    total: Series
    count: Series
    to_seconds: float
    by: str = ""
    prefer: str = ""

    def describe(self) -> str:
        return f"{self.total.describe()} / {self.count.describe()}"

    def of(self, value: str) -> CounterMean:
        """The same mean restricted to `by`=value."""
        pair = ((self.by, value),)
        total = Series(self.total.name, tuple(sorted(self.total.labels + pair)))
        count = Series(self.count.name, tuple(sorted(self.count.labels + pair)))
        return CounterMean(total, count, self.to_seconds)


Gauge = Series | Ratio
Timing = Series | CounterMean


def _s(name: str, **labels: str) -> Series:
    return Series(name, tuple(sorted(labels.items())))


@dataclass(frozen=True)
class Dialect:
    """One engine's names: gauges, counters, timing histograms (seconds) and which of those observe a batch step
    rather than a request."""

    name: str
    prefixes: tuple[str, ...]
    gauges: dict[str, tuple[Gauge, ...]] = field(default_factory=dict)
    counters: dict[str, tuple[Series, ...]] = field(default_factory=dict)
    timings: dict[str, tuple[Timing, ...]] = field(default_factory=dict)
    per_batch: frozenset[str] = frozenset()  # metric names whose observations are batch steps (TGI's per method)


GAUGE_ROLES = ("waiting", "running", "kv_usage")
LAST_VALUE_ROLES = ("prefix_hit_rate", "max_batch")  # read at the last scrape
COUNTER_ROLES = (
    "preemptions",
    "preempted_requests",
    "preempted_finished",
    "preempted_tokens",
    "prefix_queries",
    "prefix_hits",
    "prompt_tokens",
    "generation_tokens",
    "prefill_seconds",
    "decode_seconds",
)
TIMING_ROLES = ("queue_time", "prefill_time", "decode_time")

# infermeter's emulator adds these to whichever engine's names it speaks
_EMULATOR = Dialect(
    "infermeter",
    ("infermeter:",),
    gauges={"max_batch": (_s("infermeter:max_batch_size"),)},
    counters={
        "preempted_requests": (_s("infermeter:preempted_requests_total"),),
        "preempted_finished": (_s("infermeter:preempted_requests_finished_total"),),
        "preempted_tokens": (_s("infermeter:preempted_tokens_total"),),
    },
)

VLLM = Dialect(
    "vllm",
    ("vllm:",),
    gauges={
        "waiting": (_s("vllm:num_requests_waiting"),),
        "running": (_s("vllm:num_requests_running"),),
        "kv_usage": (_s("vllm:kv_cache_usage_perc"), _s("vllm:gpu_cache_usage_perc")),  # v1, then v0
        "prefix_hit_rate": (_s("vllm:gpu_prefix_cache_hit_rate"),),
    },
    counters={
        "preemptions": (_s("vllm:num_preemptions_total"), _s("vllm:num_preemptions")),
        "prefix_queries": (_s("vllm:prefix_cache_queries_total"), _s("vllm:gpu_prefix_cache_queries_total")),
        "prefix_hits": (_s("vllm:prefix_cache_hits_total"), _s("vllm:gpu_prefix_cache_hits_total")),
        "prompt_tokens": (_s("vllm:prompt_tokens_total"),),
        "generation_tokens": (_s("vllm:generation_tokens_total"),),
    },
    timings={
        "queue_time": (_s("vllm:request_queue_time_seconds"),),
        "prefill_time": (_s("vllm:request_prefill_time_seconds"),),
        "decode_time": (_s("vllm:request_decode_time_seconds"),),
    },
)

SGLANG = Dialect(
    "sglang",
    ("sglang:",),
    gauges={
        "waiting": (_s("sglang:num_queue_reqs"),),
        "running": (_s("sglang:num_running_reqs"),),
        "kv_usage": (_s("sglang:token_usage"),),
        "prefix_hit_rate": (_s("sglang:cache_hit_rate"),),
    },
    counters={
        "prompt_tokens": (_s("sglang:prompt_tokens_total"),),
        "generation_tokens": (_s("sglang:generation_tokens_total"),),
    },
    timings={"queue_time": (_s("sglang:queue_time_seconds"),)},
)

TGI = Dialect(
    "tgi",
    ("tgi_",),
    gauges={"waiting": (_s("tgi_queue_size"),), "running": (_s("tgi_batch_current_size"),)},  # no KV usage
    counters={
        "prompt_tokens": (_s("tgi_request_input_length_sum"),),  # histograms' running sums
        "generation_tokens": (_s("tgi_request_generated_tokens_sum"),),
    },
    timings={
        "queue_time": (_s("tgi_request_queue_duration"),),
        "prefill_time": (
            _s("tgi_batch_inference_duration", method="prefill"),
            _s("tgi_batch_forward_duration", method="prefill"),
        ),
        "decode_time": (
            _s("tgi_batch_inference_duration", method="decode"),
            _s("tgi_batch_forward_duration", method="decode"),
        ),
    },
    per_batch=frozenset({"tgi_batch_inference_duration", "tgi_batch_forward_duration"}),
)

_TRT_REQUESTS = "nv_trt_llm_request_metrics"
_TRT_KV = "nv_trt_llm_kv_cache_block_metrics"
_QUEUE_US = "nv_inference_queue_duration_us"
TRITON = Dialect(
    "triton",
    ("nv_inference_", "nv_trt_llm_"),
    gauges={
        "waiting": (_s(_TRT_REQUESTS, request_type="waiting"), _s("nv_inference_pending_request_count")),
        "running": (_s(_TRT_REQUESTS, request_type="active"),),
        "kv_usage": (
            Ratio(_s(_TRT_KV, kv_cache_block_type="used"), _s(_TRT_KV, kv_cache_block_type="max")),
            _s(_TRT_KV, kv_cache_block_type="fraction"),
        ),
        "max_batch": (_s(_TRT_REQUESTS, request_type="max"),),
    },
    timings={
        # Triton's guide pairs the queue counter with the success count (a request counts once, whatever its batch);
        # of an ensemble's models, the TensorRT-LLM backend's own queues the requests
        "queue_time": (
            CounterMean(_s(_QUEUE_US), _s("nv_inference_request_success"), 1e-6, "model", "tensorrt_llm"),
            CounterMean(_s(_QUEUE_US), _s("nv_inference_count"), 1e-6, "model", "tensorrt_llm"),
        ),
    },
)

LLAMACPP = Dialect(
    "llamacpp",
    ("llamacpp:",),
    gauges={
        "waiting": (_s("llamacpp:requests_deferred"),),
        "running": (_s("llamacpp:requests_processing"),),
        "kv_usage": (_s("llamacpp:kv_cache_usage_ratio"),),
    },
    counters={
        "prompt_tokens": (_s("llamacpp:prompt_tokens_total"),),
        "generation_tokens": (_s("llamacpp:tokens_predicted_total"),),
        "prefill_seconds": (_s("llamacpp:prompt_seconds_total"),),  # busy time in prompt processing
        "decode_seconds": (_s("llamacpp:tokens_predicted_seconds_total"),),  # and in generation
    },
)

DIALECTS: tuple[Dialect, ...] = (VLLM, SGLANG, TGI, TRITON, LLAMACPP)


def _merged(name: str, parts: tuple[Dialect, ...]) -> Dialect:
    """The roles of several dialects together, each role's selectors in the parts' order."""
    gauges: dict[str, tuple[Gauge, ...]] = {}
    counters: dict[str, tuple[Series, ...]] = {}
    timings: dict[str, tuple[Timing, ...]] = {}
    for d in parts:
        for role, g in d.gauges.items():
            gauges[role] = gauges.get(role, ()) + g
        for role, c in d.counters.items():
            counters[role] = counters.get(role, ()) + c
        for role, h in d.timings.items():
            timings[role] = timings.get(role, ()) + h
    per_batch = frozenset().union(*(d.per_batch for d in parts))
    return Dialect(name, (), gauges, counters, timings, per_batch)


def recognise(names: set[str]) -> str:
    """The dialect whose prefixes the exposed metric names carry ("unknown" for none)."""
    for d in DIALECTS:
        if any(n.startswith(d.prefixes) for n in names):
            return d.name
    return "unknown"


def dialect(name: str) -> Dialect:
    """The roles to read for a recognised dialect (with the emulator's own extras); every engine's for "unknown"."""
    for d in DIALECTS:
        if d.name == name:
            return _merged(d.name, (d, _EMULATOR))
    return _merged("unknown", (*DIALECTS, _EMULATOR))


def histogram_names() -> frozenset[str]:
    """Every histogram a dialect reads timings from (their bucket counts are kept per label set)."""
    return frozenset(t.name for d in DIALECTS for sel in d.timings.values() for t in sel if isinstance(t, Series))


def plain_names(role: str) -> tuple[str, ...]:
    """The unlabelled metric names of a gauge or counter role across engines (summed over label sets as they are)."""
    every = dialect("unknown")
    selectors = every.gauges.get(role, ()) + every.counters.get(role, ())
    return tuple(s.name for s in selectors if isinstance(s, Series) and not s.labels)
