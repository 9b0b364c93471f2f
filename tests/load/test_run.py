"""`infermeter run` end to end against the emulator: open and closed loop, warm-up, bounds, Ctrl-C."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import orjson
import pytest

from infermeter.emulator import EmulatorConfig, running_emulator
from infermeter.metrics import RecordColumns
from infermeter.records import read_records, read_run_info
from tests.cli import infermeter


@pytest.fixture(scope="module")
def fast_emulator():
    with running_emulator(EmulatorConfig(speed=4)) as url:
        yield url


def run_cli(*args, timeout=240):
    return infermeter("run", "--no-progress", *args, timeout=timeout)


def test_open_loop_run_with_the_drafts_warmup(fast_emulator, tmp_path):
    out = tmp_path / "run"
    p = run_cli("--url", fast_emulator, "--rate", "50", "--requests", "60", "--slo", "ttft=200ms", "--out", str(out))
    assert p.returncode == 0, p.stderr
    assert "=== LLM Benchmark Report (Minimum) ===" in p.stdout and f"run directory: {out}" in p.stdout
    info = read_run_info(out)
    warm = info.warmup
    # draft 4.5.1: at least 100 requests and 10,000 output tokens, queue drained, probes until stable
    assert warm["done"] and warm["requests"] >= 100 and warm["output_tokens"] >= 10_000 and warm["queue_drained"]
    assert warm["probe_before_s"] > 0 and len(warm["probes_after_s"]) >= 3
    assert info.itl_option == "C" and info.workload["name"] == "synthetic-uniform" and info.workload["seed"] == 42
    cols = RecordColumns.from_table(read_records(out))
    assert cols.n == 60 and cols.ok.all()  # the warm-up is not in the records
    lag = cols.submitted_at - cols.scheduled_at
    assert np.all(lag >= 0) and np.percentile(lag, 99) < 0.02
    summary = orjson.loads((out / "summary.json").read_bytes())
    assert summary["goodput"]["slo"] == {"ttft": 200.0}


def test_closed_loop_keeps_concurrency_and_barrier(fast_emulator, tmp_path):
    out = tmp_path / "run"
    p = run_cli(
        "--url",
        fast_emulator,
        "--concurrency",
        "4",
        "--barrier",
        "--requests",
        "24",
        "--warmup",
        "off",
        "--input-tokens",
        "64",
        "--output-tokens",
        "32",
        "--out",
        str(out),
    )
    assert p.returncode == 0, p.stderr
    cols = RecordColumns.from_table(read_records(out))
    assert cols.n == 24 and cols.ok.all()
    ends = cols.tokens.last()
    # never more than 4 requests in flight at once
    events = sorted([(t, 1) for t in cols.scheduled_at] + [(t, -1) for t in ends])
    assert max(np.cumsum([d for _, d in events])) <= 4
    first4 = np.sort(cols.scheduled_at)[:4]
    assert first4.max() - first4.min() < 0.005  # released together
    assert not read_run_info(out).warmup["done"]


def test_duration_bounds_an_open_loop_run(fast_emulator, tmp_path):
    out = tmp_path / "run"
    p = run_cli(
        "--url",
        fast_emulator,
        "--rate",
        "20",
        "--arrival",
        "constant",
        "--duration",
        "1.0",
        "--warmup",
        "off",
        "--input-tokens",
        "16",
        "--output-tokens",
        "8",
        "--out",
        str(out),
    )
    assert p.returncode == 0, p.stderr
    n = read_records(out).num_rows
    assert 19 <= n <= 22  # sends at 0, 0.05, ..., 1.0 s


def test_bad_load_options_are_one_line_errors(tmp_path):
    p = run_cli("--url", "http://127.0.0.1:9", "--out", str(tmp_path / "x"))
    assert p.returncode == 2 and "give a load" in p.stderr and "Traceback" not in p.stderr
    p = run_cli("--url", "http://127.0.0.1:9", "--rate", "1", "--concurrency", "2")
    assert p.returncode == 2 and "not both" in p.stderr
    p = run_cli("--url", "http://127.0.0.1:9", "--rate", "1", "--warmup", "off", "--out", str(tmp_path / "y"))
    assert p.returncode == 2 and "could not list models" in p.stderr


@pytest.mark.parametrize("presses", [1, 2])
def test_ctrl_c_stops_sending_and_keeps_what_was_measured(tmp_path, presses):
    out = tmp_path / "run"
    with running_emulator(EmulatorConfig()) as url:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "infermeter",
                "run",
                "--no-progress",
                "--url",
                url,
                "--rate",
                "5",
                "--requests",
                "200",
                "--warmup",
                "off",
                "--input-tokens",
                "32",
                "--output-tokens",
                "300",
                "--out",
                str(out),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(4.0)
        for _ in range(presses):
            proc.send_signal(signal.SIGINT)
            time.sleep(0.5)
        stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert "=== LLM Benchmark Report (Minimum) ===" in stdout
    cols = RecordColumns.from_table(read_records(out))
    assert 10 <= cols.n < 200  # sending stopped; everything sent was recorded
    statuses = set(cols.status.tolist())
    if presses == 1:
        assert statuses == {"ok"}  # in-flight requests were allowed to finish
    else:
        assert "cancelled" in statuses
    assert any("Ctrl-C" in n for n in read_run_info(out).notes)
    assert os.path.exists(out / "summary.json")
