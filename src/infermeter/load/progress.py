"""Live progress of a run on stderr: sent, in flight, done, failed, TTFT p50; a line per worker when the load comes
from several.

A child process draws it (infermeter.load.progress_view, at the idle scheduling class).  Drawing with rich takes
1-3 ms of a CPU: in rich's refresh thread it held the GIL, and on the event loop it held every send falling due
meanwhile (at 1,000 req/s on a terminal the send-gap CV was 0.24-0.26 with the display, 0.10-0.12 without).  The
run only writes each line's figures to a pipe four times a second, and never waits for the child to read them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import orjson

from infermeter.load.driver import LiveStats

INTERVAL_S = 0.25  # between updates of the figures
EXIT_WAIT_S = 2.0  # the view's time to clear itself after the pipe closes, before it is killed
MESSAGE_MAX = 4096  # bytes: a pipe takes a write this small whole or not at all (POSIX PIPE_BUF)


def describe(s: LiveStats) -> str:
    p50 = s.ttft_p50_ms()
    return (
        f"sent {s.sent}  in flight {s.in_flight}  failed {s.failed}  "
        f"TTFT p50 {'-' if p50 is None else f'{p50:.0f} ms'}"
        + ("  stopping (Ctrl-C again cancels in-flight)" if s.stopping else "")
    )


def message(key: str, label: str, total: int, s: LiveStats) -> bytes:
    """One line's figures for the view: a JSON object on a line of its own, within MESSAGE_MAX bytes."""
    line = orjson.dumps({"key": key[:200], "label": label[:200], "total": total, "done": s.done, "info": describe(s)})
    return line + b"\n"


def on_terminal() -> bool:
    """Whether stderr is a terminal: elsewhere rich draws nothing of a transient display, so no view is started."""
    return os.isatty(2)


def start_view() -> subprocess.Popen[bytes] | None:
    """The view's process, its stdin a pipe the run writes without blocking; None when it cannot start (the run
    goes on without a display)."""
    package_root = str(Path(__file__).resolve().parents[2])  # where `infermeter` is imported from, installed or not
    path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH", "")) if p)
    try:
        view = subprocess.Popen(
            [sys.executable, "-m", "infermeter.load.progress_view"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": path},
        )
    except OSError:
        return None
    assert view.stdin is not None
    os.set_blocking(view.stdin.fileno(), False)
    return view


class LiveDisplay:
    """Rich progress: sent, in flight, done, failed, live TTFT p50; `workers` (address -> its figures and its share
    of the requests, filled as they join) each get a line of their own."""

    def __init__(
        self,
        stats: LiveStats,
        total: int,
        enabled: bool,
        label: str,
        workers: dict[str, tuple[LiveStats, int]] | None = None,
    ) -> None:
        self.stats, self.total, self.enabled, self.label = stats, total, enabled, label
        self.workers = workers if workers is not None else {}
        self._view: subprocess.Popen[bytes] | None = None
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> LiveDisplay:
        if self.enabled and on_terminal():
            self._view = start_view()
            if self._view is not None:
                self._task = asyncio.create_task(self._loop())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        view, self._view = self._view, None
        if view is None:
            return
        self._send(view)  # the last figures
        assert view.stdin is not None
        with contextlib.suppress(OSError):
            view.stdin.close()  # the view clears its lines and exits
        deadline = time.monotonic() + EXIT_WAIT_S
        while view.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        if view.poll() is None:
            view.kill()
            view.wait()

    async def _loop(self) -> None:
        assert self._view is not None
        while True:
            self._send(self._view)
            await asyncio.sleep(INTERVAL_S)

    def _send(self, view: subprocess.Popen[bytes]) -> None:
        """Each line's figures; a view that is behind misses this update (every update carries the whole line)."""
        assert view.stdin is not None
        lines = [message(address, f"  {address}", share, s) for address, (s, share) in list(self.workers.items())]
        for line in [message("", self.label, self.total, self.stats), *lines]:
            try:
                os.write(view.stdin.fileno(), line)
            except BlockingIOError:
                return
            except (OSError, ValueError):  # the view is gone (or its pipe closed): no display, the run goes on
                return
