import numpy as np
import pytest

from infermeter.engine.batching import StaticFifo
from infermeter.engine.core import EngineCore
from infermeter.engine.latency import BatchModel
from infermeter.engine.multi_bin import MultiBinConfig, MultiBinDynamic, bin_index, equal_mass_edges
from infermeter.engine.request import EngineRequest
from infermeter.engine.scheduler import EngineLimits
from infermeter.engine.sla_controller import SlaController, b_mem


def req(i, out, prompt=0):
    return EngineRequest(i, 0.0, prompt, out, out)


def test_equal_mass_boundaries_algorithm_3():
    lengths = np.arange(1, 101)
    edges = equal_mass_edges(lengths, 4)
    # quantiles at 0, .25, .5, .75 of 1..100 are 1, 25.75, 50.5, 75.25 -> floors are the lower edges, last bin open
    assert edges == [1, 25, 50, 75]
    assert [bin_index(edges, x) for x in (1, 24, 25, 49, 50, 99, 10_000)] == [0, 0, 1, 1, 2, 3, 3]
    assert bin_index(edges, 0) == 0  # below every edge seen: the shortest bin, not the longest


def test_b_mem_algorithm_1():
    # eta = 42666 tokens (seed: (12 - 4) / 1.875e-4), E[l] = 585: floor(0.9 * 42666 / 585) = 65
    assert b_mem(42666, 585.0, 1, 128) == 65
    assert b_mem(42666, 10.0, 1, 128) == 128
    assert b_mem(1000, 5000.0, 1, 128) == 1


def test_sla_controller_cases():
    c = SlaController(d_sla=0.010, epsilon=0.005, b_min=1, b_max=128)
    # start optimistic: nothing seen (tau 0 < D - eps), b_avg = 128 -> b_low = min(128, 128-4) = 124
    assert c.target() == (124 + 128) // 2
    c.tau_avg, c.b_avg = 0.020, 100.0  # case 1: too slow -> b_high = max(100, b_low + 4), b_low -= 2
    c.b_low, c.b_high = 90.0, 120.0
    assert c.target() == (88 + 100) // 2
    c.tau_avg, c.b_avg = 0.010, 50.0  # case 3: within tolerance -> centred on b_avg
    assert c.target() == 50
    c.update(0.0, 10)
    assert c.tau_avg == pytest.approx(0.008) and c.b_avg == pytest.approx(42.0)


def _run_one_batch(scheduler, requests, model):
    core = EngineCore(scheduler, model, capacity_tokens=10**6)
    for r in requests:
        core.submit(r)
    step = core.next_step(0.0)
    core.finish(step)
    return step


@pytest.mark.parametrize("alpha", [0.0, BatchModel().alpha])
def test_seed_toy_example_throughput_ratio(alpha):
    """seeds/004 5.5: FIFO batch [1, 100, 2, 3] vs bin 0's batch [1, 2, 3, 5]."""
    model = BatchModel(alpha=alpha)
    fifo = _run_one_batch(StaticFifo(4), [req(i, o) for i, o in enumerate([1, 100, 2, 3])], model)
    two_bins = MultiBinConfig(bins=2, edges=[0, 64], bin_b_max=[8, 8], bin_key="output")
    mb = MultiBinDynamic(two_bins, EngineLimits(10**6, 0.010))  # target 6: the whole bin of 4
    binned = _run_one_batch(mb, [req(i, o) for i, o in enumerate([1, 2, 3, 5, 100, 150, 200])], model)
    assert [r.output for r in binned.reqs] == [1, 2, 3, 5]
    assert fifo.duration == pytest.approx(model.batch_time(4, 100, 0))
    assert binned.duration == pytest.approx(model.batch_time(4, 5, 0))
    ratio = (4 / binned.duration) / (4 / fifo.duration)
    # with alpha = 0 the ratio is exactly 100 / 5 = 20 (the seed's "~20x"); the calibrated alpha cuts it to ~8.1
    expect = 20.0 if alpha == 0 else (alpha + model.beta * 100 * model.h(4)) / (alpha + model.beta * 5 * model.h(4))
    assert ratio == pytest.approx(expect)
