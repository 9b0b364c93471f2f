"""Multi-bin dynamic batching: K queues by predicted length, each batched dynamically with its own B_MAX.

Bin edges (Algorithm 3: equal-mass quantiles of the predicted lengths) come from configuration, or are learned
online from the requests seen so far, as a server would have to: relearned each time the sample doubles, up to
`learn_requests`, with the queued requests moved to their new bins.  Each bin's B_MAX follows section 8.2:
min(B_MAX, floor(KV capacity / mean sequence length in the bin)).
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from infermeter.engine.batching import BatchLevel, DynamicConfig, Lane
from infermeter.engine.request import EngineRequest
from infermeter.engine.scheduler import EngineLimits
from infermeter.engine.sla_controller import SlaController

BinKey = Literal["output", "total"]
Controller = Literal["per_bin", "global"]


def equal_mass_edges(values: np.ndarray, k: int) -> list[int]:
    """Algorithm 3: the lower edges of K bins at the quantiles 0, 1/K, ..., (K-1)/K; the last bin is open."""
    points = np.quantile(np.asarray(values, dtype=float), np.linspace(0, 1, k + 1))
    return [int(np.floor(p)) for p in points[:k]]


def bin_index(edges: list[int], value: int) -> int:
    """Algorithm 4: the bin whose [edge, next edge) holds the value; below the first edge, the first bin."""
    return max(bisect_right(edges, value) - 1, 0)


def bin_b_max(edges: list[int], keys: np.ndarray, lengths: np.ndarray, capacity_tokens: int, b_max: int) -> list[int]:
    """Per-bin B_MAX = min(B_MAX, floor(capacity / mean sequence length of the bin's members)); B_MAX if empty."""
    idx = np.asarray([bin_index(edges, int(v)) for v in keys], dtype=np.int64)
    out = []
    for i in range(len(edges)):
        member = idx == i
        mean_len = float(np.mean(lengths[member])) if member.any() else 1.0
        out.append(max(1, min(b_max, int(capacity_tokens // max(mean_len, 1.0)))))
    return out


class MultiBinDynamic(BatchLevel):
    """K queues by predicted length, each batched dynamically with its own controller and B_MAX."""

    def __init__(self, config: MultiBinConfig, limits: EngineLimits) -> None:
        self.config = config
        self.capacity_tokens = limits.capacity_tokens
        b_min, b_max, sla = config.b_min, config.b_max, limits.d_sla_token
        shared = SlaController(sla, config.epsilon, b_min, b_max) if config.controller == "global" else None
        self.lanes = [
            Lane(shared or SlaController(sla, config.epsilon, b_min, b_max), b_max, b_min) for _ in range(config.bins)
        ]
        self.edges: list[int] = list(config.edges) if config.edges is not None else [0] * config.bins
        self._keys: list[int] = []  # the sample bins are learned from
        self._lengths: list[int] = []
        self._next = 0
        self.last_bin = -1
        self._by_total = config.bin_key == "total"
        self._learning = config.edges is None or config.bin_b_max is None  # edges or B_MAX still to learn from keys
        self._append = [lane.queue.append for lane in self.lanes]  # each bin's queue.append (the queues stay)
        if config.bin_b_max is not None:
            self._set_b_max(list(config.bin_b_max))

    def key(self, req: EngineRequest) -> int:
        return req.predicted + (req.prompt if self.config.bin_key == "total" else 0)

    def bin_of(self, req: EngineRequest) -> int:
        return bin_index(self.edges, self.key(req))

    def enqueue(self, req: EngineRequest) -> None:
        key = req.predicted + req.prompt if self._by_total else req.predicted
        if self._learning:
            self._keys.append(key)
            self._lengths.append(req.prompt + req.predicted)
            n = len(self._keys)
            if n & (n - 1) == 0 or n == self.config.learn_requests:
                self._learn()
            self._learning = n < self.config.learn_requests
        lane = bisect_right(self.edges, key) - 1  # bin_index, inlined: a hot path
        self._append[lane if lane > 0 else 0](req)

    def _learn(self) -> None:
        keys, lengths = np.asarray(self._keys), np.asarray(self._lengths)
        if self.config.edges is None:
            self.edges = equal_mass_edges(keys, self.config.bins)
            queued = sorted((r for lane in self.lanes for r in lane.queue), key=lambda r: (r.arrival, r.idx))
            for lane in self.lanes:
                lane.queue.clear()
            for r in queued:
                self.lanes[self.bin_of(r)].queue.append(r)
        if self.config.bin_b_max is None:
            self._set_b_max(bin_b_max(self.edges, keys, lengths, self.capacity_tokens, self.config.b_max))

    def _set_b_max(self, b_maxes: list[int]) -> None:
        for lane, bm in zip(self.lanes, b_maxes, strict=True):
            lane.b_max = bm  # a lane's target is clamped to it by b_mem, whichever controller it follows
            if self.config.controller == "global":
                continue
            c = lane.controller
            c.b_max = bm
            c.b_high = min(c.b_high, float(bm))
            c.b_low = min(c.b_low, c.b_high)
            c.b_avg = min(c.b_avg, float(bm))

    def waiting(self) -> int:
        return sum(len(lane.queue) for lane in self.lanes)

    def _select(self) -> int:
        if self.config.bin_selection == "longest_queue":
            lengths = [len(lane.queue) for lane in self.lanes]
            best = max(range(len(lengths)), key=lambda i: (lengths[i], -i))
            return best if lengths[best] else -1
        k = len(self.lanes)
        for step in range(k):
            i = (self._next + step) % k
            if self.lanes[i].queue:
                self._next = (i + 1) % k
                return i
        return -1

    def next_batch(self, free_tokens: int, block_size: int) -> list[EngineRequest]:
        self.last_bin = self._select()
        if self.last_bin < 0:
            return []
        return self.lanes[self.last_bin].take(self.capacity_tokens, free_tokens, block_size)

    def observe(self, batch: list[EngineRequest], tbt: float) -> None:
        self.lanes[self.last_bin].observe(batch, tbt)


class MultiBinConfig(DynamicConfig):
    """multi_bin_dynamic: K queues by predicted length, each sized by memory and the decode SLA."""

    name: Literal["multi_bin_dynamic"] = "multi_bin_dynamic"
    bins: int = Field(default=4, gt=0, le=1024, description="K, the number of bins")
    bin_selection: Literal["round_robin", "longest_queue"] = "round_robin"
    bin_key: BinKey = Field(
        default="total", description="bin by predicted output length, or by prompt + predicted output (see README)"
    )
    edges: list[int] | None = Field(
        default=None, description="each bin's lower edge, ascending; unset: learned online from the requests seen"
    )
    bin_b_max: list[int] | None = Field(default=None, description="each bin's B_MAX; unset: learned with the edges")
    learn_requests: int = Field(default=1024, gt=0, description="how many requests the online edges learn from")
    controller: Controller = Field(
        default="per_bin",
        description="an SLA controller per bin (the method), or one shared by all bins (the paper's H2 baseline)",
    )

    @model_validator(mode="after")
    def _per_bin(self) -> MultiBinConfig:
        for name, values in (("edges", self.edges), ("bin_b_max", self.bin_b_max)):
            if values is not None and len(values) != self.bins:
                raise ValueError(f"{name} has {len(values)} values for {self.bins} bins")
        if self.edges is not None and any(b < a for a, b in zip(self.edges, self.edges[1:], strict=False)):
            raise ValueError(f"edges must be ascending, got {self.edges}")
        if self.bin_b_max is not None and min(self.bin_b_max) < 1:
            raise ValueError(f"bin_b_max must be at least 1, got {self.bin_b_max}")
        return self

    def build(self, limits: EngineLimits) -> MultiBinDynamic:
        return MultiBinDynamic(self, limits)


def workload_bins(config: MultiBinConfig, prompts: np.ndarray, predicted: np.ndarray, capacity: int) -> MultiBinConfig:
    """Edges and per-bin B_MAX set from a whole workload's predicted lengths, as the method's offline study does."""
    keys = predicted + prompts if config.bin_key == "total" else predicted
    edges = equal_mass_edges(keys, config.bins)
    b_maxes = bin_b_max(edges, keys, prompts + predicted, capacity, config.b_max)
    return config.model_copy(update={"edges": edges, "bin_b_max": b_maxes})
