"""The emulator's Prometheus /metrics: vLLM's metric names for its histograms and counters, the engine's live state
read at scrape time, and what the IETF draft's section 5.8.4 asks that vLLM does not export."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Metric, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from infermeter.emulator.batch_histogram import BatchHistogram
from infermeter.emulator.engine_loop import LATE_S, Handle, RealClockEngine
from infermeter.emulator.metrics_series import DialectSeries


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


class ServerMetrics:
    """Every metric the emulator exports, in one registry: a finished stream's latencies, the tokens prefilled and
    generated, the prefix cache's queries and hits, and the engine's preemptions (counted up at each scrape).
    Exposed under vLLM's names, or under SGLang's, TGI's or Triton's (`dialect`, emulator/metrics_dialects.py), which
    read the same series and a few more (`more`, kept only for those)."""

    def __init__(self, model: str, dialect: str = "vllm") -> None:
        self.model = model
        self.dialect = dialect
        self.more = DialectSeries(model) if dialect != "vllm" else None
        self.failures = 0  # requests answered with an injected error before any response
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
        if self.more is not None:
            engine.on_step = self.more.step

    def failed(self) -> None:
        self.failures += 1

    def pooled(self, received: float, done: float, handles: list[Handle]) -> None:
        """A finished embeddings or rerank request (its inputs' prefills): its latency, queue and prefill phases;
        no tokens generated."""
        arrival = min(h.req.arrival for h in handles)
        started = [h.req.first_scheduled for h in handles if h.req.first_scheduled >= 0]
        first = min(started) if started else arrival
        self.e2e.observe(done - received)
        self.queue_time.observe(max(first - arrival, 0.0))
        self.prefill_time.observe(max(done - first, 0.0))
        self.requests_ok.inc()
        if self.more is not None:
            self.more.pooled_request(first, done, [h.req.prompt for h in handles])

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
        if self.more is not None:
            self.more.generated_request(times, handle)

    def vllm_exposition(self, engine: RealClockEngine) -> bytes:
        """The Prometheus text of every metric under vLLM's names, the engine's preemptions counted up to now first."""
        self.count_preemptions(engine)
        return generate_latest(self.registry)

    def count_preemptions(self, engine: RealClockEngine) -> None:
        """Bring the preemption counters up to the engine's own counts."""
        state = engine.core.state
        now = (state.preemptions, state.preempted_requests, state.preempted_tokens)
        counters = (self.preemptions, self.preempted_requests, self.preempted_tokens)
        for c, seen, value in zip(counters, self._engine_counts_seen, now, strict=True):
            if value > seen:
                c.inc(value - seen)
        self._engine_counts_seen = now
