"""`--export` on `run`, `sim` and `test NAME` (and `export=` on `test`): every exporter checked before anything runs
(on the command line as the option's value: a failure there is a usage error naming --export, and nothing is
written), the results sent once the run or suite is written (each repeat's directory with --repeat), and an
exporter's failure a warning that leaves the exit code alone."""

import pytest

import infermeter
from infermeter.emulator import EmulatorConfig, running_emulator
from infermeter.errors import UserError
from infermeter.exports.spec import ExportSpec
from infermeter.python_api.exporting import send_run
from infermeter.records import SUMMARY
from infermeter.suite_result import SUITE_JSON
from tests.cli import exit_code

PROM = "prometheus:/nowhere/infermeter.prom"
SPEC = ExportSpec("prometheus", "/nowhere/infermeter.prom")
FAILED = "--export prometheus:/nowhere/infermeter.prom failed: /nowhere does not exist"


@pytest.fixture(scope="module")
def server():
    with running_emulator(EmulatorConfig(speed=4)) as url:
        yield url


@pytest.fixture
def sent(monkeypatch):
    """What the exporters were asked, in order: each check, and each run or suite sent (with whether its directory
    was complete at that moment); every send fails with FAILED."""
    calls = []

    def check_exports(specs):
        calls.append(("check", list(specs)))

    def export_run(specs, run_dir):
        calls.append(("run", list(specs), run_dir, (run_dir / SUMMARY).is_file()))
        return [FAILED]

    def export_suite(specs, suite_dir):
        calls.append(("suite", list(specs), suite_dir, (suite_dir / SUITE_JSON).is_file()))
        return [FAILED]

    for name, fake in (("check_exports", check_exports), ("export_run", export_run), ("export_suite", export_suite)):
        monkeypatch.setattr(f"infermeter.exports.send.{name}", fake)
    return calls


@pytest.mark.parametrize(
    "command",
    [
        ["sim", "--requests", "10"],
        ["run", "--url", "http://127.0.0.1:9", "--rate", "5", "--requests", "5", "--no-progress"],
        ["test", "ttft", "--quick", "--no-progress"],
    ],
)
def test_an_exporter_that_cannot_work_stops_the_command_before_anything_runs(command, tmp_path, monkeypatch, capsys):
    def check_exports(specs):
        raise UserError(f"--export {specs[0]}: MLflow is not installed: pip install 'infermeter[mlflow]'")

    monkeypatch.setattr("infermeter.exports.send.check_exports", check_exports)
    out = tmp_path / "out"
    assert exit_code([*command, "--out", str(out), "--export", "mlflow"]) == 2
    assert "error: Invalid value for '--export': --export mlflow: MLflow is not installed" in capsys.readouterr().err
    assert not out.exists()


def test_sim_sends_its_run_directory_once_written(sent, tmp_path, capsys):
    out = tmp_path / "sim"
    assert exit_code(["sim", "--requests", "50", "--rate", "5", "--out", str(out), "--export", PROM]) == 0
    assert sent == [("check", [SPEC]), ("run", [SPEC], out, True)]
    captured = capsys.readouterr()
    assert f"warning: {FAILED}" in captured.err and f"run directory: {out}" in captured.out


def test_run_sends_its_run_directory_once_written(sent, server, tmp_path, capsys):
    out = tmp_path / "run"
    args = ["run", "--url", server, "--rate", "40", "--requests", "10", "--warmup", "off", "--no-progress"]
    assert exit_code([*args, "--out", str(out), "--export", PROM, "--export", "mlflow"]) == 0
    both = [SPEC, ExportSpec("mlflow")]
    assert sent == [("check", [SPEC]), ("check", [ExportSpec("mlflow")]), ("run", both, out, True)]  # each as parsed
    assert f"warning: {FAILED}" in capsys.readouterr().err


def test_each_repeat_of_a_suite_is_sent_once_it_is_written(sent, server, tmp_path, capsys):
    out = tmp_path / "suite"
    args = ["test", "ttft", "--quick", "--url", server, "--requests", "10", "--rate", "40", "--warmup", "off"]
    assert exit_code([*args, "--repeat", "2", "--no-progress", "--out", str(out), "--export", PROM]) == 0
    assert sent == [
        ("check", [SPEC]),
        ("suite", [SPEC], out / "repeat-1", True),
        ("suite", [SPEC], out / "repeat-2", True),
    ]
    assert capsys.readouterr().err.count(f"warning: {FAILED}") == 2


def test_the_api_sends_a_suite_and_warns(sent, server, tmp_path):
    out = tmp_path / "suite"
    with pytest.warns(RuntimeWarning, match="failed: /nowhere does not exist"):
        result = infermeter.test(
            "ttft", quick=True, url=server, requests=10, rate=40, warmup="off", out=out, export=PROM
        )
    assert sent == [("check", [SPEC]), ("suite", [SPEC], out, True)]
    assert result.suite == "ttft" and result.command.startswith("infermeter.test('ttft', quick=True, out=")


def test_a_run_stopped_early_is_not_sent(sent, tmp_path):
    lines = send_run([SPEC], tmp_path, stopped="interrupted")
    assert lines == ["the results were not exported: the run stopped early (interrupted)"] and sent == []
    assert send_run([], tmp_path) == []  # nothing asked: nothing said
