"""Iteration-level schedulers: continuous batching (vLLM-like) and chunked prefill (Sarathi-like).

Each engine step the scheduler picks which sequences decode one token and which prompts prefill how many
tokens.  Continuous batching admits new requests first and runs their whole prefills in a step of their own,
so running decodes stall behind it; chunked prefill fills a token budget with every decode first and then
prompt chunks, so no step is much longer than the budget allows.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

from infermeter.engine.request import EngineRequest

if TYPE_CHECKING:
    from infermeter.engine.core import EngineCore


@dataclass
class StepPlan:
    prefill: list[tuple[EngineRequest, int]] = field(default_factory=list)  # (request, tokens this step)
    decode: list[EngineRequest] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.prefill or self.decode)


class IterationScheduler(Protocol):
    kind: Literal["iteration"]
    name: str
    queue: deque[EngineRequest]

    def enqueue(self, req: EngineRequest) -> None: ...

    def waiting(self) -> int: ...

    def plan(self, core: EngineCore) -> StepPlan: ...


class _Base:
    kind: Literal["iteration"] = "iteration"
    name = "iteration"

    def __init__(self, max_num_seqs: int = 256) -> None:
        self.max_num_seqs = max_num_seqs
        self.queue: deque[EngineRequest] = deque()

    def enqueue(self, req: EngineRequest) -> None:
        self.queue.append(req)

    def waiting(self) -> int:
        return len(self.queue)

    def requeue_front(self, req: EngineRequest) -> None:
        self.queue.appendleft(req)

    def _decodes(self, core: EngineCore) -> list[EngineRequest]:
        """Every running, fully prefilled sequence gets a KV slot for one more token, preempting from the
        latest admitted when memory runs out (recompute: it rejoins the queue's front)."""
        out: list[EngineRequest] = []
        preempted: set[int] = set()
        for req in list(core.running):
            if req.prefilling or id(req) in preempted:
                continue
            while not core.grow(req, 1):
                victim = core.running[-1]
                core.preempt(victim, self)
                preempted.add(id(victim))
                if victim is req:
                    break
            else:
                out.append(req)
        return out


class ContinuousBatching(_Base):
    """vLLM (v0 default): FCFS admission; a step with new prompts runs only their prefills."""

    name = "continuous"

    def __init__(self, max_num_seqs: int = 256, max_batched_tokens: int = 8192) -> None:
        super().__init__(max_num_seqs)
        self.max_batched_tokens = max_batched_tokens

    def plan(self, core: EngineCore) -> StepPlan:
        plan = StepPlan()
        budget = self.max_batched_tokens
        while self.queue and len(core.running) < self.max_num_seqs:
            req = self.queue[0]
            need = req.prefill_target
            if plan.prefill and need > budget:
                break
            if not core.admit(req, need):
                break
            self.queue.popleft()
            plan.prefill.append((req, need))
            budget -= need
        if plan.prefill:
            return plan
        plan.decode = self._decodes(core)
        return plan


class ChunkedPrefill(_Base):
    """Sarathi / vLLM v1: a token budget per step, decodes first, then prompt chunks (FCFS)."""

    name = "chunked_prefill"

    def __init__(self, max_num_seqs: int = 256, token_budget: int = 512) -> None:
        super().__init__(max_num_seqs)
        self.token_budget = token_budget

    def plan(self, core: EngineCore) -> StepPlan:
        plan = StepPlan(decode=self._decodes(core))
        budget = self.token_budget - len(plan.decode)
        for req in list(core.running):
            if budget <= 0:
                break
            if req.prefilling:
                chunk = min(req.prefill_target - req.prefilled, budget)
                if core.grow(req, chunk):
                    plan.prefill.append((req, chunk))
                    budget -= chunk
        while budget > 0 and self.queue and len(core.running) < self.max_num_seqs:
            req = self.queue[0]
            chunk = min(req.prefill_target, budget)
            if not core.admit(req, chunk):
                break
            self.queue.popleft()
            plan.prefill.append((req, chunk))
            budget -= chunk
        return plan
