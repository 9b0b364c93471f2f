"""Discrete-event simulator (seeds/004): ARRIVAL and GPU_FREE events over a pool of EngineCores, virtual clock.

Events are ordered by time; at equal times a finishing step (GPU_FREE) comes before an arrival, engines in
index order, arrivals in workload order, so a run is deterministic.  Batch schedulers share one queue across
the pool (the seed's GPU pool); iteration-level engines each keep their own, and arrivals are dispatched to the
engine with the fewest requests in it (ties to the lowest index) or round-robin.

Emission rows go to a TokenLog kept whole (`SimOutcome.emissions`), or to a sink that takes them as requests
finish (`sim.run.simulate_run` streams them into the run directory), so a run of millions of requests holds
only per-request arrays and the rows of requests not yet written.
"""

from __future__ import annotations

import gc
import heapq
from bisect import insort
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

from infermeter.engine.config import EngineConfig, build_engines
from infermeter.engine.core import EngineCore
from infermeter.engine.multi_bin import BinEdges, MultiBinDynamic
from infermeter.engine.request import EngineRequest
from infermeter.engine.step import Step, emission_runs
from infermeter.sim.bins import PlannedBins, plan_bins
from infermeter.sim.tokens import Emissions, TokenEnds, TokenLog
from infermeter.workload.spec import Requests

Dispatch = Literal["least_loaded", "round_robin"]
ARRIVAL_BLOCK = 4096  # requests whose columns are turned into Python lists at a time (not all n at once)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for a while: an event loop that makes millions of objects and no
    reference cycles would only have it rescan every queued request again and again (a third of the run's time)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


class EmissionSink(Protocol):
    """Where a streamed simulation's emission rows go (sim.run.RecordStream)."""

    def start(self, sent: np.ndarray, rejected: dict[int, str]) -> None:
        """The simulator's send times and rejections, filled in as the run goes (read them when requests are done)."""

    def add_runs(self, owners: list[int], first: list[float], interval: list[float], count: list[int]) -> None:
        """A step's emission runs, in time order."""

    def done(self, idxs: list[int]) -> None:
        """These requests emit nothing more (finished, or rejected)."""

    def close(self) -> TokenEnds:
        """Every request is done: write what is left and return each request's first and last token and count."""


@dataclass
class SimOutcome:
    """Everything a simulated run measured, per request and per engine."""

    requests: Requests
    config: EngineConfig
    engines: int
    emissions: Emissions | None  # every emission row; None when a sink took them as requests finished
    ends: TokenEnds  # each request's first and last token time and token count
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
    sent: np.ndarray  # when each request left the client: its arrival, or in a closed loop a completion's time
    bins: BinEdges | None = None  # multi-bin dynamic batching's edges and per-bin B_MAX, and how they were obtained

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
    sink: EmissionSink | None = None,
    planned: PlannedBins | None = None,
) -> SimOutcome:
    """Run every request through the engine model to completion; returns the emissions and seed metrics.

    Open loop, requests are sent at their arrival times; with `concurrency` C (a closed loop) the first C are sent
    at 0 and each completion sends the next in workload order.  A request reaches an engine `config.api_overhead`
    after it is sent (what a live server's HTTP path adds), so TTFT and E2E include it.  With a `sink`, emission
    rows go to it as requests finish and `emissions` is None.  `planned`: what sim.bins.plan_bins made of `config`
    for these requests and `seed` (a caller that needs the resolved configuration before the run, as simulate_run
    does for run.json, plans once and passes it); planned here when None.
    """
    n = len(requests)
    overhead = config.api_overhead
    closed = concurrency is not None
    if concurrency is not None:
        sent = np.full(n, np.nan)
        sent[: min(int(concurrency), n)] = 0.0
        arrivals = sent + overhead
        order = None  # workload order
        waiting = min(int(concurrency), n)
    else:  # nothing changes these: they may be the workload's own arrays (no copies of n values)
        sent = requests.arrival_s.astype(float, copy=False) if len(requests.arrival_s) == n else np.zeros(n)
        arrivals = sent + overhead if overhead else sent
        order = None if n < 2 or bool(np.all(arrivals[1:] >= arrivals[:-1])) else np.argsort(arrivals, kind="stable")
        waiting = n
    prompts = requests.input_tokens.astype(np.int64, copy=False)
    outputs = requests.output_tokens.astype(np.int64, copy=False)
    if n and outputs.min() < 1:
        outputs = np.maximum(outputs, 1)
    plan = planned if planned is not None else plan_bins(config, requests, seed)  # multi-bin: Algorithm 3
    config, bins, predicted = plan.config, plan.bins, plan.predicted
    classes = requests.request_class
    pool = build_engines(config, engines)
    whole: TokenLog | None = None
    log: TokenLog | EmissionSink
    if sink is None:
        whole = log = TokenLog()  # every row, kept until the end
    else:
        log = sink
    first_scheduled = np.full(n, np.nan)
    preemptions = np.zeros(n, dtype=np.int64)
    rejected: dict[int, str] = {}
    if sink is not None:
        sink.start(sent, rejected)
    # fast scalar stores; cast through bytes to the float view its type checker knows takes floats
    first_view, preempt_view = first_scheduled.data.cast("B").cast("d"), preemptions.data
    heap: list[tuple[float, int, int]] = []  # (time, engine index, tie-breaker)
    live = np.zeros(engines, dtype=np.int64)  # requests inside each engine (queued or running)
    shared = config.scheduler.shares_queue
    shared_queue = pool[0].scheduler
    idle = list(range(engines))  # indexes of engines without a step in flight, ascending
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
        idle.remove(engine.engine_id)
        steps += 1
        batch_sum += step.batch_size
        if step.plan is None:  # a batch run to completion: each member emits its output; the longest sets decode
            longest = max(step.count, default=0)
            max_out_sum += longest
            decode_steps += max(longest - 1, 0)
            decode_time += max(longest - 1, 0) * (step.interval[0] if step.interval else 0.0)
        else:
            max_out_sum += max((r.output for r in step.reqs), default=0)
            if not step.plan.prefill:
                decode_steps += 1
                decode_time += step.duration
        heapq.heappush(heap, (step.end, engine.engine_id, steps))

    def record(step: Step) -> None:
        log.add_runs(*emission_runs(step))

    # the arrivals' columns, ARRIVAL_BLOCK requests at a time in send order
    block_start, block_len = 0, 0
    b_idx: list[int] = []
    b_time: list[float] = []
    b_prompt: list[int] = []
    b_output: list[int] = []
    b_pred: list[int] = []
    b_class: list[str] = []

    def load(at: int) -> tuple[int, list[int], list[float], list[int], list[int], list[int], list[str]]:
        end = min(at + ARRIVAL_BLOCK, n)
        ids: slice | np.ndarray = slice(at, end) if order is None else order[at:end]
        times = [] if closed else arrivals[ids].tolist()  # a closed loop's times are set as it runs
        cls = list(map(str, classes[ids].tolist()))
        idxs = list(range(at, end)) if order is None else order[at:end].tolist()
        return end - at, idxs, times, prompts[ids].tolist(), outputs[ids].tolist(), predicted[ids].tolist(), cls

    i = 0
    if waiting:
        block_len, b_idx, b_time, b_prompt, b_output, b_pred, b_class = load(0)
    next_arrival = (float(arrivals[0]) if closed else b_time[0]) if waiting else np.inf
    submit_shared = pool[0].submit
    with collector_paused():
        while i < waiting or heap:
            if heap and heap[0][0] <= next_arrival:
                now, e, _ = heapq.heappop(heap)
                engine = pool[e]
                step = engine.current
                assert step is not None
                record(step)
                finished = engine.finish(step)
                insort(idle, e)
                for r in finished:
                    first_view[r.idx] = r.first_scheduled
                    if r.preemptions:  # zeros are left unwritten: pages never touched take no memory
                        preempt_view[r.idx] = r.preemptions
                if sink is not None and finished:
                    sink.done([r.idx for r in finished])
                done += len(finished)
                if not shared:
                    live[e] -= len(finished)
                if closed and finished:  # each completion sends the next request of the closed loop
                    take = min(len(finished), n - waiting)
                    sent[waiting : waiting + take] = now
                    arrivals[waiting : waiting + take] = now + overhead
                    waiting += take
                    next_arrival = float(arrivals[i]) if i < waiting else np.inf
                start(engine, now)
                if shared:  # other idle engines may take what this one left in the shared queue
                    for other in list(idle):
                        if not shared_queue.waiting():
                            break
                        start(pool[other], now)
            else:
                # every request arriving at this instant is queued before any engine starts a step
                now = next_arrival
                touched: list[EngineCore] = []
                while True:
                    k = i - block_start
                    idx = b_idx[k]
                    req = EngineRequest(idx, now, b_prompt[k], b_output[k], b_pred[k], b_class[k])
                    i += 1
                    if k + 1 == block_len and i < n:
                        block_start = i
                        block_len, b_idx, b_time, b_prompt, b_output, b_pred, b_class = load(i)
                    if shared:
                        target = None
                        reason = submit_shared(req)
                    else:
                        if dispatch == "round_robin":
                            target = pool[rr % engines]
                            rr += 1
                        else:
                            target = pool[int(np.argmin(live))]
                        reason = target.submit(req)
                    if reason is not None:
                        rejected[idx] = reason
                        if sink is not None:
                            sink.done([idx])
                        done += 1
                        if closed and waiting < n:  # a refusal frees its slot of the loop at once
                            sent[waiting], arrivals[waiting] = now, now + overhead
                            waiting += 1
                    elif target is not None:
                        live[target.engine_id] += 1
                        touched.append(target)
                    if i < waiting:
                        next_arrival = float(arrivals[i]) if closed else b_time[i - block_start]
                    else:
                        next_arrival = np.inf
                    if next_arrival != now:
                        break
                if shared:
                    for e in list(idle) if idle else ():
                        if not shared_queue.waiting():
                            break
                        start(pool[e], now)
                else:
                    for engine in touched:
                        if engine.idle and engine.has_work():
                            start(engine, now)
            if progress is not None and done >= next_report:
                progress(done)
                next_report = done + 1000
    if progress is not None:
        progress(done)
    unfinished = [e for e in pool if e.has_work()]
    assert not unfinished, "simulation ended with work left in an engine"
    emissions = whole.rows(n) if whole is not None else None
    if emissions is not None:
        ends = emissions.ends()
    else:
        assert sink is not None
        ends = sink.close()
    if bins is None and isinstance(shared_queue, MultiBinDynamic):  # learned online: the values in force at the end
        bins = shared_queue.bins()
    return SimOutcome(
        requests=requests,
        config=config,
        engines=engines,
        emissions=emissions,
        ends=ends,
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
        sent=sent,
        bins=bins,
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
