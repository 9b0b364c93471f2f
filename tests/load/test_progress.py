"""The live progress display: drawn by a child process at the idle scheduling class, fed through a pipe the run
never waits on, and cleared when the run ends."""

import os
import pty
import re
import signal
import subprocess
import sys
import time
from collections import deque

import pytest

from infermeter.load import progress
from infermeter.load.driver import LiveStats
from infermeter.load.progress import LiveDisplay

DRAW = """
import asyncio
from collections import deque
from infermeter.load.driver import LiveStats
from infermeter.load.progress import LiveDisplay

async def main():
    stats = LiveStats(sent=7, done=5, failed=1, ttfts=deque([0.031]))
    worker = LiveStats(sent=3, done=2)
    async with LiveDisplay(stats, 10, True, "benchmark", {"10.0.0.2:8786": (worker, 4)}):
        await asyncio.sleep(1.5)
    print("after the display")

asyncio.run(main())
"""


def on_a_terminal(script: str, timeout_s: float = 60) -> tuple[int, bytes]:
    """Run a Python script with a pseudo-terminal as its stdout and stderr; its exit status and all it wrote."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=slave, stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    out = bytearray()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the terminal closed: every process writing to it has exited
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return proc.wait(timeout=10), bytes(out)


def test_the_view_draws_each_lines_figures_and_clears_them_before_the_run_prints():
    status, out = on_a_terminal(DRAW)
    assert status == 0, out
    text = re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]", b"", out).decode()
    assert "benchmark" in text and "5/10" in text and "sent 7  in flight 2  failed 1  TTFT p50 31 ms" in text
    assert "10.0.0.2:8786" in text and "2/4" in text  # the worker's own line
    before, _, after = out.partition(b"after the display")
    assert after.strip() == b"" and before.rstrip().endswith(b"\x1b[2K")  # the lines erased before the run printed


@pytest.fixture
def terminal(monkeypatch):
    """stderr taken for a terminal (pytest captures it)."""
    monkeypatch.setattr(progress, "on_terminal", lambda: True)


async def test_a_view_that_stops_reading_never_holds_the_run(monkeypatch, terminal):
    """A stopped view: the run's writes fail at once when the pipe is full (they never wait), and the run's end
    kills a view that does not exit within its allowance."""
    monkeypatch.setattr(progress, "EXIT_WAIT_S", 0.5)
    stats = LiveStats(sent=1, ttfts=deque([0.01]))
    display = LiveDisplay(stats, 1, True, "benchmark")
    async with display:
        view = display._view
        assert view is not None and view.stdin is not None and not os.get_blocking(view.stdin.fileno())
        os.kill(view.pid, signal.SIGSTOP)
        began = time.monotonic()
        for _ in range(2000):  # ~250 kB: four times what a pipe holds
            display._send(view)
        assert time.monotonic() - began < 10  # generous: a blocking write would never return
    assert view.poll() == -signal.SIGKILL


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="the idle scheduling class is Linux's")
async def test_the_view_runs_at_the_idle_scheduling_class(terminal):
    display = LiveDisplay(LiveStats(), 1, True, "benchmark")
    async with display:
        view = display._view
        assert view is not None
        deadline = time.monotonic() + 30
        while os.sched_getscheduler(view.pid) != os.SCHED_IDLE and time.monotonic() < deadline:
            time.sleep(0.01)  # the child lowers itself as it starts
        assert os.sched_getscheduler(view.pid) == os.SCHED_IDLE
    assert view.poll() == 0  # it exited by itself once the pipe closed


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2, reason="2 CPUs")
async def test_a_view_keeps_off_the_cpus_the_run_was_confined_to(terminal):
    mine = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(mine)})  # as `taskset -c 0 infermeter run` would
    try:
        display = LiveDisplay(LiveStats(), 1, True, "benchmark")
        async with display:
            view = display._view
            assert view is not None
            others = mine - {min(mine)}  # the CPUs this process may use, but the one the run was confined to
            deadline = time.monotonic() + 30
            while os.sched_getaffinity(view.pid) != others and time.monotonic() < deadline:
                time.sleep(0.01)
            assert os.sched_getaffinity(view.pid) == others
    finally:
        os.sched_setaffinity(0, mine)


async def test_a_view_that_cannot_start_leaves_the_run_without_a_display(monkeypatch, terminal):
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    display = LiveDisplay(LiveStats(), 1, True, "benchmark")
    async with display:
        assert display._view is None


async def test_no_view_when_stderr_is_not_a_terminal():
    """Piped or redirected, a transient display draws nothing: no process is started for it."""
    display = LiveDisplay(LiveStats(), 1, True, "benchmark")
    async with display:
        assert not progress.on_terminal() and display._view is None
