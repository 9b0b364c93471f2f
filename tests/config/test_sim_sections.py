"""The simulation commands' options from configuration sections: a required field is a required option, a repeatable
list option joins its occurrences, a section's rule fails with its option's name, and the sweep, prediction and
engine options resolve to what the simulator takes."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from infermeter.cli import options as opt
from infermeter.config import checks
from infermeter.config.engine import SimEngine
from infermeter.config.prediction import PredictedEngine
from infermeter.config.section import Given
from infermeter.config.sections import Load, Workload
from infermeter.config.sim import simulated_load
from infermeter.config.sweep import Sweep, sweep_plan
from infermeter.engine.multi_bin import MultiBinConfig
from infermeter.errors import UserError
from infermeter.workload.traces import BURSTGPT_RATE, LEVELS


def given_by(*parts: opt.Part, args: list[str]) -> tuple[int, str, Given]:
    """What a command built from `parts` receives from `args`: exit code, output, and `given`."""
    seen: dict[str, Given] = {}
    app = typer.Typer()

    @app.command()
    @opt.built_from(*parts)
    def command(given: Given) -> None:
        seen["given"] = given

    result = CliRunner().invoke(app, args)
    return result.exit_code, result.output, seen.get("given", {})


def test_a_repeatable_list_option_joins_every_occurrence_and_keeps_its_default_when_not_given():
    code, out, given = given_by(opt.Part("sweep", Sweep), args=["--requests", "200", "--requests", "300,400"])
    assert code == 0, out
    assert given["sweep"]["requests"] == [[200], [300, 400]]  # typer's: a list per occurrence
    sweep = Sweep.from_options(given["sweep"])
    assert sweep.requests == [200, 300, 400]
    assert sweep.gpus == [1, 2, 4, 8, 16, 32, 64, 100] and sweep.bins == [1, 2, 4, 8, 16, 32]
    assert sweep.step == "all" and sweep.levels == "high,medium,low"


def test_int_list_checks_every_item_of_text_lists_and_nested_lists():
    parse = checks.int_list(1, 10)
    assert parse("1, 2,3") == [1, 2, 3]
    assert parse([[1, 2], [3], 4]) == [1, 2, 3, 4]
    for bad in ("0", "1,x", "", [[1], [11]], [0]):
        with pytest.raises(ValueError):
            parse(bad)


def test_a_required_field_is_a_required_option(tmp_path):
    code, out, _ = given_by(opt.Part("predicted", PredictedEngine), args=[])
    assert code == 2 and "Missing option '--engine'" in out
    engine = tmp_path / "engine.yaml"
    engine.write_text("")  # every setting at its default
    code, out, given = given_by(
        opt.Part("predicted", PredictedEngine), args=["--engine", str(engine), "--set", "a=1", "--set", "b=2"]
    )
    assert code == 0, out
    assert PredictedEngine.from_options(given["predicted"]).set_ == ["a=1", "b=2"]


def test_from_options_names_the_option_or_gives_the_rule_across_options():
    with pytest.raises(UserError, match=r"^--requests: "):
        Load.from_options({"requests": 0})
    with pytest.raises(UserError, match=r"^give either --rate \(open loop\) or --concurrency"):
        Load.from_options({"rate": 1.0, "concurrency": 2})


def test_the_engine_options_lay_over_the_file_and_refuse_bins_without_multi_bin(tmp_path):
    with pytest.raises(UserError, match="--bin-key sets multi-bin dynamic batching's bins"):
        SimEngine(bin_key="total").engine_config()
    cfg = SimEngine(scheduler="multi_bin_dynamic", bins=3, sla_token_ms=5.0, kv_tokens=4096).engine_config()
    assert isinstance(cfg.scheduler, MultiBinConfig) and cfg.scheduler.bins == 3
    assert cfg.d_sla_token == pytest.approx(0.005) and cfg.kv_capacity_tokens == 4096
    (tmp_path / "e.yaml").write_text("scheduler: {name: multi_bin_dynamic, bins: 2, b_max: 7}\nd_sla_request: 9\n")
    kept = SimEngine(scheduler="multi_bin_dynamic", bins=5, config=tmp_path / "e.yaml").engine_config()
    assert isinstance(kept.scheduler, MultiBinConfig)
    assert kept.scheduler.bins == 5 and kept.scheduler.b_max == 7
    assert kept.d_sla_request == 20.0  # the option's default is laid over the file's, as before


def test_a_trace_replaces_the_commands_default_workload(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("Timestamp,Request tokens,Response tokens\n0,10,5\n")
    source, _ = simulated_load({"workload": {"workload": "synthetic-skewed", "trace": trace}})
    assert source.trace == trace and source.workload is None
    source, load = simulated_load({"workload": {"workload": "conversation", "seed": 3}, "load": {"rate": 2.0}})
    assert (source.workload, source.seed, source.rate, load.requests) == ("conversation", 3, 2.0, None)
    assert Workload.from_options({"workload": "conversation"}).workload == "conversation"


def test_the_sweep_plan_takes_the_levels_or_one_given_rate(tmp_path):
    plan = sweep_plan({"workload": {"workload": "synthetic-skewed"}}, tmp_path / "s")
    assert plan.levels == LEVELS and plan.base.scheduler.name == "multi_bin_dynamic"
    assert plan.arrivals(LEVELS["high"]) == (None, BURSTGPT_RATE * LEVELS["high"])
    assert plan.places() == {name: tmp_path / "s" / name for name in LEVELS}
    one = sweep_plan({"load": {"rate": 10.0}, "sweep": {"levels": "low"}}, tmp_path / "s")
    assert one.levels == {"custom": 1.0} and one.arrivals(1.0) == (None, 10.0)
    assert one.places() == {"custom": tmp_path / "s"}
    with pytest.raises(UserError, match="--rps-scale compresses a --trace's arrival times"):
        sweep_plan({"workload": {"rps_scale": 2.0}}, tmp_path / "s")
