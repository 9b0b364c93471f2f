"""Iteration-level schedulers: continuous batching (vLLM-like) and chunked prefill (Sarathi-like).

Each engine step the scheduler picks which sequences decode one token and which prompts prefill how many
tokens.  Continuous batching admits new requests first and runs their whole prefills in a step of their own,
so running decodes stall behind it; chunked prefill fills a token budget with every decode first and then
prompt chunks, so no step is much longer than the budget allows.  The family's base owns KV admission, growth
and recompute preemption, so a new policy only decides the order and the mix.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import deque
from typing import Literal

from pydantic import Field

from infermeter.engine.latency import attention_pairs
from infermeter.engine.memory import blocks_for
from infermeter.engine.request import EngineRequest
from infermeter.engine.scheduler import EngineLimits, SchedulerConfig
from infermeter.engine.step import EngineState, Step, StepPlan


class IterationLevel(ABC):
    """The iteration-level family: a step per token, KV grown block by block, recompute preemption."""

    def __init__(self, max_num_seqs: int = 256) -> None:
        self.max_num_seqs = max_num_seqs
        self.queue: deque[EngineRequest] = deque()

    @abstractmethod
    def plan(self, engine: EngineState) -> StepPlan:
        """Which prompts prefill how many tokens and which sequences decode, admitting and growing KV as it goes."""

    def enqueue(self, req: EngineRequest) -> None:
        self.queue.append(req)

    def waiting(self) -> int:
        return len(self.queue)

    def requeue(self, req: EngineRequest) -> None:
        """A preempted request rejoins the queue; first in line, so it resumes before newer work."""
        self.queue.appendleft(req)

    def head(self) -> EngineRequest:
        """The request to admit next (the queue is not empty)."""
        return self.queue[0]

    def pop_head(self) -> None:
        """`head()` was admitted: take it off the queue."""
        self.queue.popleft()

    # ----- memory operations

    def admit(self, engine: EngineState, req: EngineRequest, first_chunk: int) -> bool:
        """Start a request: KV for its cached prefix and first prefill chunk; False when memory is short."""
        blocks = blocks_for(req.cached + first_chunk, engine.memory.block_size)
        if not engine.memory.allocate(blocks):
            return False
        req.blocks = blocks
        req.kv = req.cached
        req.prefilled = 0
        req.admitted = engine.admissions
        engine.admissions += 1
        engine.running.append(req)
        return True

    def grow(self, engine: EngineState, req: EngineRequest, tokens: int) -> bool:
        """Make room for `tokens` more KV tokens of a running request (already admitted chunks count)."""
        need = blocks_for(req.kv + tokens, engine.memory.block_size) - req.blocks
        if need <= 0:
            return True
        if not engine.memory.allocate(need):
            return False
        req.blocks += need
        return True

    def preempt(self, engine: EngineState, req: EngineRequest) -> None:
        """Recompute preemption: drop its KV and requeue it with its progress, to prefill prompt + output again."""
        engine.running.remove(req)
        engine.memory.release(req.blocks)
        engine.preempted_requests += req.preemptions == 0
        engine.preempted_tokens += req.kv
        req.blocks = 0
        req.kv = 0
        req.prefilled = 0
        req.cached = 0  # recompute from scratch
        req.prefill_target = req.prompt + req.generated
        req.preemptions += 1
        engine.preemptions += 1
        self.requeue(req)

    def victim(self, engine: EngineState) -> EngineRequest:
        """Whom to preempt when memory runs out: the latest admitted (vLLM's recompute order)."""
        return engine.running[-1]

    def decodes(self, engine: EngineState) -> list[EngineRequest]:
        """Every running, fully prefilled sequence gets a KV slot for one more token, preempting victims when
        memory runs out (recompute: they rejoin the queue)."""
        out: list[EngineRequest] = []
        preempted: set[int] = set()
        for req in list(engine.running):
            if req.prefilling or id(req) in preempted:
                continue
            while not self.grow(engine, req, 1):
                victim = self.victim(engine)
                self.preempt(engine, victim)
                preempted.add(id(victim))
                if victim is req:
                    break
            else:
                out.append(req)
        return out

    # ----- steps

    def step(self, engine: EngineState, now: float) -> Step | None:
        plan = self.plan(engine)
        if not plan:
            return None
        prefill_tokens = pairs = 0
        context = sum(r.kv for r in plan.decode)
        for r, c in plan.prefill:
            prefill_tokens += c
            context += r.kv + c
            pairs += attention_pairs(c, r.kv)
        # the step waits for what the engine still does for requests that finished (a one-at-a-time server's turnaround)
        duration = engine.latency.step_time(prefill_tokens, len(plan.decode), context, pairs)
        duration += max(engine.busy_until - now, 0)
        step = Step(engine.engine_id, now, duration, len(plan.decode) + len(plan.prefill), plan=plan)
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

    def finish(self, engine: EngineState, step: Step) -> list[EngineRequest]:
        assert step.plan is not None, "an iteration-level scheduler finishes only its own steps"
        for r, c in step.plan.prefill:
            r.kv += c
            r.prefilled += c
        for r in step.plan.decode:
            r.kv += 1
        for r in step.reqs:
            r.generated += 1
        for r in step.finished:
            engine.running.remove(r)
            engine.memory.release(r.blocks)
            r.blocks = 0
        if step.finished:
            prompts = sum(r.prompt for r in step.finished)
            after = engine.latency.after_requests(len(step.finished), prompts)
            engine.busy_until = max(engine.busy_until, step.end) + after  # arrivals during the step may have added
        return step.finished


class ContinuousBatching(IterationLevel):
    """vLLM (v0 default): FCFS admission; a step with new prompts runs only their prefills."""

    def __init__(self, max_num_seqs: int = 256, max_batched_tokens: int = 8192) -> None:
        super().__init__(max_num_seqs)
        self.max_batched_tokens = max_batched_tokens

    def plan(self, engine: EngineState) -> StepPlan:
        plan = StepPlan()
        budget = self.max_batched_tokens
        while self.waiting() and len(engine.running) < self.max_num_seqs:
            req = self.head()
            need = req.prefill_target
            if plan.prefill and need > budget:
                break
            if not self.admit(engine, req, need):
                break
            self.pop_head()
            plan.prefill.append((req, need))
            budget -= need
        if plan.prefill:
            return plan
        plan.decode = self.decodes(engine)
        return plan


class ChunkedPrefill(IterationLevel):
    """Sarathi / vLLM v1: a token budget per step, decodes first, then prompt chunks (FCFS)."""

    def __init__(self, max_num_seqs: int = 256, token_budget: int = 512) -> None:
        super().__init__(max_num_seqs)
        self.token_budget = token_budget

    def plan(self, engine: EngineState) -> StepPlan:
        plan = StepPlan(decode=self.decodes(engine))
        budget = self.token_budget - len(plan.decode)
        for req in list(engine.running):
            if budget <= 0:
                break
            if req.prefilling:
                chunk = min(req.prefill_target - req.prefilled, budget)
                if self.grow(engine, req, chunk):
                    plan.prefill.append((req, chunk))
                    budget -= chunk
        while budget > 0 and self.waiting() and len(engine.running) < self.max_num_seqs:
            req = self.head()
            chunk = min(req.prefill_target, budget)
            if not self.admit(engine, req, chunk):
                break
            self.pop_head()
            plan.prefill.append((req, chunk))
            budget -= chunk
        return plan


class IterationConfig(SchedulerConfig):
    """Settings every iteration-level scheduler shares."""

    max_num_seqs: int = Field(default=256, gt=0, description="sequences running at once")

    def max_batch(self) -> int:
        return self.max_num_seqs


class PrefillStepConfig(IterationConfig):
    """Settings of the schedulers whose new prompts prefill in a step of their own (continuous, priority)."""

    max_batched_tokens: int = Field(default=8192, gt=0, description="prompt tokens one prefill step may take")


class ContinuousConfig(PrefillStepConfig):
    """continuous: continuous batching as vLLM v0 does it; new prompts prefill in a step of their own."""

    name: Literal["continuous"] = "continuous"

    def build(self, limits: EngineLimits) -> ContinuousBatching:
        return ContinuousBatching(self.max_num_seqs, self.max_batched_tokens)


class ChunkedPrefillConfig(IterationConfig):
    """chunked_prefill: Sarathi-style chunked prefill; decodes first, then prompt chunks within a token budget."""

    name: Literal["chunked_prefill"] = "chunked_prefill"
    token_budget: int = Field(default=512, gt=0, description="tokens (decodes + prompt chunks) per step")

    def build(self, limits: EngineLimits) -> ChunkedPrefill:
        return ChunkedPrefill(self.max_num_seqs, self.token_budget)
