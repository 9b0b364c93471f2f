"""The fault suite, part 2: the server killed mid-run, the client receiving SIGINT, SIGTERM and SIGKILL, and the run
directory's disk filling up.  Each shows: every request sent has exactly one record with a status and a reason;
the run stops cleanly with the exit code README documents; what was recorded is readable by `infermeter report`.
"""

import os
import re
import resource
import signal
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

from infermeter.emulator import EmulatorConfig, emulator_process
from infermeter.errors import ExitCode
from infermeter.metrics import RecordColumns
from infermeter.records import JOURNAL, NOT_RECORDED, RECORDS, is_sealed, read_run_info
from tests.cli import report_json

INPUT = 16  # prompt tokens per request: the emulator's prompt-token counter / INPUT = requests it received
LIMIT = 256 * 1024  # bytes per file: the journal takes its first flushes (16 records each), not the whole run


def start_run(url: str, out, *extra: str, preexec=None) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "infermeter", "run", "--no-progress", "--url", url, "--warmup", "off"]
    cmd += ["--input-tokens", str(INPUT), "--out", str(out), *extra]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=preexec)


def metric(url: str, name: str) -> float:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        m = re.search(rf"^{re.escape(name)}{{[^}}]*}} ([0-9.e+-]+)$", r.read().decode(), re.M)
    return float(m.group(1)) if m else 0.0


def wait_for(url: str, name: str, at_least: float, proc: subprocess.Popen[str], timeout_s: float = 60) -> None:
    """Poll the emulator's /metrics until `name` reaches `at_least` (bounded in time; fails if the run ended)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if metric(url, name) >= at_least:
            return
        assert proc.poll() is None, f"the run ended early: {proc.communicate()[1][-2000:]}"
        time.sleep(0.05)
    raise AssertionError(f"{name} never reached {at_least}")


def journaled(out, proc: subprocess.Popen[str], timeout_s: float = 60) -> None:
    """Wait until the live run's journal holds a finished record (it flushes 16 after a send, or all waiting once 2 s
    have passed; bounded in time)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (out / JOURNAL).is_file() and RecordColumns.of_run(out).ok.any():
            return
        assert proc.poll() is None, f"the run ended early: {proc.communicate()[1][-2000:]}"
        time.sleep(0.1)
    raise AssertionError("the journal never held a finished record")


def one_record_per_request(out) -> RecordColumns:
    cols = RecordColumns.of_run(out)
    assert len(set(cols.request_id.tolist())) == cols.n, "a request recorded twice"
    assert sorted(cols.request_id.tolist()) == list(range(cols.n)), "a gap: a request sent without a record"
    assert all(e for s, e in zip(cols.status, cols.error, strict=True) if s != "ok"), "a failure without a reason"
    return cols


def test_server_killed_mid_run(tmp_path):
    """SIGKILL to the server: the streams in flight break, later sends are refused, and the run goes on to its end."""
    out = tmp_path / "run"
    with emulator_process(EmulatorConfig(speed=4)) as emu:
        proc = start_run(emu.url, out, "--rate", "20", "--arrival", "constant", "-n", "60", "--output-tokens", "64")
        wait_for(emu.url, "vllm:request_success_total", 10, proc)
        emu.process.kill()
        _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == ExitCode.OK, stderr
    cols = one_record_per_request(out)
    assert cols.n == 60 and cols.ok.sum() >= 10
    reasons = report_json(out)["requests"]["failures_by_reason"]
    assert reasons.get("cannot connect", 0) > 0, reasons  # sends after the kill
    assert set(reasons) <= {"cannot connect", "connection lost mid-stream", "connection closed before the response"}
    assert (
        "Failures ("
        in subprocess.run(
            [sys.executable, "-m", "infermeter", "report", str(out)], capture_output=True, text=True, check=True
        ).stdout
    )


@pytest.mark.parametrize(
    "signals, code, in_flight",
    [
        ([signal.SIGINT], ExitCode.INTERRUPTED, "finish"),
        ([signal.SIGINT, signal.SIGINT], ExitCode.INTERRUPTED, "cancelled"),
        ([signal.SIGTERM], ExitCode.TERMINATED, "cancelled"),
    ],
    ids=["sigint", "sigint-twice", "sigterm"],
)
def test_the_client_stopped_by_a_signal_keeps_and_reports_everything(tmp_path, signals, code, in_flight):
    """Ctrl-C lets in-flight requests finish (a second one cancels them); SIGTERM cancels them at once.  Either way
    the run is sealed, reported, and exits 130 or 143."""
    out = tmp_path / "run"
    with emulator_process(EmulatorConfig()) as emu:
        proc = start_run(emu.url, out, "--rate", "5", "-n", "200", "--output-tokens", "300")
        wait_for(emu.url, "vllm:request_success_total", 2, proc)
        for sig in signals:
            proc.send_signal(sig)
            time.sleep(0.3)
        stdout, stderr = proc.communicate(timeout=90)
        received = metric(emu.url, "vllm:prompt_tokens_total") / INPUT
    assert proc.returncode == code, stderr
    assert "=== LLM Benchmark Report (Minimum) ===" in stdout and "Traceback" not in stderr
    assert len(stderr.strip().splitlines()) == 1 and f"what was measured is in {out}" in stderr
    assert is_sealed(out)
    cols = one_record_per_request(out)
    assert 3 <= cols.n < 200 and cols.n >= received  # sending stopped; everything sent was recorded
    statuses = set(cols.status.tolist())
    if in_flight == "finish":
        assert statuses == {"ok"}
    else:
        assert "cancelled" in statuses and statuses <= {"ok", "cancelled"}
    info = read_run_info(out)
    assert info.stopped == ("terminated" if signals == [signal.SIGTERM] else "interrupted")
    assert any("stopped by" in n for n in info.notes)
    assert report_json(out)["requests"]["total"] == cols.n


def test_the_client_killed_loses_no_request(tmp_path):
    """SIGKILL cannot be caught: the run never closes.  Its journal and send ledger still account for every request
    it sent: finished ones as recorded, the rest as 'cancelled: outcome not recorded'."""
    out = tmp_path / "run"
    with emulator_process(EmulatorConfig(speed=2, prefix_caching=False)) as emu:
        proc = start_run(emu.url, out, "--rate", "10", "-n", "200", "--output-tokens", "60")
        journaled(out, proc)  # past the journal's first flush: some records are on disk, others only in memory
        proc.kill()
        proc.communicate(timeout=30)
        time.sleep(0.3)
        received = int(metric(emu.url, "vllm:prompt_tokens_total") / INPUT)
        finished = int(metric(emu.url, "vllm:request_success_total"))
    assert proc.returncode == -signal.SIGKILL
    assert not is_sealed(out) and (out / JOURNAL).is_file() and not (out / RECORDS).exists()
    cols = one_record_per_request(out)
    # every request the server saw is accounted for; a reply is recorded ok only if the server finished it
    assert cols.n >= received >= finished >= cols.ok.sum() >= 1
    lost = np.array([e.startswith(NOT_RECORDED) for e in cols.error])
    assert cols.ok.sum() + lost.sum() == cols.n, set(cols.error.tolist())
    assert (cols.output_tokens[cols.ok] == 60).all()
    summary = report_json(out)
    assert summary["requests"]["total"] == cols.n
    assert summary["requests"]["failures_by_reason"] == ({NOT_RECORDED: int(lost.sum())} if lost.any() else {})
    p = subprocess.run([sys.executable, "-m", "infermeter", "report", str(out)], capture_output=True, text=True)
    assert p.returncode == 0 and "this run never closed" in p.stdout, p.stderr


def test_the_run_directory_filling_up_stops_the_run_cleanly(tmp_path):
    """A file-size limit (RLIMIT_FSIZE) makes the journal's writes fail as a full disk would: the run stops
    sending, exits 3 with one line saying why, and everything journaled before is readable."""
    out = tmp_path / "run"

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, resource.RLIM_INFINITY))

    with emulator_process(EmulatorConfig(speed=4)) as emu:
        proc = start_run(
            emu.url, out, "--rate", "40", "-n", "2000", "--output-tokens", "64", "--telemetry-interval", "0",
            preexec=limit,
        )  # fmt: skip
        stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == ExitCode.INCOMPLETE, stderr
    assert len(stderr.strip().splitlines()) == 1 and "Traceback" not in stderr
    assert "disk is full" in stderr and f"infermeter report {out}" in stderr
    assert "=== LLM Benchmark Report (Minimum) ===" in stdout  # the report of everything measured, disk or not
    assert (out / JOURNAL).stat().st_size <= LIMIT
    cols = one_record_per_request(out)
    assert cols.ok.sum() > 0 and cols.n < 2000
    assert report_json(out)["requests"]["ok"] == cols.ok.sum()


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="needs Linux")
def test_sigterm_to_a_run_against_the_embedded_emulator_stops_both(tmp_path):
    """Without --url the CLI owns an emulator process: SIGTERM must not leave it running."""
    import psutil

    proc = subprocess.Popen(
        [sys.executable, "-m", "infermeter", "run", "--no-progress", "--warmup", "off", "-n", "300",
         "--out", str(tmp_path / "run")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    me = psutil.Process(proc.pid)
    deadline = time.monotonic() + 60
    while not (tmp_path / "run" / JOURNAL).exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    children = me.children(recursive=True)
    assert children, "the embedded emulator was not started"
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == ExitCode.TERMINATED, stderr
    _, alive = psutil.wait_procs(children, timeout=15)
    assert not alive, f"left running: {alive}"


def test_the_clients_own_descriptor_limit_is_named_as_such(tmp_path):
    """Out of file descriptors on the load generator's host is not the server's failure: it is counted apart, and
    the run still records every request and closes its directory."""
    out = tmp_path / "run"

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (48, 48))  # the hard limit too: the run cannot lift it

    with emulator_process(EmulatorConfig(faults=[{"kind": "stall_before_first_token", "stall_s": 1.0}])) as emu:
        proc = start_run(emu.url, out, "--concurrency", "60", "-n", "120", "--output-tokens", "4", preexec=limit)
        _, stderr = proc.communicate(timeout=120)
    assert proc.returncode in (ExitCode.OK, ExitCode.NO_SUCCESS), stderr
    assert is_sealed(out)
    cols = one_record_per_request(out)
    reasons = report_json(out)["requests"]["failures_by_reason"]
    assert cols.n == 120 and reasons.get("client out of file descriptors", 0) > 0, reasons


def test_a_simulation_whose_run_directory_fills_up_says_so_in_one_line(tmp_path):
    """The simulator streams its records into the journal as it runs: a write that fails is the same one-line
    error as a live run's, not an internal error."""
    out = tmp_path / "sim"

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, resource.RLIM_INFINITY))

    proc = subprocess.run(
        [sys.executable, "-m", "infermeter", "sim", "--requests", "3000", "--rate", "20", "--out", str(out)],
        capture_output=True, text=True, timeout=300, preexec_fn=limit, check=False,
    )  # fmt: skip
    assert proc.returncode != 0 and "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith(f"error: --out {out}: "), proc.stderr
    assert "disk is full" in proc.stderr or "file-size limit" in proc.stderr, proc.stderr
