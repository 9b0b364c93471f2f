"""The emulator's Prometheus /metrics: vLLM's metric names for its histograms and counters, the engine's live state
read at scrape time, and what the IETF draft's section 5.8.4 asks that vLLM does not export."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Metric, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from infermeter.emulator.engine_loop import LATE_S, Handle, RealClockEngine

LATENCY_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)


class EngineGauges:
    """Collector for the engine's live state, read at scrape time."""

    def __init__(self, engine: RealClockEngine, model: str) -> None:
        self.engine = engine
        self.model = model

    def collect(self) -> Iterator[Metric]:
        labels = ["model_name"]
        for name, doc, value in (
            ("vllm:num_requests_running", "Requests in the running batch.", self.engine.running),
            ("vllm:num_requests_waiting", "Requests waiting to be scheduled.", self.engine.waiting),
            ("vllm:kv_cache_usage_perc", "KV-cache usage, 1 means 100 percent.", self.engine.core.memory.usage),
            (
                "infermeter:max_batch_size",
                "The most requests a step holds.",
                self.engine.config.engine.scheduler.max_batch(),
            ),
        ):
            g = GaugeMetricFamily(name, doc, labels=labels)
            g.add_metric([self.model], value)
            yield g
        late = self.engine.lateness
        h = HistogramMetricFamily(
            "infermeter:token_lateness_seconds",
            "How long after its scheduled time on the engine's timeline each token was handed out.",
            labels=labels,
        )
        cumulative = list(itertools.accumulate(late.counts))
        buckets = [(f"{b:g}", c) for b, c in zip(late.bounds, cumulative, strict=False)]
        h.add_metric([self.model], [*buckets, ("+Inf", late.tokens)], sum_value=late.total_s)
        yield h
        for name, doc, value in (
            ("infermeter:tokens_late", f"Tokens handed out over {LATE_S * 1e3:g} ms after their time.", late.late),
            ("infermeter:timeline_resets", "Steps whose timeline fell 50 ms behind the real clock.", late.resets),
        ):
            c = CounterMetricFamily(name, doc, labels=labels)
            c.add_metric([self.model], value)
            yield c


class BatchHistogram:
    """A Prometheus histogram exported under the same name and buckets as prometheus_client's, for values observed
    per stream or per token: they are kept as they come and counted in one numpy pass per FOLD_AT of them or when
    scraped (no lock, no Python call per token; prometheus_client's observe took a lock and a bucket search each)."""

    FOLD_AT = 8192

    def __init__(self, name: str, doc: str, model: str) -> None:
        self.name, self.doc, self.model = name, doc, model
        self.bounds = np.asarray(LATENCY_BUCKETS)
        self.counts = np.zeros(len(LATENCY_BUCKETS) + 1, dtype=np.int64)
        self.sum = 0.0
        self._pending: list[float] = []

    def observe(self, value: float) -> None:
        self._pending.append(value)
        if len(self._pending) >= self.FOLD_AT:
            self._fold()

    def observe_gaps(self, times: list[float]) -> None:
        """Observe the gaps between consecutive `times`."""
        self._pending += [b - a for a, b in itertools.pairwise(times)]
        if len(self._pending) >= self.FOLD_AT:
            self._fold()

    def _fold(self) -> None:
        values = np.asarray(self._pending)
        self._pending = []
        self.counts += np.bincount(np.searchsorted(self.bounds, values), minlength=len(self.counts))
        self.sum += float(values.sum())

    def collect(self) -> Iterator[Metric]:
        self._fold()
        h = HistogramMetricFamily(self.name, self.doc, labels=["model_name"])
        cumulative = np.cumsum(self.counts).tolist()
        buckets = [(f"{b}", c) for b, c in zip(LATENCY_BUCKETS, cumulative, strict=False)]
        h.add_metric([self.model], [*buckets, ("+Inf", cumulative[-1])], sum_value=self.sum)
        yield h


class ServerMetrics:
    """Every metric the emulator exports, in one registry: a finished stream's latencies, the tokens prefilled and
    generated, the prefix cache's queries and hits, and the engine's preemptions (counted up at each scrape)."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.registry = CollectorRegistry()
        reg, m = self.registry, model

        def histogram(name: str, doc: str) -> BatchHistogram:
            h = BatchHistogram(name, doc, m)
            reg.register(h)
            return h

        def counter(name: str, doc: str) -> Any:
            return Counter(name, doc, ["model_name"], registry=reg).labels(m)

        self.ttft = histogram("vllm:time_to_first_token_seconds", "Time to first token.")
        self.itl = histogram("vllm:inter_token_latency_seconds", "Inter-token latency.")
        self.e2e = histogram("vllm:e2e_request_latency_seconds", "End-to-end request latency.")
        self.queue_time = histogram("vllm:request_queue_time_seconds", "Time in the waiting queue.")
        self.prefill_time = histogram("vllm:request_prefill_time_seconds", "Time from first scheduled to first token.")
        self.prefill_tokens = counter("vllm:prompt_tokens", "Prefill tokens processed.")
        self.generation_tokens = counter("vllm:generation_tokens", "Generation tokens processed.")
        self.requests_ok = counter("vllm:request_success", "Finished requests.")
        self.prefix_queries = counter("vllm:prefix_cache_queries", "Prefix-cache tokens queried.")
        self.prefix_hits = counter("vllm:prefix_cache_hits", "Prefix-cache tokens hit.")
        self.preemptions = counter("vllm:num_preemptions", "Preemptions (recompute).")
        # what vLLM does not export and the IETF draft's section 5.8.4 asks for, under the emulator's own names
        self.preempted_requests = counter("infermeter:preempted_requests", "Requests preempted at least once.")
        self.preempted_finished = counter("infermeter:preempted_requests_finished", "Preempted requests finished.")
        self.preempted_tokens = counter("infermeter:preempted_tokens", "KV tokens discarded by preemptions.")
        self._engine_counts_seen = (0, 0, 0)

    def watch(self, engine: RealClockEngine) -> None:
        """Export the engine's live state (running, waiting, KV usage, token lateness) from now on."""
        self.registry.register(EngineGauges(engine, self.model))

    def cache_lookup(self, queried: int, hit: int) -> None:
        self.prefix_queries.inc(queried)
        self.prefix_hits.inc(hit)

    def prefilled(self, tokens: int) -> None:
        self.prefill_tokens.inc(tokens)

    def account(self, times: list[float], received: float, handle: Handle) -> None:
        """A finished stream into the histograms and counters vLLM exports (its queue and prefill phases: queued
        until first scheduled, then until the first token)."""
        if not times:
            return
        self.ttft.observe(times[0] - received)
        scheduled = handle.req.first_scheduled
        if scheduled >= 0:
            self.queue_time.observe(max(scheduled - handle.req.arrival, 0.0))
            self.prefill_time.observe(max(times[0] - scheduled, 0.0))
        self.itl.observe_gaps(times)
        self.e2e.observe(times[-1] - received)
        self.generation_tokens.inc(len(times))
        self.requests_ok.inc()
        if handle.req.preemptions:
            self.preempted_finished.inc()

    def exposition(self, engine: RealClockEngine) -> bytes:
        """The Prometheus text of every metric, the engine's preemptions counted up to now first."""
        state = engine.core.state
        now = (state.preemptions, state.preempted_requests, state.preempted_tokens)
        counters = (self.preemptions, self.preempted_requests, self.preempted_tokens)
        for c, seen, value in zip(counters, self._engine_counts_seen, now, strict=True):
            if value > seen:
                c.inc(value - seen)
        self._engine_counts_seen = now
        return generate_latest(self.registry)
