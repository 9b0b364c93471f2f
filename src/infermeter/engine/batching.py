"""Batch-level schedulers (multi-bin dynamic batching, section 5): a batch runs to completion before the next.

static_fifo takes up to B=8 from one FIFO; dynamic_no_bins sizes batches by min(b_mem, b_SLA).  Every batch is
trimmed so the KV memory it will fill (prompt + output tokens of its members) fits the engine.  multi_bin.py
builds the K-queue scheduler on the same base.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import deque
from itertools import islice
from typing import ClassVar, Literal

import numpy as np
from pydantic import Field, model_validator

from infermeter.engine.request import EngineRequest
from infermeter.engine.scheduler import EngineLimits, SchedulerConfig
from infermeter.engine.sla_controller import LengthStats, SlaController, b_mem
from infermeter.engine.step import EngineState, Step


def fit_memory(candidates: list[EngineRequest], free_tokens: int, block_size: int) -> int:
    """How many leading candidates fit in KV memory together (each holds prompt + output tokens at the end)."""
    used = 0
    for i, r in enumerate(candidates):
        used += -(-(r.prompt + r.output) // block_size) * block_size  # blocks_for(r.total_len), inlined
        if used > free_tokens:
            return i
    return len(candidates)


class BatchLevel(ABC):
    """The batch-level family: form a batch, allocate its whole KV up front, time it with T(b, L), release it."""

    @abstractmethod
    def enqueue(self, req: EngineRequest) -> None: ...

    @abstractmethod
    def waiting(self) -> int: ...

    @abstractmethod
    def next_batch(self, free_tokens: int, block_size: int) -> list[EngineRequest]:
        """The next batch, fitting free_tokens of KV memory allocated in blocks of block_size tokens."""

    def observe(self, batch: list[EngineRequest], tbt: float) -> None:  # noqa: B027 - most schedulers learn nothing
        """What the served batch says about lengths and decode time (adaptive schedulers learn from it)."""

    def step(self, engine: EngineState, now: float) -> Step | None:
        memory, latency = engine.memory, engine.latency
        batch = self.next_batch(memory.free * memory.block_size, memory.block_size)
        if not batch:
            return None
        b = len(batch)
        prompts = [r.prompt for r in batch]
        outputs = [r.output for r in batch]
        prompt_total = sum(prompts)
        max_out = max(outputs)
        ttft = latency.ttft(b, prompt_total)
        tbt = latency.tbt(b, prompt_total + b * max_out / 2)
        totals = [p + o for p, o in zip(prompts, outputs, strict=True)]
        duration = latency.batch_time(b, max(totals), prompt_total)
        duration = max(duration, ttft + (max_out - 1) * tbt)
        size = memory.block_size
        blocks = [-(-t // size) for t in totals]  # blocks_for, inlined
        ok = memory.allocate(sum(blocks))
        assert ok, "batch scheduler formed a batch larger than free KV memory"
        for r, nb in zip(batch, blocks, strict=True):
            r.blocks = nb
            if r.first_scheduled < 0:
                r.first_scheduled = now
        engine.running = list(batch)
        self.observe(batch, tbt)
        return Step(
            engine=engine.engine_id,
            start=now,
            duration=duration,
            batch_size=b,
            reqs=batch,
            first=[ttft] * b,
            interval=[tbt] * b,
            count=outputs,
            finished=list(batch),
        )

    def finish(self, engine: EngineState, step: Step) -> list[EngineRequest]:
        released = 0
        for r in step.finished:
            r.generated = r.output
            released += r.blocks
            r.blocks = 0
        engine.memory.release(released)
        engine.running = []
        return step.finished


class StaticFifo(BatchLevel):
    """Baseline: one FIFO, fixed batch size (B=8), no adaptation."""

    def __init__(self, batch_size: int = 8) -> None:
        self.batch_size = batch_size
        self.queue: deque[EngineRequest] = deque()

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


class Lane:
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
        batch = list(islice(self.queue, n))
        batch = batch[: fit_memory(batch, free_tokens, block_size)]
        pop = self.queue.popleft
        for _ in batch:
            pop()
        self.limited = n < target
        return batch

    def observe(self, batch: list[EngineRequest], tbt: float) -> None:
        # sum / len is np.mean here exactly: integer sums are exact in float64, then one correctly rounded division
        b = len(batch)
        self.stats.update(sum([r.prompt for r in batch]) / b, sum([r.output for r in batch]) / b)
        # A batch cut short by an empty queue says nothing about whether the target meets the SLA; feeding its
        # size to b_avg would only ratchet the target down (see the closing note of the engine issue).
        if not self.limited:
            self.controller.update(tbt, len(batch))


class DynamicNoBins(BatchLevel):
    """One FIFO, batch size min(b_mem, b_SLA) (Algorithms 1-2 of multi-bin dynamic batching)."""

    def __init__(
        self, capacity_tokens: int, d_sla: float = 0.010, epsilon: float = 0.005, b_min: int = 1, b_max: int = 128
    ) -> None:
        self.capacity_tokens = capacity_tokens
        self.lane = Lane(SlaController(d_sla, epsilon, b_min, b_max), b_max, b_min)

    def enqueue(self, req: EngineRequest) -> None:
        self.lane.queue.append(req)

    def waiting(self) -> int:
        return len(self.lane.queue)

    def next_batch(self, free_tokens: int, block_size: int) -> list[EngineRequest]:
        return self.lane.take(self.capacity_tokens, free_tokens, block_size)

    def observe(self, batch: list[EngineRequest], tbt: float) -> None:
        self.lane.observe(batch, tbt)


class BatchLevelConfig(SchedulerConfig):
    """Settings every batch-level scheduler shares."""

    shares_queue: ClassVar[bool] = True
    latency: ClassVar[Literal["batch", "iteration"]] = "batch"


class StaticFifoConfig(BatchLevelConfig):
    """static_fifo: one FIFO queue, a fixed batch of B requests run to completion (the baseline)."""

    name: Literal["static_fifo"] = "static_fifo"
    static_batch: int = Field(default=8, gt=0, description="B, requests per batch")

    def build(self, limits: EngineLimits) -> StaticFifo:
        return StaticFifo(self.static_batch)

    def max_batch(self) -> int:
        return self.static_batch


class DynamicConfig(BatchLevelConfig):
    """Settings of the SLA controller that sizes dynamic batches (Algorithm 2)."""

    b_min: int = Field(default=1, gt=0)
    b_max: int = Field(default=128, gt=0)
    epsilon: float = Field(default=0.005, ge=0, description="tolerance band around the decode SLA, seconds")

    def max_batch(self) -> int:
        return self.b_max

    @model_validator(mode="after")
    def _bounds(self) -> DynamicConfig:
        if self.b_min > self.b_max:
            raise ValueError(f"b_min ({self.b_min}) must not exceed b_max ({self.b_max})")
        return self


class DynamicNoBinsConfig(DynamicConfig):
    """dynamic_no_bins: one FIFO, batch size min(b_mem, b_SLA) from memory and the decode SLA."""

    name: Literal["dynamic_no_bins"] = "dynamic_no_bins"

    def build(self, limits: EngineLimits) -> DynamicNoBins:
        return DynamicNoBins(limits.capacity_tokens, limits.d_sla_token, self.epsilon, self.b_min, self.b_max)
