"""Multi-bin dynamic batching's hypotheses: the figures behind them against hand-computed cases, the capacity
search against a known threshold, the verdict rules, the global controller, and sim-sweep's report."""

import json

import numpy as np
import pytest

from infermeter.engine.config import EngineConfig
from infermeter.engine.latency import BatchModel, IterationModel
from infermeter.engine.multi_bin import MultiBinConfig, MultiBinDynamic
from infermeter.engine.scheduler import EngineLimits
from infermeter.sim import simulate
from infermeter.sim.hypotheses import (
    BISECTIONS,
    HYPOTHESES_JSON,
    HYPOTHESES_MD,
    STATEMENTS,
    Capacity,
    HypothesisReport,
    LevelResults,
    MethodResult,
    judge,
    methods,
    multi_bin,
    offered_rate,
    search,
)
from infermeter.sim.run import sim_block
from tests.cli import infermeter
from tests.sim.test_simulator import requests


def test_batch_figures_of_static_batches_against_hand_computed_values():
    """Two static batches of 4 (B=4): E[max output | batch] = (100 + 40) / 2; each batch decodes max - 1 steps of
    TBT = beta h(4); the engine time per token is the two batch times over the 20 + ... tokens."""
    outputs = [10, 100, 20, 30, 40, 5, 6, 7]
    cfg = EngineConfig(scheduler={"name": "static_fifo", "static_batch": 4})
    out = simulate(requests([0] * 8, outputs), cfg)
    m = BatchModel()
    assert out.steps == 2
    assert out.batch_max_output_sum / out.steps == pytest.approx(70.0)
    assert out.decode_steps == 99 + 39
    block = sim_block(out)
    assert block.decode_step_time_ms == pytest.approx(m.beta * m.h(4) * 1000)
    busy = m.batch_time(4, 100, 0) + m.batch_time(4, 40, 0)
    assert block.seconds_per_generated_token == pytest.approx(busy / sum(outputs))


def test_decode_steps_of_an_iteration_engine_are_those_without_prefill():
    """One request alone on a continuous engine: one prefill step with its first token, then output - 1 decode
    steps of fixed + per_decode_seq + per_context_token x context each."""
    model = IterationModel(fixed=0.005, per_prefill_token=1e-5, per_decode_seq=1e-4, per_context_token=0.0)
    cfg = EngineConfig(scheduler="continuous", iteration_model=model)
    out = simulate(requests([200], [11]), cfg)
    assert out.decode_steps == 10
    assert sim_block(out).decode_step_time_ms == pytest.approx((0.005 + 1e-4) * 1000)


def test_a_global_controller_is_one_controller_shared_by_every_bin():
    limits = EngineLimits(10**6, 0.010)
    per_bin = MultiBinDynamic(MultiBinConfig(bins=3, edges=[0, 10, 20], bin_b_max=[64, 32, 8]), limits)
    shared = MultiBinDynamic(
        MultiBinConfig(bins=3, edges=[0, 10, 20], bin_b_max=[64, 32, 8], controller="global"), limits
    )
    assert len({id(lane.controller) for lane in per_bin.lanes}) == 3
    assert len({id(lane.controller) for lane in shared.lanes}) == 1
    # per-bin B_MAX still caps each lane; the shared controller keeps the global B_MAX
    assert [lane.b_max for lane in shared.lanes] == [64, 32, 8]
    assert shared.lanes[0].controller.b_max == 128
    assert [lane.controller.b_max for lane in per_bin.lanes] == [64, 32, 8]


@pytest.mark.parametrize("start", [0.01, 1.0, 10.0, 500.0])
def test_capacity_search_finds_a_known_threshold_from_either_side(start):
    threshold = 3.7
    tried = []

    def feasible(f):
        tried.append(f)
        return f <= threshold

    found = search(feasible, start)
    assert threshold / 2 ** (1 / 2**BISECTIONS) <= found <= threshold
    assert len(tried) < 40


def test_capacity_search_returns_zero_when_nothing_is_feasible():
    assert search(lambda f: False, 10.0) == 0.0


def test_offered_rate_is_requests_over_the_arrival_span():
    r = requests([1] * 5, [1] * 5, [2.0, 3.0, 4.0, 5.0, 6.0])
    assert offered_rate(r) == pytest.approx(1.0)


def result(method, **figures):
    base = dict(
        throughput_req_s=1.0, goodput_req_s=1.0, p99_latency_s=10.0, token_sla_violation_pct=0.0,
        request_sla_violation_pct=0.0, gpu_utilization=0.5, seconds_per_generated_token=0.002,
        decode_step_time_ms=7.0, avg_batch_size=10.0, mean_batch_max_output=500.0,
    )  # fmt: skip
    return MethodResult(method=method, **{**base, **figures})


def level(mb: dict, glob: dict, nob: dict, fifo: dict) -> LevelResults:
    rows = [
        result("static_fifo", **fifo),
        result("dynamic_no_bins", **nob),
        result(multi_bin("total"), **mb),
        result(multi_bin("total", "global"), **glob),
    ]
    return LevelResults(level="high", rate_req_s=27.0, methods=rows)


CAPS = {m: Capacity(method=m, capacity_threshold_lambda=1.0, capacity_qps_under_sla=1.0) for m in methods()}


def outcomes(lv: LevelResults) -> dict[str, str]:
    return {v.hypothesis: v.outcome for v in judge(lv, "total", CAPS)}


def test_verdicts_follow_the_figures():
    held = level(
        mb=dict(mean_batch_max_output=200.0, avg_batch_size=20.0, goodput_req_s=1.2, seconds_per_generated_token=0.001),
        glob=dict(goodput_req_s=1.0),
        nob=dict(mean_batch_max_output=600.0, avg_batch_size=12.0, seconds_per_generated_token=0.0015),
        fifo=dict(seconds_per_generated_token=0.004),
    )
    assert outcomes(held) == {"H1": "held", "H2": "held", "H3": "held"}
    # shorter batches that are not larger, a global controller as good, one single-queue method as efficient
    mixed = level(
        mb=dict(
            mean_batch_max_output=200.0, avg_batch_size=8.0, goodput_req_s=1.005, seconds_per_generated_token=0.001
        ),
        glob=dict(goodput_req_s=1.0),
        nob=dict(mean_batch_max_output=600.0, avg_batch_size=12.0, seconds_per_generated_token=0.001),
        fifo=dict(seconds_per_generated_token=0.004),
    )
    assert outcomes(mixed) == {"H1": "partly held", "H2": "no difference", "H3": "no difference"}
    worse = level(
        mb=dict(mean_batch_max_output=700.0, avg_batch_size=8.0, goodput_req_s=0.9, seconds_per_generated_token=0.003),
        glob=dict(goodput_req_s=1.0),
        nob=dict(mean_batch_max_output=600.0, avg_batch_size=12.0, seconds_per_generated_token=0.0015),
        fifo=dict(seconds_per_generated_token=0.004),
    )
    assert outcomes(worse) == {"H1": "did not hold", "H2": "did not hold", "H3": "did not hold"}


def test_sim_sweep_reports_the_hypotheses_at_three_load_levels(tmp_path):
    """One command: three levels (0.27 req/s scaled 100x, 10x, 1x), each hypothesis judged with both bin keys, the
    section 9.4 capacities of every method, the report beside the results and printed."""
    out = tmp_path / "sweep"
    p = infermeter("sim-sweep", "--out", out, "--requests", "300", "--step", "hypotheses")
    assert p.returncode == 0, p.stderr
    report = HypothesisReport.model_validate(json.loads((out / HYPOTHESES_JSON).read_text()))
    assert [lv.level for lv in report.levels] == ["high", "medium", "low"]
    rates = [lv.rate_req_s for lv in report.levels]
    assert rates[0] / rates[1] == pytest.approx(10, rel=0.3) and rates[1] / rates[2] == pytest.approx(10, rel=0.3)
    assert {(v.hypothesis, v.bin_key, v.level) for v in report.verdicts} == {
        (h, k, lv) for h in STATEMENTS for k in ("output", "total") for lv in ("high", "medium", "low")
    }
    assert [c.method for c in report.capacities] == methods()
    for c in report.capacities:
        assert c.capacity_qps_under_sla > 0 and c.capacity_threshold_lambda > 0
    # at the low level every engine idles part of the time
    low = {m.method: m for m in report.levels[2].methods}
    assert all(0 < m.gpu_utilization < 1 for m in low.values())
    assert np.isfinite([m.decode_step_time_ms for m in low.values()]).all()
    md = (out / HYPOTHESES_MD).read_text()
    assert all(statement in md for statement in STATEMENTS.values())
    assert all(f"{h}: {s}" in p.stdout for h, s in STATEMENTS.items())
    assert "capacity_qps_under_sla" in p.stdout
    assert not (out / "high").exists()  # --step hypotheses runs neither the grid nor the comparison


def test_sim_sweep_runs_each_level_in_its_own_directory(tmp_path):
    from infermeter.sim.experiments import STEP2_CSV

    out = tmp_path / "sweep"
    args = ["sim-sweep", "--out", out, "--requests", "200", "--gpus", "1", "--bins", "2", "--levels", "high,low"]
    p = infermeter(*args, "--step", "2")
    assert p.returncode == 0, p.stderr
    assert (out / "high" / STEP2_CSV).is_file() and (out / "low" / STEP2_CSV).is_file()
    assert not (out / "medium").exists()
    assert "Step 2: method comparison (high load)" in p.stdout


def test_sim_sweep_refuses_a_rate_with_a_trace_and_a_scale_without_one(tmp_path):
    p = infermeter("sim-sweep", "--out", tmp_path / "s", "--requests", "10", "--rps-scale", "5")
    assert p.returncode == 2 and "--rps-scale" in p.stderr and "Traceback" not in p.stderr
    p = infermeter("sim-sweep", "--out", tmp_path / "s", "--requests", "10", "--levels", "high,high")
    assert p.returncode == 2 and "--levels" in p.stderr
