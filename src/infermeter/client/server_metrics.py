"""Scrape a server's Prometheus /metrics during a run (seeds/002's gauges), keep the series, summarize them.

Reads vLLM (v1 and v0 names), SGLang, TGI, Triton (with TensorRT-LLM's), llama.cpp's server and infermeter's
emulator in whichever engine's names it speaks (client/metric_dialects.py holds the names).  A server without
/metrics is a note in run.json, never a failure; a role the engine does not export stays out of summary.json.
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import numpy as np
import pyarrow as pa
from prometheus_client.parser import text_string_to_metric_families

from infermeter.client.metric_dialects import (
    COUNTER_ROLES,
    GAUGE_ROLES,
    TIMING_ROLES,
    CounterMean,
    Dialect,
    Gauge,
    Series,
    dialect,
    histogram_names,
    plain_names,
    recognise,
)
from infermeter.client.urls import endpoint
from infermeter.metrics.histogram_delta import histogram_delta
from infermeter.metrics.summary_model import HistogramDelta, ServerMetrics
from infermeter.records import RunClock
from infermeter.secrets import redact, redact_url
from infermeter.units import MS_PER_S

# role -> unlabelled metric names across engines (charts and calibration read these from server_metrics.parquet)
ROLES: dict[str, tuple[str, ...]] = {
    role: plain_names(role) for role in (*GAUGE_ROLES, *COUNTER_ROLES, "prefix_hit_rate", "max_batch")
}
_HISTOGRAM_NAMES = histogram_names()
LabelKey = tuple[tuple[str, str], ...]


@dataclass
class HistogramScrapes:
    """One label set of a histogram: its first and latest scrape's cumulative bucket counts by upper bound, and
    whether it was there at the first scrape (one that appears later started the run at zero)."""

    first: dict[float, float]
    first_sum: float
    last: dict[float, float]
    last_sum: float
    from_start: bool = True


def _matches(labels: LabelKey, wanted: tuple[tuple[str, str], ...]) -> bool:
    return all(pair in labels for pair in wanted)


@dataclass
class MetricsSeries:
    """Samples of every gauge and counter the server exposes (histogram buckets left out), and the dialect's
    timing histograms per label set."""

    t: list[float] = field(default_factory=list)
    name: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    value: list[float] = field(default_factory=list)
    scrapes: int = 0
    failures: int = 0
    error: str = ""
    dialect: str = "unknown"
    histograms: dict[tuple[str, LabelKey], HistogramScrapes] = field(default_factory=dict)
    scrape_times: list[float] = field(default_factory=list)
    _label_keys: list[LabelKey] = field(default_factory=list, repr=False)

    def add(self, t: float, text: str) -> None:
        seen: dict[tuple[str, LabelKey], tuple[dict[float, float], float]] = {}
        names: set[str] = set()
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                names.add(s.name)
                base, _, suffix = s.name.rpartition("_")
                if base in _HISTOGRAM_NAMES and suffix in ("bucket", "sum"):
                    key = (base, tuple(sorted((k, v) for k, v in s.labels.items() if k != "le")))
                    buckets, total = seen.get(key, ({}, 0.0))
                    if suffix == "bucket":
                        buckets[float(s.labels["le"])] = float(s.value)
                    else:
                        total = float(s.value)
                    seen[key] = (buckets, total)
                if s.name.endswith(("_bucket", "_created")):
                    continue
                label_key = tuple(sorted(s.labels.items()))
                self.t.append(t)
                self.name.append(s.name)
                self.labels.append(",".join(f"{k}={v}" for k, v in label_key))
                self._label_keys.append(label_key)
                self.value.append(float(s.value))
        for key, (buckets, total) in seen.items():
            if not buckets:
                continue
            known = self.histograms.get(key)
            if known is None:
                self.histograms[key] = HistogramScrapes(buckets, total, buckets, total, from_start=self.scrapes == 0)
            else:
                known.last, known.last_sum = buckets, total
        if self.scrapes == 0 or self.dialect == "unknown":
            self.dialect = recognise(names)
        self.scrape_times.append(t)
        self.scrapes += 1

    @property
    def roles(self) -> Dialect:
        return dialect(self.dialect)

    def histogram(self, role: str) -> HistogramDelta | None:
        """What the role's histogram (or Triton's time counter over its request counter) observed between the first
        and the last scrape."""
        return self._timing(role)[0]

    def _timing(self, role: str) -> tuple[HistogramDelta | None, bool]:
        """The role's timing and whether its observations are batch steps rather than requests."""
        for sel in self.roles.timings.get(role, ()):
            delta = self._counter_mean(sel) if isinstance(sel, CounterMean) else self._histogram(sel)
            if delta is not None:
                return delta, isinstance(sel, Series) and sel.name in self.roles.per_batch
        return None, False

    def _histogram(self, sel: Series) -> HistogramDelta | None:
        parts = [h for (name, key), h in self.histograms.items() if name == sel.name and _matches(key, sel.labels)]
        if not parts:
            return None
        bounds = sorted(parts[0].last)
        first = np.zeros(len(bounds))
        last = np.zeros(len(bounds))
        first_sum = last_sum = 0.0
        for h in parts:
            if set(h.last) != set(bounds) or (h.from_start and set(h.first) != set(bounds)):
                continue  # bucket bounds changed under a restart: no window to read
            last += [h.last[b] for b in bounds]
            last_sum += h.last_sum
            if h.from_start:
                first += [h.first[b] for b in bounds]
                first_sum += h.first_sum
        return histogram_delta(sel.describe(), bounds, list(first), list(last), last_sum - first_sum)

    def _counter_mean(self, sel: CounterMean) -> HistogramDelta | None:
        """The mean of the preferred model where the server has it, else of its one model, else of every model
        summed (the metric says so)."""
        summed = ""
        if sel.by:
            values = self._label_values(sel.total, sel.by)
            if sel.prefer in values or len(values) == 1:
                sel = sel.of(sel.prefer if sel.prefer in values else values[0])
            elif values:
                summed = f", summed over {sel.by}s " + ", ".join(values)
        total, count = self._delta(sel.total), self._delta(sel.count)
        if total is None or count is None or count <= 0 or total < 0:
            return None
        return HistogramDelta(
            metric=sel.describe() + summed, count=round(count), mean_ms=total * sel.to_seconds / count * MS_PER_S
        )

    def _label_values(self, sel: Series, label: str) -> list[str]:
        """The values a label takes on the selector's samples, sorted."""
        names = {sel.name, sel.name + "_total"}
        return sorted(
            {
                dict(key)[label]
                for name, key in zip(self.name, self._label_keys, strict=True)
                if name in names and _matches(key, sel.labels) and label in dict(key)
            }
        )

    def table(self) -> pa.Table:
        return pa.table(
            {
                "t": pa.array(self.t, pa.float64()),
                "name": pa.array(self.name, pa.string()),
                "labels": pa.array(self.labels, pa.string()),
                "value": pa.array(self.value, pa.float64()),
            }
        )

    def _select(self, sel: Series) -> tuple[np.ndarray, np.ndarray] | None:
        """(scrape times, values summed over the label sets that match) of one selector, where exposed."""
        names = np.asarray(self.name, dtype=object)
        mask = names == sel.name
        if not mask.any():  # the parser names a counter's samples NAME_total when the server wrote them without
            mask = names == sel.name + "_total"
        if sel.labels and mask.any():
            mask &= np.array([_matches(k, sel.labels) for k in self._label_keys], dtype=bool)
        if not mask.any():
            return None
        t = np.asarray(self.t)[mask]
        v = np.asarray(self.value)[mask]
        times = np.unique(t)
        return times, np.bincount(np.searchsorted(times, t), weights=v, minlength=len(times))

    def _gauge(self, sel: Gauge) -> tuple[np.ndarray, np.ndarray] | None:
        if isinstance(sel, Series):
            return self._select(sel)
        part, whole = self._select(sel.part), self._select(sel.whole)
        if part is None or whole is None:
            return None
        times, i, j = np.intersect1d(part[0], whole[0], return_indices=True)
        ok = whole[1][j] > 0
        if not ok.any():
            return None
        return times[ok], part[1][i][ok] / whole[1][j][ok]

    def series(self, role: str) -> tuple[str, np.ndarray, np.ndarray] | None:
        """(metric, times, values summed over label sets) of the first of the role's gauges or counters present."""
        selectors: tuple[Gauge, ...] = self.roles.gauges.get(role, ()) + self.roles.counters.get(role, ())
        for sel in selectors:
            got = self._gauge(sel)
            if got is not None:
                return sel.describe(), got[0], got[1]
        return None

    def _delta(self, sel: Series) -> float | None:
        """A counter's increase over the run; one first exposed after the first scrape started at zero."""
        got = self._select(sel)
        if got is None:
            return None
        times, values = got
        start = values[0] if times[0] <= self.scrape_times[0] else 0.0
        return float(values[-1] - start)

    def summary(self) -> ServerMetrics:
        """summary.json's `server_metrics` block: each role's gauge statistics, counter delta or timing histogram,
        where the server's dialect exposes it, and the dialect recognised."""
        out: dict[str, Any] = {"scrapes": self.scrapes, "failed_scrapes": self.failures}
        if self.scrapes:
            out["dialect"] = self.dialect
        for role in GAUGE_ROLES:
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
        for role in COUNTER_ROLES:
            for sel in self.roles.counters.get(role, ()):
                if (delta := self._delta(sel)) is not None:
                    out[role] = {"metric": sel.describe(), "delta": delta}
                    break
        for role in TIMING_ROLES:
            timing, per_batch = self._timing(role)
            if timing is not None:
                out[role] = timing
                if per_batch:
                    out.setdefault("per_batch", []).append(role)
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
    """Polls `{base_url}/metrics` every `interval` seconds while the run goes on (`tls`: the run's SSL context for
    an https server; `display`: the URL as shown, secrets masked).

    Scrapes are kept as text and parsed when the run ends, so parsing never competes with the send loop."""

    def __init__(
        self, base_url: str, clock: RunClock, interval: float = 1.0, tls: ssl.SSLContext | None = None
    ) -> None:
        self.url = endpoint(base_url, "/metrics")
        self.display = redact_url(self.url)
        self.clock = clock
        self.interval = interval
        self.tls = tls
        self.data = MetricsSeries()
        self._raw: list[tuple[float, str]] = []
        self._task: asyncio.Task[None] | None = None
        self._session: aiohttp.ClientSession | None = None

    async def scrape_once(self) -> bool:
        assert self._session is not None
        try:
            async with self._session.get(self.url, ssl=self.tls if self.tls is not None else True) as r:
                if r.status != 200:
                    self.data.failures += 1
                    self.data.error = f"HTTP {r.status} from {self.display}"
                    return False
                text = await r.text()
            self._raw.append((self.clock.now(), text))
            return True
        except (aiohttp.ClientError, TimeoutError) as exc:
            self.data.failures += 1
            self.data.error = redact(f"{type(exc).__name__}: {exc}".replace(self.url, self.display))
            return False

    async def start(self) -> bool:
        """First scrape; False (and nothing running) when the server has no usable /metrics."""
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5))
        ok = await self.scrape_once()
        if ok:
            try:  # the first scrape is parsed now: an endpoint that is not Prometheus text counts as absent
                names = {s.name for f in text_string_to_metric_families(self._raw[0][1]) for s in f.samples}
                self.data.dialect = recognise(names)
            except ValueError as exc:
                ok = False
                self._raw.clear()
                self.data.error = f"{self.display} is not Prometheus text: {exc}"
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
