"""A unit of engine work (Step), the engine state schedulers act on, and the token emissions a step makes."""

from __future__ import annotations

from dataclasses import dataclass, field

from infermeter.engine.latency import LatencyModel
from infermeter.engine.memory import KVMemory
from infermeter.engine.request import EngineRequest


@dataclass
class StepPlan:
    """What an iteration-level step does: prompt chunks to prefill and sequences that decode one token."""

    prefill: list[tuple[EngineRequest, int]] = field(default_factory=list)  # (request, tokens this step)
    decode: list[EngineRequest] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.prefill or self.decode)


@dataclass
class Step:
    """One unit of engine work and its token emissions.

    Request reqs[i] emits count[i] tokens at start + first[i] + k * interval[i], k = 0 .. count[i] - 1.
    """

    engine: int
    start: float
    duration: float
    batch_size: int
    reqs: list[EngineRequest] = field(default_factory=list)
    first: list[float] = field(default_factory=list)
    interval: list[float] = field(default_factory=list)
    count: list[int] = field(default_factory=list)
    finished: list[EngineRequest] = field(default_factory=list)
    plan: StepPlan | None = None  # iteration-level steps

    @property
    def end(self) -> float:
        return self.start + self.duration


def emission_runs(step: Step) -> tuple[list[int], list[float], list[float], list[int]]:
    """The step's tokens as runs: (request index, time of the first token, interval, count), one per request.

    The one place a step becomes emission times, for the simulator's virtual clock and the emulator's real one.
    """
    start = step.start
    return [r.idx for r in step.reqs], [start + f for f in step.first], step.interval, step.count


@dataclass
class EngineState:
    """What a scheduler reads and changes on one engine: its latency model, KV memory and running requests."""

    latency: LatencyModel
    memory: KVMemory
    engine_id: int = 0
    running: list[EngineRequest] = field(default_factory=list)
    preemptions: int = 0
    preempted_requests: int = 0  # requests preempted at least once (draft 5.8.4's preemption rate)
    preempted_tokens: int = 0  # KV tokens discarded by preemptions, to be computed again (its preemption loss)
    admissions: int = 0
    # work left after finished requests and arrivals during a step (IterationModel.per_request, per_arrival): no step
    # starts before
    busy_until: float = 0.0
