"""Scrape a server's Prometheus /metrics during a run (seeds/002's gauges), keep the series, summarize them.

Knows vLLM (v1 and v0 names), SGLang, llama.cpp's server and infermeter's emulator (vLLM names).  A server
without /metrics is a note in run.json, never a failure.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import numpy as np
import pyarrow as pa
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from infermeter.client.urls import endpoint
from infermeter.metrics.histogram_delta import histogram_delta
from infermeter.metrics.summary_model import HistogramDelta, ServerMetrics
from infermeter.records import RunClock

# role -> metric names (first present wins), across servers
ROLES: dict[str, tuple[str, ...]] = {
    "waiting": ("vllm:num_requests_waiting", "sglang:num_queue_reqs", "llamacpp:requests_deferred"),
    "running": ("vllm:num_requests_running", "sglang:num_running_reqs", "llamacpp:requests_processing"),
    "kv_usage": (
        "vllm:kv_cache_usage_perc",
        "vllm:gpu_cache_usage_perc",
        "sglang:token_usage",
        "llamacpp:kv_cache_usage_ratio",
    ),
    "preemptions": ("vllm:num_preemptions_total", "vllm:num_preemptions"),
    "preempted_requests": ("infermeter:preempted_requests_total",),
    "preempted_finished": ("infermeter:preempted_requests_finished_total",),
    "preempted_tokens": ("infermeter:preempted_tokens_total",),
    "prefix_queries": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    "prefix_hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
    "prefix_hit_rate": ("vllm:gpu_prefix_cache_hit_rate", "sglang:cache_hit_rate"),
    "max_batch": ("infermeter:max_batch_size",),
}
COUNTERS = (
    "preemptions",
    "preempted_requests",
    "preempted_finished",
    "preempted_tokens",
    "prefix_queries",
    "prefix_hits",
)
# role -> histogram names (seconds); vLLM's phases of a request before its first token
HISTOGRAMS: dict[str, tuple[str, ...]] = {
    "queue_time": ("vllm:request_queue_time_seconds",),
    "prefill_time": ("vllm:request_prefill_time_seconds",),
}
_HISTOGRAM_NAMES = frozenset(n for names in HISTOGRAMS.values() for n in names)


@dataclass
class HistogramScrapes:
    """A histogram's first and latest scrape: cumulative bucket counts by upper bound (summed over label sets)."""

    first: dict[float, float]
    first_sum: float
    last: dict[float, float]
    last_sum: float


@dataclass
class MetricsSeries:
    """Samples of every gauge and counter the server exposes (histogram buckets left out)."""

    t: list[float] = field(default_factory=list)
    name: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    value: list[float] = field(default_factory=list)
    scrapes: int = 0
    failures: int = 0
    error: str = ""
    histograms: dict[str, HistogramScrapes] = field(default_factory=dict)

    def add(self, t: float, text: str) -> None:
        for family in text_string_to_metric_families(text):
            if family.name in _HISTOGRAM_NAMES:
                self._histogram(family.name, family.samples)
            for s in family.samples:
                if s.name.endswith(("_bucket", "_created")):
                    continue
                self.t.append(t)
                self.name.append(s.name)
                self.labels.append(",".join(f"{k}={v}" for k, v in sorted(s.labels.items())))
                self.value.append(float(s.value))
        self.scrapes += 1

    def _histogram(self, name: str, samples: Sequence[Sample]) -> None:
        buckets: dict[float, float] = {}
        total = 0.0
        for s in samples:
            if s.name == name + "_bucket":
                le = float(s.labels["le"])
                buckets[le] = buckets.get(le, 0.0) + float(s.value)
            elif s.name == name + "_sum":
                total += float(s.value)
        if not buckets:
            return
        seen = self.histograms.get(name)
        if seen is None:
            self.histograms[name] = HistogramScrapes(buckets, total, buckets, total)
        else:
            seen.last, seen.last_sum = buckets, total

    def histogram(self, role: str) -> HistogramDelta | None:
        """What the role's histogram observed between the first and the last scrape."""
        for name in HISTOGRAMS[role]:
            h = self.histograms.get(name)
            if h is not None and set(h.first) == set(h.last):
                bounds = sorted(h.last)
                first, last = [h.first[b] for b in bounds], [h.last[b] for b in bounds]
                return histogram_delta(name, bounds, first, last, h.last_sum - h.first_sum)
        return None

    def table(self) -> pa.Table:
        return pa.table(
            {
                "t": pa.array(self.t, pa.float64()),
                "name": pa.array(self.name, pa.string()),
                "labels": pa.array(self.labels, pa.string()),
                "value": pa.array(self.value, pa.float64()),
            }
        )

    def series(self, role: str) -> tuple[str, np.ndarray, np.ndarray] | None:
        """(metric name, times, values summed over label sets) for the first name of the role present."""
        names = np.asarray(self.name, dtype=object)
        for metric in ROLES[role]:
            mask = names == metric
            if mask.any():
                t = np.asarray(self.t)[mask]
                v = np.asarray(self.value)[mask]
                times = np.unique(t)
                return metric, times, np.bincount(np.searchsorted(times, t), weights=v, minlength=len(times))
        return None

    def summary(self) -> ServerMetrics:
        """summary.json's `server_metrics` block: each role's gauge statistics or counter delta, where exposed."""
        out: dict[str, Any] = {"scrapes": self.scrapes, "failed_scrapes": self.failures}
        for role in ("waiting", "running", "kv_usage"):
            s = self.series(role)
            if s is not None:
                name, _, v = s
                out[role] = {
                    "metric": name,
                    "mean": float(v.mean()),
                    "p50": float(np.percentile(v, 50)),
                    "p99": float(np.percentile(v, 99)),
                    "max": float(v.max()),
                }
        for role in COUNTERS:
            s = self.series(role)
            if s is not None:
                out[role] = {"metric": s[0], "delta": float(s[2][-1] - s[2][0])}
        for role in HISTOGRAMS:
            if (delta := self.histogram(role)) is not None:
                out[role] = delta
        capacity = self.series("max_batch")
        if "running" in out and capacity is not None and capacity[2][-1] > 0:
            out["batch_utilization"] = out["running"]["mean"] / float(capacity[2][-1])
        q, h = out.get("prefix_queries"), out.get("prefix_hits")
        if q and h and q["delta"] > 0:
            out["prefix_cache_hit_rate"] = h["delta"] / q["delta"]
        elif (rate := self.series("prefix_hit_rate")) is not None:
            out["prefix_cache_hit_rate"] = float(rate[2][-1])
        return ServerMetrics.model_validate(out)  # a role the server lacks stays out of summary.json


class MetricsScraper:
    """Polls `{base_url}/metrics` every `interval` seconds while the run goes on.

    Scrapes are kept as text and parsed when the run ends, so parsing never competes with the send loop."""

    def __init__(self, base_url: str, clock: RunClock, interval: float = 1.0) -> None:
        self.url = endpoint(base_url, "/metrics")
        self.clock = clock
        self.interval = interval
        self.data = MetricsSeries()
        self._raw: list[tuple[float, str]] = []
        self._task: asyncio.Task[None] | None = None
        self._session: aiohttp.ClientSession | None = None

    async def scrape_once(self) -> bool:
        assert self._session is not None
        try:
            async with self._session.get(self.url) as r:
                if r.status != 200:
                    self.data.failures += 1
                    self.data.error = f"HTTP {r.status} from {self.url}"
                    return False
                text = await r.text()
            self._raw.append((self.clock.now(), text))
            return True
        except (aiohttp.ClientError, TimeoutError) as exc:
            self.data.failures += 1
            self.data.error = f"{type(exc).__name__}: {exc}"
            return False

    async def start(self) -> bool:
        """First scrape; False (and nothing running) when the server has no usable /metrics."""
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5))
        ok = await self.scrape_once()
        if ok:
            try:  # the first scrape is parsed now: an endpoint that is not Prometheus text counts as absent
                list(text_string_to_metric_families(self._raw[0][1]))
            except ValueError as exc:
                ok = False
                self._raw.clear()
                self.data.error = f"{self.url} is not Prometheus text: {exc}"
        if not ok:
            await self._session.close()
            self._session = None
            return False
        self._task = asyncio.create_task(self._loop())
        return True

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            await self.scrape_once()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            await self.scrape_once()  # the final state, for counters' deltas
        if self._session is not None:
            await self._session.close()
        for t, text in self._raw:
            try:
                self.data.add(t, text)
            except ValueError as exc:  # not Prometheus text after all
                self.data.failures += 1
                self.data.error = f"unparsable /metrics: {exc}"
        self._raw.clear()
