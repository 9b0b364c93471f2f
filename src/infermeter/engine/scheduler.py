"""The scheduler seam: the protocol every scheduler meets and the base of their configurations.

A scheduler owns the engine's queue and its memory operations: it forms each step (admitting, growing or
preempting KV on the EngineState it is given) and applies the step's effects when it is done.  The core only
asks for the next step and hands it back, so it never branches on the kind of scheduler.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar, Literal, Protocol

from pydantic import BaseModel, ConfigDict

from infermeter.engine.request import EngineRequest
from infermeter.engine.step import EngineState, Step


class Scheduler(Protocol):
    def enqueue(self, req: EngineRequest) -> None: ...

    def waiting(self) -> int: ...

    def step(self, engine: EngineState, now: float) -> Step | None:
        """Plan and time the next step at `now`, taking the KV memory it needs; None when there is nothing to do."""
        ...

    def finish(self, engine: EngineState, step: Step) -> list[EngineRequest]:
        """Apply a finished step: progress, KV growth and release; returns the requests that completed."""
        ...


@dataclass(frozen=True)
class EngineLimits:
    """What a scheduler is built for: the engine's KV capacity and the per-token decode SLA."""

    capacity_tokens: int
    d_sla_token: float


class SchedulerConfig(BaseModel, ABC):
    """One scheduler's settings.  Subclasses set `name` (a Literal), `shares_queue`, `latency` and `build`."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    name: str
    # batch-level schedulers keep one queue for the whole pool of engines (the multi-GPU pool of multi-bin
    # dynamic batching); iteration-level engines each keep their own
    shares_queue: ClassVar[bool] = False
    latency: ClassVar[Literal["batch", "iteration"]] = "iteration"  # the latency model it is timed with by default

    @abstractmethod
    def build(self, limits: EngineLimits) -> Scheduler:
        """A new scheduler with these settings, for an engine with these limits."""

    @abstractmethod
    def max_batch(self) -> int:
        """The most requests one step can hold (the denominator of batch utilization)."""
