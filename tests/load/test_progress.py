"""The live progress display: drawn by a child process at the idle scheduling class, fed through a pipe the run
never waits on, and cleared when the run ends."""

import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from collections import deque

import orjson
import pytest

from infermeter.load import progress
from infermeter.load.driver import LiveStats
from infermeter.load.progress import MESSAGE_MAX, SHOW_CURSOR, LiveDisplay

DRAW = """
import asyncio, sys
from collections import deque
from infermeter.load import progress
from infermeter.load.driver import LiveStats
from infermeter.load.progress import LiveDisplay

progress.EXIT_WAIT_S = 60  # a starved view on a busy machine still clears itself

async def main():
    stats = LiveStats(sent=7, done=5, failed=1, ttfts=deque([0.031]))
    worker = LiveStats(sent=3, done=2)
    async with LiveDisplay(stats, 10, True, "benchmark", {"10.0.0.2:8786": (worker, 4)}) as display:
        await asyncio.sleep(0.6)
        print("a note from the run", file=sys.stderr)
        await asyncio.sleep(0.6)
        view = display._view
    print("after the display", view.returncode)

asyncio.run(main())
"""


def on_a_terminal(script: str, timeout_s: float = 120) -> tuple[int, bytes]:
    """Run a Python script with a pseudo-terminal as its stdout and stderr; its exit status and all it wrote."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=slave, stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    out = bytearray()
    deadline = time.monotonic() + timeout_s
    try:
        while (left := deadline - time.monotonic()) > 0:
            if not select.select([master], [], [], left)[0]:
                break
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the terminal closed: every process writing to it has exited
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    return proc.wait(timeout=10), bytes(out)


def test_the_view_draws_each_lines_figures_prints_the_runs_text_and_clears_before_the_run_goes_on():
    status, out = on_a_terminal(DRAW)
    assert status == 0, out
    text = re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]", b"", out).decode()
    assert "benchmark" in text and "5/10" in text and "sent 7  in flight 2  failed 1  TTFT p50 31 ms" in text
    assert "10.0.0.2:8786" in text and "2/4" in text  # the worker's own line
    assert text.count("a note from the run") == 1
    assert b"\x1b[2Ka note from the run\r\n" in out  # by the view: its lines erased, the note, its lines again
    before, _, after = out.partition(b"after the display 0")  # the view ended by itself
    assert after.strip() == b""
    assert before.rstrip().endswith(b"\x1b[2K") and SHOW_CURSOR in before  # lines erased, cursor back


@pytest.fixture
def terminal(monkeypatch):
    """stderr taken for a terminal (pytest captures it)."""
    monkeypatch.setattr(progress, "on_terminal", lambda: True)


async def test_a_view_that_stops_reading_never_holds_the_run(monkeypatch, terminal, capfd):
    """A stopped view: the run's writes fail at once when the pipe is full (they never wait), and the run's end
    kills a view that does not exit, then shows the cursor the view had hidden."""
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
        assert not display.post("a line\n")  # the pipe is full: the caller writes it itself
    assert view.returncode == -signal.SIGKILL
    assert capfd.readouterr().err.endswith(SHOW_CURSOR.decode())
    display._send(view)  # a dead view's pipe: nothing raised


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="the idle scheduling class is Linux's")
async def test_the_view_runs_at_the_idle_class_in_a_session_of_its_own(monkeypatch, terminal):
    monkeypatch.setattr(progress, "EXIT_WAIT_S", 60)
    display = LiveDisplay(LiveStats(), 1, True, "benchmark")
    async with display:
        view = display._view
        assert view is not None
        assert os.sched_getscheduler(view.pid) == os.SCHED_IDLE
        assert os.getsid(view.pid) == view.pid != os.getsid(0)  # Ctrl-C at the terminal is the run's alone
    assert view.returncode == 0  # it exited by itself once the pipe closed


def _others_after_confining() -> set[int]:
    try:
        return os.sched_getaffinity(1) - {min(os.sched_getaffinity(0))}
    except OSError:
        return set()


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or not _others_after_confining(), reason="2 CPUs, Linux")
async def test_a_view_keeps_off_the_cpus_the_run_was_confined_to(terminal):
    mine = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(mine)})  # as `taskset -c 0 infermeter run` would
    try:
        display = LiveDisplay(LiveStats(), 1, True, "benchmark")
        async with display:
            assert display._view is not None
            assert os.sched_getaffinity(display._view.pid) == os.sched_getaffinity(1) - {min(mine)}
    finally:
        os.sched_setaffinity(0, mine)


async def test_stderr_stands_in_for_the_real_stream_while_the_view_draws(monkeypatch, terminal):
    """What a library may ask of sys.stderr during a run still works; text goes to the view, bytes past it."""
    monkeypatch.setattr(progress, "EXIT_WAIT_S", 60)
    real = sys.stderr
    async with LiveDisplay(LiveStats(), 1, True, "benchmark"):
        assert isinstance(sys.stderr, progress.Relay)
        assert sys.stderr.buffer is real.buffer and sys.stderr.fileno() == real.fileno()
        assert sys.stderr.write("a line\n") == len("a line\n")
        sys.stderr.flush()
    assert sys.stderr is real


async def test_a_view_that_cannot_start_leaves_the_run_without_a_display(monkeypatch, terminal):
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    display = LiveDisplay(LiveStats(), 1, True, "benchmark")
    async with display:
        assert display._view is None and not display.post("x\n")  # no view: the caller writes it


def test_no_view_when_stderr_is_not_a_terminal():
    """Piped or redirected, a transient display draws nothing: no process is started for it."""
    script = (
        "import asyncio\nfrom infermeter.load.driver import LiveStats\n"
        "from infermeter.load.progress import LiveDisplay\n"
        "async def main():\n    async with LiveDisplay(LiveStats(), 1, True, 'benchmark') as d:\n"
        "        print(d._view is None)\nasyncio.run(main())\n"
    )
    got = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert got.stdout.strip() == "True" and got.stderr == ""


def test_every_message_fits_a_pipes_atomic_write():
    """A long worker address (or any text) is cut so that each message is written whole or not at all."""
    worker = LiveStats(sent=1)
    line = progress.message("\u00e9" * 3000, "  " + "\u00e9" * 3000, 4, worker)
    assert len(line) <= MESSAGE_MAX and line.endswith(b"\n")
    assert orjson.loads(line)["done"] == 0
    assert len(progress.encode({"print": "\u2603" * 5000})) <= MESSAGE_MAX
    assert len(progress.encode({"key": "\x01" * 3000, "label": "\x01" * 3000, "info": "\x01" * 3000})) <= MESSAGE_MAX
