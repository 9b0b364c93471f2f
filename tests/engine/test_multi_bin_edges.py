"""Multi-bin's bin key and where its edges come from: the method's key by default, workload edges refused where no
workload is known in advance (the emulator), which learns them online."""

from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from infermeter.emulator.config import EmulatorConfig, load_emulator_config
from infermeter.engine.config import EngineConfig, build_engines
from infermeter.engine.multi_bin import MultiBinConfig, MultiBinDynamic, bin_b_max, bin_indexes
from infermeter.engine.request import EngineRequest
from infermeter.engine.scheduler import EngineLimits
from infermeter.errors import UserError

LIMITS = EngineLimits(10**6, 0.010)


def test_bins_are_keyed_by_predicted_output_by_default():
    """Algorithm 4 places a request by its predicted output length: a long prompt does not move it."""
    sched = MultiBinDynamic(MultiBinConfig(bins=2, edges=[0, 100], bin_b_max=[8, 8]), LIMITS)
    long_prompt = EngineRequest(0, 0.0, 5000, 10, 10)  # 5,010 tokens in all, 10 predicted out
    sched.enqueue(long_prompt)
    assert sched.key(long_prompt) == 10 and [len(lane.queue) for lane in sched.lanes] == [1, 0]
    by_total = MultiBinDynamic(MultiBinConfig(bins=2, edges=[0, 100], bin_b_max=[8, 8], bin_key="total"), LIMITS)
    by_total.enqueue(long_prompt)
    assert [len(lane.queue) for lane in by_total.lanes] == [0, 1]


def test_section_8_2_b_max_by_hand():
    """min(B_MAX, floor(capacity / mean(prompt + predicted output) of the bin)); B_MAX for an empty bin."""
    keys = np.array([5, 15, 25, 35])  # predicted outputs
    lengths = np.array([105, 415, 25, 35])  # prompt + predicted output
    # edges [0, 10, 20, 30, 1000]: bins {5}, {15}, {25}, {35}, {} -> means 105, 415, 25, 35; 1,000 tokens
    assert bin_b_max([0, 10, 20, 30, 1000], keys, lengths, 1000, 32) == [9, 2, 32, 28, 32]
    assert bin_indexes([0, 10, 20, 30, 1000], np.array([-1, 0, 9, 10, 999, 1000, 10**6])).tolist() == [
        0,
        0,
        0,
        1,
        3,
        4,
        4,
    ]


def test_an_engine_built_without_a_workload_learns_its_edges_online():
    """The emulator's engine (build_engines, no workload): edges relearned from the requests as they arrive."""
    (core,) = build_engines(EngineConfig(scheduler={"name": "multi_bin_dynamic", "bins": 2}), 1)
    sched = core.scheduler
    assert isinstance(sched, MultiBinDynamic)
    for i, out in enumerate([10, 20, 30, 40]):
        core.submit(EngineRequest(i, float(i), 0, out, out))
    # Algorithm 3 over 10, 20, 30, 40 at 0 and 1/2: 10 and 25
    assert sched.edges == [10, 25] and sched.bins().edges_from == "online" and sched.bins().sample == 4


def test_workload_edges_are_refused_where_no_workload_is_known():
    with pytest.raises(ValueError, match="bin_edges: workload needs the whole workload before the run"):
        MultiBinDynamic(MultiBinConfig(bin_edges="workload"), LIMITS)
    with pytest.raises(ValidationError, match="use bin_edges: online"):
        EmulatorConfig.model_validate({"engine": {"scheduler": {"name": "multi_bin_dynamic", "bin_edges": "workload"}}})
    given = {"name": "multi_bin_dynamic", "bins": 2, "bin_edges": "workload", "edges": [0, 9], "bin_b_max": [4, 2]}
    assert EmulatorConfig.model_validate({"engine": {"scheduler": given}}).engine.scheduler.edges == [0, 9]


def test_the_emulators_config_file_refuses_workload_edges_in_one_line(tmp_path: Path):
    path = tmp_path / "emulator.yaml"
    path.write_text("engine:\n  scheduler: {name: multi_bin_dynamic, bin_edges: workload}\n")
    with pytest.raises(UserError) as err:
        load_emulator_config(path)
    assert str(err.value) == (
        f"emulator config {path}: engine: scheduler.bin_edges: workload needs the whole workload before the run, "
        "which a server never has: use bin_edges: online (learned from the requests as they arrive), or give edges "
        "and bin_b_max"
    )
    path.write_text("engine:\n  scheduler: {name: multi_bin_dynamic, bin_edges: online}\n")
    assert load_emulator_config(path).engine.scheduler.bin_edges == "online"


def test_section_8_2_b_max_in_one_pass_equals_the_mean_of_each_bin() -> None:
    """np.bincount's sums over counts against each bin's own mask and mean, empty bins included (B_MAX), on 5,000
    skewed keys in 64 bins."""
    rng = np.random.default_rng(3)
    keys = rng.lognormal(4, 1.2, 5000).astype(np.int64)
    lengths = keys + rng.integers(1, 4000, 5000)
    edges = sorted({int(e) for e in np.quantile(keys, np.linspace(0, 1, 60))} | {10**7, 10**7 + 1})
    idx = bin_indexes(edges, keys)
    by_mask = [
        max(1, min(128, int(200_000 // max(float(np.mean(lengths[idx == i])) if (idx == i).any() else 1.0, 1.0))))
        for i in range(len(edges))
    ]
    assert bin_b_max(edges, keys, lengths, 200_000, 128) == by_mask
    assert by_mask[-1] == 128  # an empty bin


def test_the_emulator_declares_the_online_edges_it_learns() -> None:
    """The emulator learns multi-bin's edges online; an unset bin_edges (which the simulator reads as `workload`) is
    recorded as `online` in the configuration it declares and run.json keeps, also when --scheduler picks multi-bin,
    so a prediction of the run models the policy it ran.  The unchanged configuration fails each assertion."""
    emu = EmulatorConfig.model_validate({"engine": {"scheduler": {"name": "multi_bin_dynamic", "bins": 2}}})
    assert emu.engine.scheduler.bin_edges == "online"
    assert emu.model_dump(mode="json")["engine"]["scheduler"]["bin_edges"] == "online"
    picked = EmulatorConfig().with_scheduler("multi_bin_dynamic")
    assert isinstance(picked.engine.scheduler, MultiBinConfig) and picked.engine.scheduler.bin_edges == "online"
    configured = {"name": "multi_bin_dynamic", "bins": 2, "edges": [0, 9], "bin_b_max": [4, 2]}
    kept = EmulatorConfig.model_validate({"engine": {"scheduler": configured}}).engine.scheduler
    assert isinstance(kept, MultiBinConfig) and (kept.edges, kept.bin_b_max) == ([0, 9], [4, 2])
    assert EmulatorConfig().engine.scheduler.name != "multi_bin_dynamic"  # other schedulers: nothing to record
