"""`infermeter run --workers 2`: a LocalCluster on loopback sends the run, the coordinator merges one run directory.

The server is an emulator this test starts (outside the run's process group), so a Ctrl-C to the run's group stops
the run alone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import psutil
import pyarrow.parquet as pq
import pytest
import uvloop

from infermeter.config.run import RunConfig
from infermeter.emulator import EmulatorConfig
from infermeter.emulator.declaration import sut_declaration
from infermeter.emulator.process import emulator_process
from infermeter.errors import ExitCode
from infermeter.metrics import RecordColumns, summarize
from infermeter.records import LEDGER, RECORDS, read_run_info
from tests.load.runs import measured as run_measured
from tests.timing import Noise, measured

pytest.importorskip("distributed")

EMU = EmulatorConfig.model_validate({"engine": {"scheduler": {"name": "continuous", "max_num_seqs": 64}}})


def run(
    url: str, out: Path, workers: int | None, n: int = 120, rate: float | None = 30.0, concurrency: int | None = None
) -> RecordColumns:
    cfg = RunConfig.model_validate({
        "workload": {"input_tokens": 64, "output_tokens": 24, "seed": 3},
        "load": {"requests": n, "rate": rate, "concurrency": concurrency, "warmup": 0},
        "monitors": {"scrape_interval": 0, "telemetry_interval": 0},
        "scale": {"workers": workers},
        "emulator": EMU.model_dump(),
    }).resolved()  # fmt: skip
    result = uvloop.run(run_measured(cfg, out, url, sut_declaration(EMU)))
    assert result.stopped is None, (result.stopped, read_run_info(out).notes)
    return RecordColumns.of_run(out, read_run_info(out))


def test_two_workers_send_exactly_the_single_process_runs_requests(tmp_path):
    """Same ids, lengths and scheduled times (from the run's first send) as the single-process run; every request
    recorded once; TTFT and ITL P50 agree within noise; run.json names both workers, their shares and zero clock
    offsets (one host)."""
    attempt = iter(range(10))

    def measure() -> tuple[Path, RecordColumns, RecordColumns]:
        d = tmp_path / f"attempt-{next(attempt)}"
        with emulator_process(EMU, pin_cpus=True) as emu:
            return d, run(emu.url, d / "one", None), run(emu.url, d / "two", 2)

    def check(result: tuple[Path, RecordColumns, RecordColumns], noise: Noise) -> None:
        d, one, two = result
        a, b = np.argsort(one.request_id), np.argsort(two.request_id)
        assert np.array_equal(one.request_id[a], two.request_id[b])
        assert len(np.unique(two.request_id)) == 120
        assert np.array_equal(one.input_tokens[a], two.input_tokens[b])
        assert np.array_equal(one.max_tokens[a], two.max_tokens[b])
        s1, s2 = one.scheduled_at[a], two.scheduled_at[b]
        assert np.allclose(s1 - s1.min(), s2 - s2.min(), atol=1e-9)
        assert two.ok.all()
        r1, r2 = summarize(one, "B"), summarize(two, "B")
        for field in ("ttft_ms", "itl_ms"):
            p1, p2 = getattr(r1, field).percentile(50), getattr(r2, field).percentile(50)
            assert abs(p2 - p1) <= 0.25 * p1 + 1.0 + noise.allowance_s * 1000, (field, p1, p2, noise.describe())
        block = read_run_info(d / "two").distributed
        assert block is not None and len(block.workers) == 2
        assert [w.requests for w in block.workers] == [60, 60]
        assert all(w.outcome == "finished" and w.sent == w.recorded == 60 and w.not_sent == 0 for w in block.workers)
        assert all(w.clock is not None and w.clock.same_host and w.clock.offset_s == 0.0 for w in block.workers)
        assert read_run_info(d / "one").distributed is None

    measured(measure, check)


def test_a_closed_loop_divides_its_concurrency_between_the_workers(tmp_path):
    """Concurrency 3 on two workers: 2 + 1 slots, the 30 requests dealt in that proportion (20 + 10), each sent
    once; never more than 3 in flight across both workers."""
    with emulator_process(EMU) as emu:
        cols = run(emu.url, tmp_path / "closed", 2, n=30, rate=None, concurrency=3)
    assert sorted(cols.request_id.tolist()) == list(range(30)), cols.request_id
    assert cols.ok.all(), cols.error
    block = read_run_info(tmp_path / "closed").distributed
    assert block is not None
    shares = [(w.concurrency, w.requests, w.sent, w.outcome) for w in block.workers]
    assert shares == [(2, 20, 20, "finished"), (1, 10, 10, "finished")], shares
    start, end = cols.submitted_at, cols.tokens.values[cols.tokens.offsets[1:] - 1]  # every reply has tokens
    events = sorted([(t, 1) for t in start] + [(t, -1) for t in end], key=lambda e: (e[0], e[1]))
    in_flight = np.cumsum([e[1] for e in events])
    assert in_flight.max() <= 3, (in_flight.tolist(), events)
    assert start.min() >= block.start_at_clock  # no worker began before the shared start


def start_run(url: str, out: Path, n: int, rate: float) -> subprocess.Popen[bytes]:
    cmd = [
        sys.executable, "-m", "infermeter", "run", "--url", url, "--workers", "2", "--requests", str(n), "--rate",
        str(rate), "--input-tokens", "64", "--output-tokens", "400", "--warmup", "off", "--scrape-interval", "0",
        "--telemetry-interval", "0", "--out", str(out), "--no-progress",
    ]  # fmt: skip
    return subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def wait_for_sends(out: Path, count: int, proc: subprocess.Popen[bytes], limit_s: float = 90) -> None:
    """Until the run's ledger holds `count` sends (each entry 24 bytes)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and proc.poll() is None:
        ledger = out / LEDGER
        if ledger.is_file() and ledger.stat().st_size >= 24 * count:
            return
        time.sleep(0.1)
    raise AssertionError(f"the run sent fewer than {count} requests in {limit_s} s: {proc.communicate()[0][-2000:]!r}")


def workers_of(proc: subprocess.Popen[bytes]) -> list[psutil.Process]:
    return [
        p for p in psutil.Process(proc.pid).children(recursive=True) if "multiprocessing.spawn" in " ".join(p.cmdline())
    ]


def disrupted_run(out: Path, n: int, act: Callable[[subprocess.Popen[bytes], list[psutil.Process]], None]):  # type: ignore[no-untyped-def]
    """`run --workers 2` of n requests at 30 req/s against an emulator of its own; `act(run, workers)` once the run
    has sent 30 requests; returns the run's exit code and output, and its worker processes."""
    with emulator_process(EMU) as emu:
        proc = start_run(emu.url, out, n, 30.0)
        try:
            wait_for_sends(out, 30, proc)
            workers = workers_of(proc)
            assert len(workers) == 2
            act(proc, workers)
            text = proc.communicate(timeout=120)[0].decode()
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, text, workers


def test_a_worker_that_dies_leaves_its_unsent_requests_marked_not_sent(tmp_path):
    """One worker killed mid-run: the run ends with exit 3 and says so; its requests are each recorded (finished,
    or "cancelled: outcome not recorded" when in flight) or listed as not sent; the other worker finishes."""
    out = tmp_path / "run"
    code, text, _ = disrupted_run(out, 300, lambda proc, workers: workers[0].kill())
    assert code == ExitCode.INCOMPLETE, text[-2000:]
    assert "a worker died" in text
    info = read_run_info(out)
    block = info.distributed
    assert block is not None
    dead = [w for w in block.workers if w.outcome.startswith("died")]
    assert len(dead) == 1, [w.outcome for w in block.workers]
    assert any(w.outcome == "finished" and w.sent == 150 for w in block.workers)
    w = dead[0]
    assert 0 < w.sent < 150 and w.not_sent == 150 - w.sent and w.recorded == w.sent
    not_sent = [i for part in w.not_sent_ids.split(",") for i in range(*_bounds(part))]
    assert len(not_sent) == w.not_sent
    records = pq.read_table(out / RECORDS).to_pydict()
    assert len(records["request_id"]) == len(set(records["request_id"])) == sum(x.sent for x in block.workers)
    assert sorted(records["request_id"] + not_sent) == list(range(300))  # every request recorded or listed
    assert any(f"{w.not_sent} of its 150 requests were not sent" in note for note in info.notes)


def _bounds(part: str) -> tuple[int, int, int]:
    """An id_ranges part as range() arguments."""
    span, _, step = part.partition(":")
    lo, _, hi = span.partition("-")
    return int(lo), int(hi or lo) + 1, int(step or 1)


def test_ctrl_c_to_the_process_group_stops_every_worker_and_keeps_what_was_measured(tmp_path):
    """SIGINT to the whole group (a terminal's Ctrl-C): exit 130; both workers stopped, none died; every request
    sent has its record, in-flight ones finished; the rest are listed as not sent; no worker process is left."""
    out = tmp_path / "run"
    code, text, workers = disrupted_run(out, 400, lambda proc, workers: os.killpg(proc.pid, signal.SIGINT))
    assert code == ExitCode.INTERRUPTED, text[-2000:]
    info = read_run_info(out)
    assert info.stopped == "interrupted"
    block = info.distributed
    assert block is not None and [w.outcome for w in block.workers] == ["stopped", "stopped"]
    assert all(w.recorded == w.sent and w.sent + w.not_sent == w.requests for w in block.workers)
    records = pq.read_table(out / RECORDS).to_pydict()
    assert len(records["request_id"]) == sum(w.sent for w in block.workers)
    assert set(records["status"]) == {"ok"}  # in-flight requests were let finish
    time.sleep(1)
    assert not [p for p in workers if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert json.loads((out / "run.json").read_text())["distributed"]["workers"][0]["not_sent"] > 0
