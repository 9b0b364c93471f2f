"""EngineCore driven directly (clock-free), with memory invariants checked after every step."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from infermeter.engine.batching import DynamicNoBins, StaticFifo
from infermeter.engine.core import EngineCore
from infermeter.engine.iteration import ChunkedPrefill, ContinuousBatching
from infermeter.engine.latency import BatchModel, IterationModel
from infermeter.engine.request import EngineRequest


def drive(core: EngineCore, requests: list[EngineRequest]) -> dict[int, list[float]]:
    """Submit everything at t=0 and run to completion; assert the memory invariants at every step."""
    tokens: dict[int, list[float]] = {r.idx: [] for r in requests}
    rejected = set()
    for r in requests:
        if core.submit(r) is not None:
            rejected.add(r.idx)
    now, steps = 0.0, 0
    while core.has_work():
        step = core.next_step(now)
        assert step is not None, "work left but the scheduler planned nothing (deadlock)"
        assert core.memory.used == sum(r.blocks for r in core.running)
        assert 0 <= core.memory.used <= core.memory.total
        for r, f, iv, c in zip(step.reqs, step.first, step.interval, step.count, strict=True):
            tokens[r.idx] += [now + f + k * iv for k in range(c)]
        core.finish(step)
        now = step.end
        steps += 1
        assert steps < 100_000
    assert core.memory.used == 0
    for r in requests:
        if r.idx not in rejected:
            assert len(tokens[r.idx]) == r.output, "every token emitted exactly once, preemptions included"
            assert np.all(np.diff(tokens[r.idx]) >= 0)
    return tokens


lengths = st.lists(st.tuples(st.integers(1, 300), st.integers(1, 60)), min_size=1, max_size=25)


@settings(max_examples=40, deadline=None)
@given(lengths, st.integers(64, 1200), st.sampled_from(["continuous", "chunked"]))
def test_iteration_engines_never_exceed_kv_capacity(reqs, capacity, kind):
    sched = ContinuousBatching(max_batched_tokens=512) if kind == "continuous" else ChunkedPrefill(token_budget=64)
    core = EngineCore(sched, IterationModel(), capacity_tokens=capacity, block_size=16)
    drive(core, [EngineRequest(i, 0.0, p, o, o) for i, (p, o) in enumerate(reqs)])
    assert core.memory.peak <= core.memory.total


@settings(max_examples=30, deadline=None)
@given(lengths, st.integers(64, 2000), st.sampled_from(["static", "dynamic"]))
def test_batch_engines_never_exceed_kv_capacity(reqs, capacity, kind):
    sched = StaticFifo(8) if kind == "static" else DynamicNoBins(capacity)
    core = EngineCore(sched, BatchModel(), capacity_tokens=capacity, block_size=16)
    drive(core, [EngineRequest(i, 0.0, p, o, o) for i, (p, o) in enumerate(reqs)])
    assert core.memory.peak <= core.memory.total


def test_memory_pressure_preempts_and_recomputes():
    core = EngineCore(ContinuousBatching(), IterationModel(), capacity_tokens=256, block_size=16)
    reqs = [EngineRequest(i, 0.0, 60, 60, 60) for i in range(3)]  # 3 x 120 tokens > 256
    drive(core, reqs)
    assert core.preemptions > 0 and sum(r.preemptions for r in reqs) == core.preemptions


def test_single_request_iteration_timing_is_exact():
    m = IterationModel()
    core = EngineCore(ContinuousBatching(), m, capacity_tokens=10_000)
    tokens = drive(core, [EngineRequest(0, 0.0, 100, 4, 4)])[0]
    t1 = m.step_time(100, 0, 100)  # prefill step emits the first token
    gaps = [m.step_time(0, 1, 100 + k) for k in range(3)]  # each decode step reads the context held so far
    np.testing.assert_allclose(tokens, np.cumsum([t1, *gaps]))


def test_oversized_request_is_rejected_not_stuck():
    core = EngineCore(ContinuousBatching(), IterationModel(), capacity_tokens=100)
    assert "capacity" in core.submit(EngineRequest(0, 0.0, 90, 20, 20))
    assert not core.has_work()
