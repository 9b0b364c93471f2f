"""`benchmark` and `benchmark_async` end to end: the issue's one-liner prints exactly the count, the API prints
nothing unless asked, exports run at the end with their problems as warnings, and the coroutine runs on the
caller's loop."""

import asyncio
import subprocess
import sys

import pytest

import infermeter
from infermeter.emulator import EmulatorConfig, running_emulator
from infermeter.exports.spec import ExportSpec
from infermeter.records import SUMMARY


@pytest.fixture(scope="module")
def server():
    with running_emulator(EmulatorConfig(speed=4)) as url:
        yield url


LOAD = {"requests": 12, "rate": 40, "warmup": "off", "input_tokens": 32, "output_tokens": 8}


def test_the_issues_one_liner_prints_exactly_the_count(tmp_path):
    code = (
        "import infermeter; r = infermeter.benchmark(requests=40, rate=10, warmup='off', out='a'); "
        "print(infermeter.open_run('a').summary.requests.ok)"
    )
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "40\n"
    assert "starting the embedded emulator" not in p.stderr  # no progress asked for: not even that is said


def test_benchmark_prints_nothing_and_exports_at_the_end(server, tmp_path, monkeypatch, capsys):
    sent = []

    def check_exports(specs):
        sent.append(("check", list(specs)))

    def export_run(specs, run_dir):
        sent.append(("run", list(specs), run_dir, (run_dir / SUMMARY).is_file()))
        return ["--export otlp:http://127.0.0.1:9 failed: connection refused"]

    monkeypatch.setattr("infermeter.exports.send.check_exports", check_exports)
    monkeypatch.setattr("infermeter.exports.send.export_run", export_run)
    out = tmp_path / "run"
    with pytest.warns(RuntimeWarning, match="--export otlp:http://127.0.0.1:9 failed: connection refused"):
        run = infermeter.benchmark(url=server, out=out, export=["otlp:http://127.0.0.1:9"], **LOAD)
    spec = ExportSpec("otlp", "http://127.0.0.1:9")
    assert sent == [("check", [spec]), ("run", [spec], out, True)]  # checked first, sent once the run was written
    assert run.path == out and run.summary.requests.ok == 12 and run.info.kind == "live"
    assert capsys.readouterr() == ("", "")


def test_report_true_prints_the_minimum_report(server, tmp_path, capsys):
    infermeter.benchmark(url=server, out=tmp_path / "run", report=True, **LOAD)
    printed = capsys.readouterr().out
    assert "=== LLM Benchmark Report (Minimum) ===" in printed and f"run directory: {tmp_path / 'run'}" in printed


def test_a_run_config_with_options_over_it(server, tmp_path):
    config = infermeter.RunConfig.model_validate({"target": {"url": server}, "load": {"concurrency": 2}})
    run = infermeter.benchmark(config, out=tmp_path / "run", **LOAD)  # LOAD's rate replaces the concurrency
    assert run.info.load.concurrency is None and run.info.config["load"]["rate"] == 40
    assert run.summary.requests.total == 12


def test_the_coroutine_runs_on_the_callers_loop(server, tmp_path, monkeypatch):
    from infermeter.conduct import run as conduct_module

    conduct, loops = conduct_module.conduct, []

    async def recorded(*args, **kwargs):
        loops.append(asyncio.get_running_loop())
        return await conduct(*args, **kwargs)

    monkeypatch.setattr(conduct_module, "conduct", recorded)

    async def main():
        ticks = 0

        async def tick():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.005)
                ticks += 1

        ticker = asyncio.create_task(tick())
        with pytest.raises(infermeter.UserError, match=r"use `await infermeter.benchmark_async\(...\)` instead"):
            infermeter.benchmark(url=server, **LOAD)
        run = await infermeter.benchmark_async(url=server, out=tmp_path / "run", **LOAD)
        ticker.cancel()
        return run, ticks, asyncio.get_running_loop()

    run, ticks, loop = asyncio.run(main())
    assert run.summary.requests.ok == 12
    assert loops == [loop]  # the load was sent from the caller's loop, not one of its own
    assert ticks > 0  # and the caller's own task went on meanwhile
