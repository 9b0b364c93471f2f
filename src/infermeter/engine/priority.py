"""Priority scheduling with shortest-predicted-job-first inside a priority (vLLM's `--scheduling-policy priority`).

Continuous batching whose queue is ordered by (priority, predicted output length, arrival) instead of arrival
alone: a lower priority value is served first, and among equals the request predicted to finish soonest, which
minimises mean latency when predictions are good and starves long requests under sustained load.  When KV
memory runs out, the running request that ranks last is preempted (recompute) and rejoins the ordered queue.
"""

from __future__ import annotations

import heapq
from typing import Literal

from infermeter.engine.iteration import ContinuousBatching, PrefillStepConfig
from infermeter.engine.request import EngineRequest
from infermeter.engine.scheduler import EngineLimits
from infermeter.engine.step import EngineState


def rank(req: EngineRequest) -> tuple[int, int, float, int]:
    """The order of service: priority, then predicted tokens still to generate, then arrival."""
    return req.priority, req.predicted - req.generated, req.arrival, req.idx


class PriorityShortestFirst(ContinuousBatching):
    """Continuous batching over a queue ordered by `rank`; preemption takes the worst-ranked running request."""

    def __init__(self, max_num_seqs: int = 256, max_batched_tokens: int = 8192) -> None:
        super().__init__(max_num_seqs, max_batched_tokens)
        self.heap: list[tuple[tuple[int, int, float, int], EngineRequest]] = []

    def enqueue(self, req: EngineRequest) -> None:
        heapq.heappush(self.heap, (rank(req), req))

    def requeue(self, req: EngineRequest) -> None:
        self.enqueue(req)

    def waiting(self) -> int:
        return len(self.heap)

    def head(self) -> EngineRequest:
        return self.heap[0][1]

    def pop_head(self) -> None:
        heapq.heappop(self.heap)

    def victim(self, engine: EngineState) -> EngineRequest:
        return max(engine.running, key=rank)


class PriorityConfig(PrefillStepConfig):
    """priority: continuous batching served by request priority, then shortest predicted job first."""

    name: Literal["priority"] = "priority"

    def build(self, limits: EngineLimits) -> PriorityShortestFirst:
        return PriorityShortestFirst(self.max_num_seqs, self.max_batched_tokens)
