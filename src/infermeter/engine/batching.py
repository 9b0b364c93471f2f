"""Batch-level schedulers (seeds/004 section 5): a batch runs to completion before the engine takes another.

static_fifo takes up to B=8 from one FIFO; dynamic_no_bins sizes batches by min(b_mem, b_SLA); multi_bin_dynamic
keeps K FIFOs by predicted output length, each with its own statistics, controller and B_MAX.  Every batch is
also trimmed so the KV memory it will fill (prompt + output tokens of its members) fits the engine.
"""

from __future__ import annotations

from collections import deque
from typing import Literal, Protocol

import numpy as np

from infermeter.engine.memory import blocks_for
from infermeter.engine.request import EngineRequest
from infermeter.engine.sla_controller import LengthStats, SlaController, b_mem


class BatchScheduler(Protocol):
    kind: Literal["batch"]
    name: str

    def enqueue(self, req: EngineRequest) -> None: ...

    def waiting(self) -> int: ...

    def next_batch(self, free_tokens: int, block_size: int) -> list[EngineRequest]:
        """The next batch, fitting free_tokens of KV memory allocated in blocks of block_size tokens."""
        ...

    def observe(self, batch: list[EngineRequest], tbt: float) -> None: ...


def fit_memory(candidates: list[EngineRequest], free_tokens: int, block_size: int) -> int:
    """How many leading candidates fit in KV memory together (each holds prompt + output tokens at the end)."""
    used = 0
    for i, r in enumerate(candidates):
        used += blocks_for(r.total_len, block_size) * block_size
        if used > free_tokens:
            return i
    return len(candidates)


class StaticFifo:
    """Baseline: one FIFO, fixed batch size (B=8), no adaptation."""

    kind: Literal["batch"] = "batch"
    name = "static_fifo"

    def __init__(self, batch_size: int = 8) -> None:
        self.batch_size = batch_size
        self.queue: deque[EngineRequest] = deque()
        self.last_target = batch_size

    def enqueue(self, req: EngineRequest) -> None:
        self.queue.append(req)

    def waiting(self) -> int:
        return len(self.queue)

    def next_batch(self, free_tokens: int, block_size: int) -> list[EngineRequest]:
        take = [self.queue[i] for i in range(min(self.batch_size, len(self.queue)))]
        take = take[: fit_memory(take, free_tokens, block_size)]
        for _ in take:
            self.queue.popleft()
        return take

    def observe(self, batch: list[EngineRequest], tbt: float) -> None:
        pass


class _Lane:
    """One queue with its statistics and SLA controller (the whole engine, or one bin)."""

    def __init__(self, controller: SlaController, b_max: int, b_min: int) -> None:
        self.queue: deque[EngineRequest] = deque()
        self.stats = LengthStats()
        self.controller = controller
        self.b_max = b_max
        self.b_min = b_min
        self.limited = False  # the last batch was cut short by an empty queue

    def target(self, capacity_tokens: int) -> int:
        if self.stats.total is None:  # no batch served yet: estimate from what is queued
            head = [self.queue[i] for i in range(min(len(self.queue), self.b_max))]
            self.stats.update(float(np.mean([r.prompt for r in head])), float(np.mean([r.predicted for r in head])))
        bm = b_mem(capacity_tokens, self.stats.total or 0.0, self.b_min, self.b_max)
        return min(bm, self.controller.target())

    def take(self, capacity_tokens: int, free_tokens: int, block_size: int) -> list[EngineRequest]:
        """Algorithm 5 within one lane: up to M = b_max candidates, keep b_target, the rest stay in front."""
        target = self.target(capacity_tokens)
        n = min(target, len(self.queue))
        batch = [self.queue[i] for i in range(n)]
        batch = batch[: fit_memory(batch, free_tokens, block_size)]
        for _ in batch:
            self.queue.popleft()
        self.limited = n < target
        return batch

    def observe(self, batch: list[EngineRequest], tbt: float) -> None:
        self.stats.update(float(np.mean([r.prompt for r in batch])), float(np.mean([r.output for r in batch])))
        # A batch cut short by an empty queue says nothing about whether the target meets the SLA; feeding its
        # size to b_avg would only ratchet the target down (see the closing note of the engine issue).
        if not self.limited:
            self.controller.update(tbt, len(batch))


class DynamicNoBins:
    """One FIFO, batch size min(b_mem, b_SLA) (seeds/004 Algorithms 1-2)."""

    kind: Literal["batch"] = "batch"
    name = "dynamic_no_bins"

    def __init__(
        self, capacity_tokens: int, d_sla: float = 0.010, epsilon: float = 0.005, b_min: int = 1, b_max: int = 128
    ) -> None:
        self.capacity_tokens = capacity_tokens
        self.lane = _Lane(SlaController(d_sla, epsilon, b_min, b_max), b_max, b_min)

    def enqueue(self, req: EngineRequest) -> None:
        self.lane.queue.append(req)

    def waiting(self) -> int:
        return len(self.lane.queue)

    def next_batch(self, free_tokens: int, block_size: int) -> list[EngineRequest]:
        return self.lane.take(self.capacity_tokens, free_tokens, block_size)

    def observe(self, batch: list[EngineRequest], tbt: float) -> None:
        self.lane.observe(batch, tbt)


def equal_mass_boundaries(predicted: np.ndarray, k: int) -> list[tuple[int, float]]:
    """Algorithm 3: bin edges at the quantiles 0, 1/K, ..., 1 of the predicted lengths; the last bin is open."""
    points = np.quantile(np.asarray(predicted, dtype=float), np.linspace(0, 1, k + 1))
    return [(int(np.floor(points[i])), float(np.floor(points[i + 1])) if i < k - 1 else np.inf) for i in range(k)]


def bin_index(boundaries: list[tuple[int, float]], predicted: int) -> int:
    """Algorithm 4: the first bin with min <= predicted < max, else the last."""
    for i, (lo, hi) in enumerate(boundaries):
        if lo <= predicted < hi:
            return i
    return len(boundaries) - 1


class MultiBinDynamic:
    """K queues by predicted output length, each batched dynamically with its own controller and B_MAX."""

    kind: Literal["batch"] = "batch"
    name = "multi_bin_dynamic"

    def __init__(
        self,
        boundaries: list[tuple[int, float]],
        bin_b_max: list[int],
        capacity_tokens: int,
        d_sla: float = 0.010,
        epsilon: float = 0.005,
        b_min: int = 1,
        selection: Literal["round_robin", "longest_queue"] = "round_robin",
        key: Literal["output", "total"] = "output",
    ) -> None:
        self.key = key
        self.boundaries = boundaries
        self.capacity_tokens = capacity_tokens
        self.lanes = [_Lane(SlaController(d_sla, epsilon, b_min, bm), bm, b_min) for bm in bin_b_max]
        self.selection = selection
        self._next = 0
        self.last_bin = -1

    def bin_of(self, req: EngineRequest) -> int:
        return bin_index(self.boundaries, req.predicted + (req.prompt if self.key == "total" else 0))

    @classmethod
    def for_workload(
        cls,
        prompts: np.ndarray,
        predicted: np.ndarray,
        k: int,
        capacity_tokens: int,
        b_max: int = 128,
        key: Literal["output", "total"] = "output",
        **kwargs: object,
    ) -> MultiBinDynamic:
        """Boundaries from the workload's predicted lengths (Algorithm 3) and per-bin B_MAX from each bin's mean
        sequence length (seeds/004 8.2: min(B_MAX, floor(M_avail / (avg_seq_len_k * kv_per_token)))).

        key "output" bins by predicted output length as the seed does; "total" by prompt + predicted output,
        the length that actually sets a static batch's time T(b, max L)."""
        values = predicted + prompts if key == "total" else predicted
        bounds = equal_mass_boundaries(values, k)
        idx = np.asarray([bin_index(bounds, int(v)) for v in values]) if len(values) else np.zeros(0, int)
        b_maxes = []
        for i in range(k):
            member = idx == i
            mean_len = float(np.mean(prompts[member] + predicted[member])) if member.any() else 1.0
            b_maxes.append(max(1, min(b_max, int(capacity_tokens // max(mean_len, 1.0)))))
        return cls(bounds, b_maxes, capacity_tokens, key=key, **kwargs)  # type: ignore[arg-type]

    def enqueue(self, req: EngineRequest) -> None:
        self.lanes[self.bin_of(req)].queue.append(req)

    def waiting(self) -> int:
        return sum(len(lane.queue) for lane in self.lanes)

    def _select(self) -> int:
        if self.selection == "longest_queue":
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
        self.lanes[self.bin_of(batch[0])].observe(batch, tbt)
