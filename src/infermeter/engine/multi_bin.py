"""Multi-bin dynamic batching: K queues by predicted output length, each batched dynamically with its own B_MAX.

Bin edges (Algorithm 3: equal-mass quantiles of the predicted output lengths) come from configuration, from the
whole workload before the run where it is known in advance (the simulator, as the method's own study does:
`bin_edges: workload`), or are learned online from the requests seen so far, as a server must (`bin_edges:
online`, the emulator's way): relearned each time the sample doubles, up to `learn_requests`, with the queued
requests moved to their new bins.  Each bin's B_MAX follows section 8.2: min(B_MAX, floor(KV capacity / mean
sequence length in the bin)).
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field, model_validator

from infermeter.engine.batching import BatchLevel, DynamicConfig, Lane
from infermeter.engine.request import EngineRequest
from infermeter.engine.scheduler import EngineLimits, SchedulerConfig
from infermeter.engine.sla_controller import SlaController

BinKey = Literal["output", "total"]
Controller = Literal["per_bin", "global"]
EdgeSource = Literal["workload", "online"]  # where edges and per-bin B_MAX left unset come from
Origin = Literal["workload", "online", "configured"]  # where the edges (or B_MAX) a run used came from
KEY_WORDS: dict[BinKey, str] = {"output": "predicted output", "total": "prompt + predicted output"}


def equal_mass_edges(values: np.ndarray, k: int) -> list[int]:
    """Algorithm 3: the lower edges of K bins at the quantiles 0, 1/K, ..., (K-1)/K; the last bin is open."""
    points = np.quantile(np.asarray(values, dtype=float), np.linspace(0, 1, k + 1))
    return [int(np.floor(p)) for p in points[:k]]


def bin_index(edges: list[int], value: int) -> int:
    """Algorithm 4: the bin whose [edge, next edge) holds the value; below the first edge, the first bin."""
    return max(bisect_right(edges, value) - 1, 0)


def bin_indexes(edges: list[int], values: np.ndarray) -> np.ndarray:
    """bin_index of every value at once (np.searchsorted on the right is bisect_right)."""
    idx = np.searchsorted(np.asarray(edges), np.asarray(values), side="right") - 1
    return np.maximum(idx, 0)


def bin_b_max(edges: list[int], keys: np.ndarray, lengths: np.ndarray, capacity_tokens: int, b_max: int) -> list[int]:
    """Section 8.2: per-bin B_MAX = min(B_MAX, floor(capacity / mean sequence length (prompt + predicted output) of
    the bin's members)); B_MAX for an empty bin.  One pass over the keys (np.bincount), not one mask a bin."""
    k = len(edges)
    idx = bin_indexes(edges, keys)
    counts = np.bincount(idx, minlength=k)
    sums = np.bincount(idx, weights=np.asarray(lengths, dtype=float), minlength=k)
    means = np.divide(sums, counts, out=np.ones(k), where=counts > 0)
    return [max(1, min(b_max, int(capacity_tokens // max(float(m), 1.0)))) for m in means]


class BinEdges(BaseModel):
    """The bins a multi-bin run used and where they came from (what `sim` and `predict` print)."""

    key: BinKey
    edges: list[int]  # each bin's lower edge; bin i holds [edges[i], edges[i + 1]), the last one is open
    b_max: list[int]  # each bin's B_MAX
    edges_from: Origin
    b_max_from: Origin
    sample: int = Field(ge=0, description="predicted lengths the learned values come from (0: all configured)")

    def describe(self) -> str:
        """One line: how the edges were obtained, the bins as ranges of the key, their B_MAX and its origin."""
        key = KEY_WORDS[self.key]
        how = {
            "workload": f"Algorithm 3 of the multi-bin method (equal-mass) over the workload's {self.sample:,} "
            f"{key} lengths, before the run",
            "online": f"learned online: Algorithm 3 over the first {self.sample:,} requests' {key} lengths",
            "configured": f"configured, by {key} length",
        }[self.edges_from]
        ranges = " ".join(f"[{lo}, {hi})" for lo, hi in zip(self.edges, [*self.edges[1:], "inf"], strict=True))
        b_max_how = {"workload": "section 8.2, from the workload", "online": "section 8.2, learned online"}
        return (
            f"multi-bin edges, {how}: {ranges} tokens; per-bin B_MAX {', '.join(map(str, self.b_max))} "
            f"({b_max_how.get(self.b_max_from, 'configured')})"
        )


def refuse_workload_bins(scheduler: SchedulerConfig) -> None:
    """Refuse `bin_edges: workload` with edges or B_MAX still to compute where no workload is known in advance."""
    if not isinstance(scheduler, MultiBinConfig) or scheduler.bin_edges != "workload":
        return
    if scheduler.edges is None or scheduler.bin_b_max is None:
        raise ValueError(
            "scheduler.bin_edges: workload needs the whole workload before the run, which a server never has: "
            "use bin_edges: online (learned from the requests as they arrive), or give edges and bin_b_max"
        )


class MultiBinDynamic(BatchLevel):
    """K queues by predicted length, each batched dynamically with its own controller and B_MAX."""

    def __init__(self, config: MultiBinConfig, limits: EngineLimits) -> None:
        refuse_workload_bins(config)  # the simulator computes them before it builds engines (sim/bins.py)
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
        self._sample = 0  # how many of them the values in force were learned from
        self._next = 0
        self.last_bin = -1
        self._by_total = config.bin_key == "total"
        self._learning = config.edges is None or config.bin_b_max is None  # edges or B_MAX still to learn from keys
        self._append = [lane.queue.append for lane in self.lanes]  # each bin's queue.append (the queues stay)
        if config.bin_b_max is not None:
            self._set_b_max(list(config.bin_b_max))

    def bins(self) -> BinEdges:
        """The edges and per-bin B_MAX in force now, and where they came from."""
        cfg = self.config
        return BinEdges(
            key=cfg.bin_key,
            edges=list(self.edges),
            b_max=[lane.b_max for lane in self.lanes],
            edges_from="configured" if cfg.edges is not None else "online",
            b_max_from="configured" if cfg.bin_b_max is not None else "online",
            sample=self._sample,
        )

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
        self._sample = len(keys)
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
        """Each lane's B_MAX, and its controller's interval clamped to it.  The clamp only lowers the interval: a
        bin whose B_MAX is relearned higher (online, as its sample grows) keeps the lower interval until its
        controller climbs back (README: why online edges serve less than the workload's)."""
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
        default="output",
        description="bin by predicted output length (the method's key), or by prompt + predicted output (see README)",
    )
    bin_edges: EdgeSource | None = Field(
        default=None,
        description="where edges and bin_b_max left unset come from: the whole workload's predicted lengths before "
        "the run (Algorithm 3, as the method computes them) or learned online from the requests seen; unset: "
        "workload where it is known in advance (sim, predict, sim-sweep), online in the emulator",
    )
    edges: list[int] | None = Field(default=None, description="each bin's lower edge, ascending; unset: from bin_edges")
    bin_b_max: list[int] | None = Field(default=None, description="each bin's B_MAX; unset: from bin_edges")
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
    """Edges (Algorithm 3) and per-bin B_MAX (section 8.2) from a whole workload's predicted lengths, as the method
    computes them; those already configured are kept."""
    keys = predicted + prompts if config.bin_key == "total" else predicted
    edges = list(config.edges) if config.edges is not None else equal_mass_edges(keys, config.bins)
    b_maxes = (
        list(config.bin_b_max)
        if config.bin_b_max is not None
        else bin_b_max(edges, keys, prompts + predicted, capacity, config.b_max)
    )
    return config.model_copy(update={"edges": edges, "bin_b_max": b_maxes})


def workload_bin_edges(config: MultiBinConfig, resolved: MultiBinConfig, sample: int) -> BinEdges:
    """What `workload_bins` made of `config` (`resolved`), as printed: which values came from the workload."""
    assert resolved.edges is not None and resolved.bin_b_max is not None
    return BinEdges(
        key=resolved.bin_key,
        edges=list(resolved.edges),
        b_max=list(resolved.bin_b_max),
        edges_from="configured" if config.edges is not None else "workload",
        b_max_from="configured" if config.bin_b_max is not None else "workload",
        sample=sample,
    )
