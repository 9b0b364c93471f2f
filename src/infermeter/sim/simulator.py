"""Discrete-event simulator (seeds/004): ARRIVAL and GPU_FREE events over a pool of EngineCores, virtual clock.

Events are ordered by time; at equal times a finishing step (GPU_FREE) comes before an arrival, engines in
index order, arrivals in workload order, so a run is deterministic.  Batch schedulers share one queue across
the pool (the seed's GPU pool); iteration-level engines each keep their own, and arrivals are dispatched to the
engine with the fewest requests in it (ties to the lowest index) or round-robin.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from infermeter.engine.config import EngineConfig, build_engines
from infermeter.engine.core import EngineCore
from infermeter.engine.request import EngineRequest, predict_lengths
from infermeter.engine.step import Step, emission_runs
from infermeter.sim.tokens import Emissions, TokenLog
from infermeter.workload.spec import Requests

Dispatch = Literal["least_loaded", "round_robin"]


@dataclass
class SimOutcome:
    """Everything a simulated run measured, per request and per engine."""

    requests: Requests
    config: EngineConfig
    engines: int
    emissions: Emissions
    first_scheduled: np.ndarray  # seconds; NaN for rejected requests
    preemptions: np.ndarray
    rejected: dict[int, str]
    busy_time: np.ndarray  # per engine
    steps: int
    batch_size_sum: int
    batch_max_output_sum: int  # summed over steps: the longest output among the step's requests
    decode_steps: int  # decode iterations: a batch's tokens after its first, an iteration step without prefill
    decode_time: float  # seconds those decode iterations took
    peak_kv_usage: float
    end_time: float
    predicted: np.ndarray
    sent: np.ndarray  # when each request left the client: its arrival, or in a closed loop a completion's time

    def served(self) -> np.ndarray:
        """True for requests the engines served (not rejected)."""
        ok = np.ones(len(self.requests), dtype=bool)
        ok[list(self.rejected)] = False
        return ok


def simulate(
    requests: Requests,
    config: EngineConfig,
    engines: int = 1,
    seed: int = 0,
    dispatch: Dispatch = "least_loaded",
    progress: Callable[[int], None] | None = None,
    concurrency: int | None = None,
) -> SimOutcome:
    """Run every request through the engine model to completion; returns the emissions and seed metrics.

    Open loop, requests are sent at their arrival times; with `concurrency` C (a closed loop) the first C are sent
    at 0 and each completion sends the next in workload order.  A request reaches an engine `config.api_overhead`
    after it is sent (what a live server's HTTP path adds), so TTFT and E2E include it.
    """
    n = len(requests)
    overhead = config.api_overhead
    closed = concurrency is not None
    if closed:
        sent = np.full(n, np.nan)
        sent[: min(int(concurrency), n)] = 0.0  # type: ignore[arg-type]
        arrivals = sent + overhead
        order = np.arange(n)
        waiting = min(int(concurrency), n)  # type: ignore[arg-type]
    else:
        sent = requests.arrival_s.astype(float) if len(requests.arrival_s) == n else np.zeros(n)
        arrivals = sent + overhead
        order = np.argsort(arrivals, kind="stable")
        waiting = n
    prompts = requests.input_tokens.astype(np.int64)
    outputs = np.maximum(requests.output_tokens.astype(np.int64), 1)
    predicted = predict_lengths(outputs, config.prediction_noise, seed)
    pool = build_engines(config, engines)
    log = TokenLog()
    first_scheduled = np.full(n, np.nan)
    preemptions = np.zeros(n, dtype=np.int64)
    rejected: dict[int, str] = {}
    heap: list[tuple[float, int, int]] = []  # (time, engine index, tie-breaker)
    live = np.zeros(engines, dtype=np.int64)  # requests inside each engine (queued or running)
    shared = config.scheduler.shares_queue
    steps = 0
    batch_sum = 0
    max_out_sum = 0
    decode_steps = 0
    decode_time = 0.0
    rr = 0
    now = 0.0
    done = 0
    next_report = 1000

    def start(engine: EngineCore, at: float) -> None:
        nonlocal steps, batch_sum, max_out_sum, decode_steps, decode_time
        step = engine.next_step(at)
        if step is None:
            return
        steps += 1
        batch_sum += step.batch_size
        longest = max((r.output for r in step.reqs), default=0)
        max_out_sum += longest
        if step.plan is None:  # a batch run to completion: its longest member's tokens after the first
            decode_steps += max(longest - 1, 0)
            decode_time += max(longest - 1, 0) * (step.interval[0] if step.interval else 0.0)
        elif not step.plan.prefill:
            decode_steps += 1
            decode_time += step.duration
        heapq.heappush(heap, (step.end, engine.engine_id, steps))

    def record(step: Step) -> None:
        log.add_runs(*emission_runs(step))

    i = 0
    while i < waiting or heap:
        next_arrival = arrivals[order[i]] if i < waiting else np.inf
        if heap and heap[0][0] <= next_arrival:
            now, e, _ = heapq.heappop(heap)
            engine = pool[e]
            step = engine.current
            assert step is not None
            record(step)
            finished = engine.finish(step)
            for r in finished:
                first_scheduled[r.idx] = r.first_scheduled
                preemptions[r.idx] = r.preemptions
            done += len(finished)
            live[e] -= len(finished)  # unused for a shared queue
            if closed:  # each completion sends the next request of the closed loop
                take = min(len(finished), n - waiting)
                sent[waiting : waiting + take] = now
                arrivals[waiting : waiting + take] = now + overhead
                waiting += take
            start(engine, now)
            if shared:  # other idle engines may take what this one left in the shared queue
                for other in pool:
                    if other.idle and other.scheduler.waiting():
                        start(other, now)
        else:
            # every request arriving at this instant is queued before any engine starts a step
            now = float(next_arrival)
            touched: list[EngineCore] = []
            while i < waiting and arrivals[order[i]] == now:
                idx = int(order[i])
                i += 1
                req = EngineRequest(
                    idx,
                    now,
                    int(prompts[idx]),
                    int(outputs[idx]),
                    int(predicted[idx]),
                    str(requests.request_class[idx]),
                )
                if shared:
                    target = pool[0]
                elif dispatch == "round_robin":
                    target = pool[rr % engines]
                    rr += 1
                else:
                    target = pool[int(np.argmin(live))]
                reason = target.submit(req)
                if reason is not None:
                    rejected[idx] = reason
                    done += 1
                    if closed and waiting < n:  # a refusal frees its slot of the loop at once
                        sent[waiting], arrivals[waiting] = now, now + overhead
                        waiting += 1
                    continue
                if not shared:
                    live[target.engine_id] += 1
                    touched.append(target)
            for engine in pool if shared else touched:
                if engine.idle and engine.has_work():
                    start(engine, now)
        if progress is not None and done >= next_report:
            progress(done)
            next_report = done + 1000
    if progress is not None:
        progress(done)
    unfinished = [e for e in pool if e.has_work()]
    assert not unfinished, "simulation ended with work left in an engine"
    return SimOutcome(
        requests=requests,
        config=config,
        engines=engines,
        emissions=log.rows(n),
        first_scheduled=first_scheduled,
        preemptions=preemptions,
        rejected=rejected,
        busy_time=np.asarray([e.busy_time for e in pool]),
        steps=steps,
        batch_size_sum=batch_sum,
        batch_max_output_sum=max_out_sum,
        decode_steps=decode_steps,
        decode_time=decode_time,
        peak_kv_usage=max(e.memory.peak / e.memory.total if e.memory.total else 0.0 for e in pool),
        end_time=now,
        predicted=predicted,
        sent=sent,
    )


@dataclass(frozen=True)
class SimTask:
    """One simulation, as a task that may run in another process (`infermeter.distributed.tasks`)."""

    requests: Requests
    config: EngineConfig
    engines: int = 1
    seed: int = 0
    concurrency: int | None = None


def simulate_task(task: SimTask) -> SimOutcome:
    return simulate(task.requests, task.config, task.engines, task.seed, concurrency=task.concurrency)
