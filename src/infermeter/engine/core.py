"""EngineCore: one serving engine (scheduler + latency model + KV memory), free of any clock.

A driver submits requests, asks `next_step(now)` for the next unit of work, and gets a Step that says how long
it takes and which tokens it emits when; when that time has come (virtual or real) it calls `finish(step)`.
The simulator drives it on a virtual clock, the emulator on the real one.  What a step does is the
scheduler's business (scheduler.py): the core keeps the state and the books.
"""

from __future__ import annotations

from infermeter.engine.latency import LatencyModel
from infermeter.engine.memory import KVMemory, blocks_for
from infermeter.engine.request import EngineRequest
from infermeter.engine.scheduler import Scheduler
from infermeter.engine.step import EngineState, Step


class EngineCore:
    def __init__(
        self,
        scheduler: Scheduler,
        latency: LatencyModel,
        capacity_tokens: int,
        block_size: int = 16,
        engine_id: int = 0,
    ) -> None:
        self.scheduler = scheduler
        self.state = EngineState(latency, KVMemory(capacity_tokens, block_size), engine_id)
        self.current: Step | None = None
        self.busy_time = 0.0
        # whether arrivals cost the engine anything (most models: none, and the hot path skips them)
        self.arrival_costs = latency.arrival_cost(1) > 0 or latency.arrival_cost(0) > 0

    @property
    def engine_id(self) -> int:
        return self.state.engine_id

    @property
    def memory(self) -> KVMemory:
        return self.state.memory

    @property
    def running(self) -> list[EngineRequest]:
        """Requests holding KV on this engine now (a batch in flight, or the running set of an iteration engine)."""
        return self.state.running

    @property
    def preemptions(self) -> int:
        return self.state.preemptions

    def rejection(self, req: EngineRequest) -> str | None:
        """Why the engine can never serve this request, or None."""
        memory = self.state.memory
        if blocks_for(req.total_len, memory.block_size) > memory.total:
            return (
                f"request needs {req.total_len} KV tokens, more than the engine's capacity of "
                f"{memory.total * memory.block_size}"
            )
        return None

    def submit(self, req: EngineRequest) -> str | None:
        """Queue a request; returns the rejection reason instead when it can never fit."""
        memory = self.state.memory
        if -(-(req.prompt + req.output) // memory.block_size) > memory.total:  # `rejection`, inlined: a hot path
            return self.rejection(req)
        self.scheduler.enqueue(req)
        if self.arrival_costs and self.current is not None:  # it arrived during a step: the next starts later
            state = self.state
            state.busy_until = max(state.busy_until, self.current.end) + state.latency.arrival_cost(req.prompt)
        return None

    @property
    def idle(self) -> bool:
        return self.current is None

    def has_work(self) -> bool:
        return bool(self.state.running) or self.scheduler.waiting() > 0

    def next_step(self, now: float) -> Step | None:
        """Plan and time the next step starting at `now`; None when there is nothing to do."""
        assert self.current is None, "the engine is busy"
        step = self.scheduler.step(self.state, now)
        if step is not None:
            self.current = step
            self.busy_time += step.duration
        return step

    def finish(self, step: Step) -> list[EngineRequest]:
        """Apply a step's effects once its time has passed; returns the requests that completed."""
        assert step is self.current
        self.current = None
        return self.scheduler.finish(self.state, step)
