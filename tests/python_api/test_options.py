"""The API's keyword options: the same names, checks and defaults as the command's options, and a configuration
laid under them as a scenario file is."""

from pathlib import Path

import pytest

from infermeter import RunConfig, UserError, benchmark, simulate, test
from infermeter.config.sections import Load, Target
from infermeter.python_api.benchmarking import RUN_FIELDS, run_configuration
from infermeter.python_api.options import given_from
from infermeter.python_api.simulation import SIM_FIELDS


def test_options_become_the_commands_given_with_its_checks_applied():
    given = given_from(
        {"rate": "10", "warmup": "off", "requests": 40, "url": None}, RUN_FIELDS, "benchmark", "infermeter run"
    )
    assert given == {"load": {"rate": 10.0, "warmup": 0, "requests": 40}}  # url=None: not given, as on the command line


def test_a_commands_own_defaults_apply_when_not_given():
    given = given_from({"rate": 5}, SIM_FIELDS, "simulate", "infermeter sim")
    assert given["workload"] == {"workload": "synthetic-skewed"} and given["load"] == {"requests": 1000, "rate": 5.0}


def test_a_repeatable_option_takes_one_value_or_a_list():
    one = given_from({"header": "X-Tenant: a"}, RUN_FIELDS, "benchmark", "infermeter run")
    two = given_from({"header": ["X-Tenant: a", "X-Team:b"]}, RUN_FIELDS, "benchmark", "infermeter run")
    assert one["target"]["header"] == ["X-Tenant: a"] and two["target"]["header"] == ["X-Tenant: a", "X-Team: b"]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: benchmark(rat=10), "benchmark() has no option 'rat': did you mean rate"),
        (lambda: benchmark(warmup="sometimes"), "warmup='sometimes': "),
        (lambda: benchmark(barrier="maybe"), "barrier='maybe': Input should be a valid boolean"),
        (lambda: benchmark(rate=5, concurrency=2), "give either --rate (open loop) or --concurrency"),
        (lambda: benchmark(out=""), "out='': is empty"),
        (lambda: benchmark(scheduler="fifo"), "scheduler='fifo': "),
        (lambda: benchmark(export="carrier-pigeon"), "export='carrier-pigeon': 'carrier-pigeon': unknown exporter"),
        (lambda: simulate(token_times="some"), "token_times='some': "),
        (lambda: simulate(concurrency=4), "simulate() has no option 'concurrency': its options are `infermeter sim"),
        (lambda: test("ttft", repeat=3), "call it once per repeat with out=OUT/repeat-1"),
        (lambda: test("no-such-test"), "no test suite named 'no-such-test'"),
        (lambda: test("ttft", rate=0), "rate=0: "),
    ],
)
def test_bad_input_is_one_user_error_before_anything_is_written(call, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError) as caught:
        call()
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_options_lay_over_a_run_config_key_by_key():
    base = RunConfig(target=Target(url="http://127.0.0.1:1"), load=Load(concurrency=4, requests=50))
    cfg = run_configuration(base, {"load": {"rate": 10.0}})
    # --rate answers the question --concurrency answered: the configuration's concurrency goes, its requests stay
    assert (cfg.load.rate, cfg.load.concurrency, cfg.load.requests) == (10.0, None, 50)
    assert cfg.target.url == "http://127.0.0.1:1"


def test_a_url_given_drops_the_emulator_a_run_config_described():
    base = RunConfig(load=Load(rate=5)).resolved()
    assert base.emulator is not None
    cfg = run_configuration(base, {"target": {"url": "http://127.0.0.1:1"}})
    assert cfg.emulator is None and cfg.target.url == "http://127.0.0.1:1"
    kept = run_configuration(base, {"load": {"requests": 7}})
    assert kept.emulator == base.emulator and kept.load.requests == 7


def test_a_scenario_file_is_read_as_the_commands_config(tmp_path: Path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text("load: {rate: 3, requests: 9}\nworkload: {workload: conversation}\n")
    cfg = run_configuration(scenario, {"load": {"requests": 12}})
    assert (cfg.load.rate, cfg.load.requests, cfg.workload.workload) == (3.0, 12, "conversation")


def test_messages_name_the_functions_parameters_not_the_commands_flags(tmp_path, monkeypatch, capsys):
    """The same check speaks to each caller in its own terms: `out='live'` from Python, `--out live` on the command
    line."""
    from infermeter.records import RUN_JSON
    from tests.cli import exit_code

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("INFERMETER_TEST_NO_SUCH_KEY", raising=False)
    (tmp_path / "live").mkdir()
    (tmp_path / "live" / RUN_JSON).write_text("{}")
    calls = [
        (lambda: benchmark(out="live", requests=5, rate=5), "out='live' already holds a run"),
        (lambda: simulate(out=Path("live"), requests=5), "out='live' already holds a run"),
        (lambda: test("ttft", quick=True, out="live", requests=5, rate=5), "out='live' holds a single run"),
        (
            lambda: benchmark(api_key_env="INFERMETER_TEST_NO_SUCH_KEY", requests=5, rate=5),
            "api_key_env='INFERMETER_TEST_NO_SUCH_KEY': the environment variable",
        ),
    ]
    for call, message in calls:
        with pytest.raises(UserError) as caught:
            call()
        assert message in str(caught.value) and "--" not in str(caught.value), str(caught.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["live"]  # nothing written
    assert exit_code(["sim", "--requests", "5", "--out", "live"]) == 2
    assert "--out live already holds a run" in capsys.readouterr().err
