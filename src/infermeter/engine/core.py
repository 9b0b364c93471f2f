"""EngineCore: one serving engine (scheduler + latency model + KV memory), free of any clock.

A driver submits requests, asks `next_step(now)` for the next unit of work, and gets a Step that says how long
it takes and which tokens it emits when; when that time has come (virtual or real) it calls `finish(step)`.
The simulator drives it on a virtual clock, the emulator on the real one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from infermeter.engine.batching import BatchScheduler
from infermeter.engine.iteration import IterationScheduler, StepPlan
from infermeter.engine.latency import LatencyModel
from infermeter.engine.memory import KVMemory, blocks_for
from infermeter.engine.request import EngineRequest


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
    plan: StepPlan | None = None
    tbt: float = 0.0  # batch steps: the decode time between tokens

    @property
    def end(self) -> float:
        return self.start + self.duration


class EngineCore:
    def __init__(
        self,
        scheduler: BatchScheduler | IterationScheduler,
        latency: LatencyModel,
        capacity_tokens: int,
        block_size: int = 16,
        engine_id: int = 0,
    ) -> None:
        self.scheduler = scheduler
        self.latency = latency
        self.memory = KVMemory(capacity_tokens, block_size)
        self.engine_id = engine_id
        self.running: list[EngineRequest] = []
        self.current: Step | None = None
        self.preemptions = 0
        self.busy_time = 0.0
        self._admissions = 0

    # ----- requests in

    def rejection(self, req: EngineRequest) -> str | None:
        """Why the engine can never serve this request, or None."""
        need = blocks_for(req.total_len, self.memory.block_size)
        if need > self.memory.total:
            return (
                f"request needs {req.total_len} KV tokens, more than the engine's capacity of "
                f"{self.memory.total * self.memory.block_size}"
            )
        return None

    def submit(self, req: EngineRequest) -> str | None:
        """Queue a request; returns the rejection reason instead when it can never fit."""
        reason = self.rejection(req)
        if reason is None:
            self.scheduler.enqueue(req)
        return reason

    @property
    def idle(self) -> bool:
        return self.current is None

    def has_work(self) -> bool:
        return bool(self.running) or self.scheduler.waiting() > 0

    # ----- memory helpers for iteration schedulers

    def admit(self, req: EngineRequest, first_chunk: int) -> bool:
        blocks = blocks_for(req.cached + first_chunk, self.memory.block_size)
        if not self.memory.allocate(blocks):
            return False
        req.blocks = blocks
        req.kv = req.cached
        req.prefilled = 0
        req.admitted = self._admissions
        self._admissions += 1
        self.running.append(req)
        return True

    def grow(self, req: EngineRequest, tokens: int) -> bool:
        """Make room for `tokens` more KV tokens of a running request (already admitted chunks count)."""
        pending = req.kv + tokens
        need = blocks_for(pending, self.memory.block_size) - req.blocks
        if need <= 0:
            return True
        if not self.memory.allocate(need):
            return False
        req.blocks += need
        return True

    def preempt(self, req: EngineRequest, scheduler: IterationScheduler) -> None:
        """Recompute preemption: drop its KV, send it back to the front of the queue with its progress."""
        self.running.remove(req)
        self.memory.release(req.blocks)
        req.blocks = 0
        req.kv = 0
        req.prefilled = 0
        req.cached = 0  # recompute from scratch
        req.prefill_target = req.prompt + req.generated
        req.preemptions += 1
        self.preemptions += 1
        scheduler.requeue_front(req)  # type: ignore[attr-defined]

    # ----- steps

    def next_step(self, now: float) -> Step | None:
        """Plan and time the next step starting at `now`; None when there is nothing to do."""
        assert self.current is None, "the engine is busy"
        step = self._batch_step(now) if self.scheduler.kind == "batch" else self._iteration_step(now)
        if step is not None:
            self.current = step
            self.busy_time += step.duration
        return step

    def _batch_step(self, now: float) -> Step | None:
        sched: BatchScheduler = self.scheduler  # type: ignore[assignment]
        batch = sched.next_batch(self.memory.free * self.memory.block_size, self.memory.block_size)
        if not batch:
            return None
        b = len(batch)
        prompt_total = sum(r.prompt for r in batch)
        max_out = max(r.output for r in batch)
        ttft = self.latency.ttft(b, prompt_total)
        tbt = self.latency.tbt(b, prompt_total + b * max_out / 2)
        duration = self.latency.batch_time(b, max(r.total_len for r in batch), prompt_total)
        duration = max(duration, ttft + (max_out - 1) * tbt)
        blocks = [blocks_for(r.total_len, self.memory.block_size) for r in batch]
        ok = self.memory.allocate(sum(blocks))
        assert ok, "batch scheduler formed a batch larger than free KV memory"
        for r, nb in zip(batch, blocks, strict=True):
            r.blocks = nb
            if r.first_scheduled < 0:
                r.first_scheduled = now
        sched.observe(batch, tbt)
        return Step(
            engine=self.engine_id,
            start=now,
            duration=duration,
            batch_size=b,
            reqs=batch,
            first=[ttft] * b,
            interval=[tbt] * b,
            count=[r.output for r in batch],
            finished=list(batch),
            tbt=tbt,
        )

    def _iteration_step(self, now: float) -> Step | None:
        sched: IterationScheduler = self.scheduler  # type: ignore[assignment]
        plan = sched.plan(self)
        if not plan:
            return None
        prefill_tokens = sum(c for _, c in plan.prefill)
        context = sum(r.kv for r in plan.decode) + sum(r.kv + c for r, c in plan.prefill)
        duration = self.latency.step_time(prefill_tokens, len(plan.decode), context)
        step = Step(self.engine_id, now, duration, len(plan.decode) + len(plan.prefill), plan=plan)
        emitting = list(plan.decode) + [r for r, c in plan.prefill if r.prefilled + c >= r.prefill_target]
        for r in emitting:
            step.reqs.append(r)
            step.first.append(duration)
            step.interval.append(0.0)
            step.count.append(1)
            if r.generated + 1 >= r.output:
                step.finished.append(r)
        for r, _ in plan.prefill:
            if r.first_scheduled < 0:
                r.first_scheduled = now
        return step

    def finish(self, step: Step) -> list[EngineRequest]:
        """Apply a step's effects once its time has passed; returns the requests that completed."""
        assert step is self.current
        self.current = None
        if step.plan is None:
            for r in step.finished:
                r.generated = r.output
                self.memory.release(r.blocks)
                r.blocks = 0
            return step.finished
        for r, c in step.plan.prefill:
            r.kv += c
            r.prefilled += c
        for r in step.plan.decode:
            r.kv += 1
        for r in step.reqs:
            r.generated += 1
        for r in step.finished:
            self.running.remove(r)
            self.memory.release(r.blocks)
            r.blocks = 0
        return step.finished
