"""The scheduler registry: every scheduler configures, builds and serves; the flat config form; online bins."""

import numpy as np
import pytest
from pydantic import ValidationError

from infermeter.engine.config import EngineConfig, build_engines
from infermeter.engine.multi_bin import MultiBinConfig, MultiBinDynamic, bin_index, equal_mass_edges
from infermeter.engine.registry import SCHEDULER_CONFIGS, SCHEDULERS
from infermeter.engine.request import EngineRequest
from infermeter.engine.scheduler import EngineLimits


def serve(config: EngineConfig, lengths: list[tuple[int, int]]) -> dict[int, int]:
    """Submit everything at t=0 and step to completion; returns tokens emitted per request."""
    (core,) = build_engines(config, 1)
    tokens = {i: 0 for i in range(len(lengths))}
    for i, (prompt, out) in enumerate(lengths):
        assert core.submit(EngineRequest(i, 0.0, prompt, out, out)) is None
    now, steps = 0.0, 0
    while core.has_work():
        step = core.next_step(now)
        assert step is not None, "work left but the scheduler planned nothing"
        assert core.memory.used == sum(r.blocks for r in core.running) <= core.memory.total
        for r, c in zip(step.reqs, step.count, strict=True):
            tokens[r.idx] += c
        now = step.end
        core.finish(step)
        steps += 1
        assert steps < 100_000
    assert core.memory.used == 0
    return tokens


@pytest.mark.parametrize("name", SCHEDULERS)
def test_every_registered_scheduler_serves_every_request_within_memory(name):
    rng = np.random.default_rng(5)
    lengths = [(int(p), int(o)) for p, o in zip(rng.integers(1, 400, 60), rng.integers(1, 120, 60), strict=True)]
    config = EngineConfig(scheduler=name, kv_capacity_tokens=4096)  # tight: iteration engines must preempt
    assert serve(config, lengths) == {i: o for i, (_, o) in enumerate(lengths)}


@pytest.mark.parametrize("name", SCHEDULERS)
def test_every_scheduler_config_round_trips_through_its_file_form(name):
    config = EngineConfig(scheduler=name)
    again = EngineConfig.model_validate(config.model_dump(mode="json"))
    assert again == config and type(again.scheduler) is SCHEDULER_CONFIGS[name]
    assert again.scheduler.name == name and config.model_dump(mode="json")["scheduler"]["name"] == name


def test_flat_settings_move_into_their_scheduler_and_strays_are_named():
    config = EngineConfig.model_validate({"scheduler": "multi_bin_dynamic", "bins": 8, "d_sla_token": 0.02})
    assert isinstance(config.scheduler, MultiBinConfig) and config.scheduler.bins == 8 and config.d_sla_token == 0.02
    with pytest.raises(ValidationError, match="bins is a setting of multi_bin_dynamic, not of continuous"):
        EngineConfig.model_validate({"scheduler": "continuous", "bins": 8})
    with pytest.raises(ValidationError, match="unknown scheduler 'fifo': choose one of static_fifo"):
        EngineConfig(scheduler="fifo")
    with pytest.raises(ValidationError, match="edges has 2 values for 4 bins"):
        EngineConfig(scheduler={"name": "multi_bin_dynamic", "edges": [0, 10]})


def test_multi_bin_learns_equal_mass_edges_online_and_rebins_the_queue():
    """No workload up front: edges are Algorithm 3 over the keys seen, relearned as the sample doubles."""
    config = MultiBinConfig(bins=4, bin_key="output", learn_requests=64)
    sched = MultiBinDynamic(config, EngineLimits(10**6, 0.010))
    keys = np.random.default_rng(2).permutation(np.arange(1, 65))
    for i, k in enumerate(keys):
        sched.enqueue(EngineRequest(i, float(i), 0, int(k), int(k)))
        if i == 0:
            assert sched.edges == [int(k)] * 4  # one request seen: one value
    assert sched.edges == equal_mass_edges(np.arange(1, 65), 4) == [1, 16, 32, 48]
    for lane_index, lane in enumerate(sched.lanes):
        members = list(lane.queue)
        assert [r.idx for r in members] == sorted(r.idx for r in members)  # arrival order kept
        assert {bin_index(sched.edges, r.predicted) for r in members} == {lane_index}
    assert sched.waiting() == 64
    sched.enqueue(EngineRequest(64, 64.0, 0, 10_000, 10_000))  # past the learning window: edges stay
    assert sched.edges == [1, 16, 32, 48] and len(sched.lanes[3].queue) == 17 + 1  # 48..64, and the new one


def test_configured_edges_and_b_max_are_used_as_given():
    config = MultiBinConfig(bins=2, edges=[0, 100], bin_b_max=[3, 5], bin_key="output")
    sched = MultiBinDynamic(config, EngineLimits(10**6, 0.010))
    for i, out in enumerate([5, 500, 50, 1000]):
        sched.enqueue(EngineRequest(i, 0.0, 0, out, out))
    assert [[r.idx for r in lane.queue] for lane in sched.lanes] == [[0, 2], [1, 3]]
    assert [lane.b_max for lane in sched.lanes] == [3, 5] and sched.edges == [0, 100]
