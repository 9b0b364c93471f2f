"""Live progress of a run on stderr: sent, in flight, done, failed, TTFT p50; a line per worker when the load comes
from several.

A child process draws it (infermeter.load.progress_view) at the idle scheduling class, off the CPUs the run was
confined to.  Drawing with rich takes 1-3 ms of a CPU: in rich's refresh thread it held the GIL, and on the event
loop every send falling due meanwhile (at 1,000 req/s on a terminal the send-gap CV was 0.18-0.26 with the display
drawn in the run's process, 0.08-0.13 without a display).  The run writes each line's figures to a pipe four times
a second and never waits for the child to read them.  Text the run writes to stderr meanwhile (and to stdout when
that is the terminal too) goes through the child, which prints it above its lines, as rich did in-process.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, TextIO

import orjson

from infermeter.load.driver import LiveStats

INTERVAL_S = 0.25  # between updates of the figures
EXIT_WAIT_S = 2.0  # the view's time to clear its lines after the pipe closes, before it is stopped
MESSAGE_MAX = getattr(select, "PIPE_BUF", 512)  # a pipe takes a write this small whole or not at all (POSIX: >= 512)
SHOW_CURSOR = b"\x1b[?25h"  # what a view stopped mid-draw could not do itself


def describe(s: LiveStats) -> str:
    p50 = s.ttft_p50_ms()
    return (
        f"sent {s.sent}  in flight {s.in_flight}  failed {s.failed}  "
        f"TTFT p50 {'-' if p50 is None else f'{p50:.0f} ms'}"
        + ("  stopping (Ctrl-C again cancels in-flight)" if s.stopping else "")
    )


def encode(fields: dict[str, Any]) -> bytes:
    """One message for the view: a JSON object on a line of its own, at most MESSAGE_MAX bytes (long text cut)."""
    line, room = orjson.dumps(fields) + b"\n", MESSAGE_MAX
    while len(line) > MESSAGE_MAX:
        room //= 2
        line = orjson.dumps({k: v[:room] if isinstance(v, str) else v for k, v in fields.items()}) + b"\n"
    return line


def message(key: str, label: str, total: int, s: LiveStats) -> bytes:
    """One line's figures."""
    return encode({"key": key, "label": label, "total": total, "done": s.done, "info": describe(s)})


def on_terminal() -> bool:
    """Whether stderr is a terminal: elsewhere rich draws nothing of a transient display, so no view is started."""
    return os.isatty(2)


def confine(pid: int) -> None:
    """The view at the idle scheduling class (nice 19 where there is none) and, when the run was confined to some of
    the CPUs this machine lets processes use (pid 1's), on the others: it only ever takes a CPU the run leaves."""
    try:
        os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        with contextlib.suppress(AttributeError, OSError):
            os.setpriority(os.PRIO_PROCESS, pid, 19)
    with contextlib.suppress(AttributeError, OSError):
        others = os.sched_getaffinity(1) - os.sched_getaffinity(0)
        if others:
            os.sched_setaffinity(pid, others)


BOOTSTRAP = (
    "import runpy, sys; sys.path.append(sys.argv.pop(1)); "
    "runpy.run_module('infermeter.load.progress_view', run_name='__main__')"
)  # with -P: the standard library and the installed packages first, then where this process imported infermeter


def start_view() -> subprocess.Popen[bytes] | None:
    """The view's process in a session of its own (Ctrl-C and job control are the run's), its stdin a pipe the run
    writes without blocking; None when it cannot start (the run goes on without a display)."""
    package_root = str(Path(__file__).resolve().parents[2])
    try:
        view = subprocess.Popen(
            [sys.executable, "-P", "-c", BOOTSTRAP, package_root],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        return None
    confine(view.pid)
    try:
        assert view.stdin is not None
        os.set_blocking(view.stdin.fileno(), False)
    except (AttributeError, OSError):  # no non-blocking pipes here (Windows before Python 3.12)
        view.kill()
        view.wait()
        return None
    return view


class Relay(io.TextIOBase):
    """A text stream standing in for stderr (or stdout) while the view draws: whole lines go to the view, which prints
    them above its own; to the stream itself when the view cannot take them."""

    def __init__(self, display: LiveDisplay, stream: TextIO) -> None:
        self.display, self.stream, self._held = display, stream, ""

    def write(self, text: str) -> int:
        lines, _, self._held = (self._held + text).rpartition("\n")
        if lines and not self.display.post(lines + "\n"):
            self.stream.write(lines + "\n")
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def close_relay(self) -> None:
        """What is left of a line goes to the stream itself."""
        if self._held:
            self.stream.write(self._held)
            self._held = ""

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]  # TextIOBase's is a read-only property at run time
        return getattr(self.stream, "encoding", "utf-8")

    def __getattr__(self, name: str) -> Any:
        """Anything else (`buffer`, `errors`, ...) is the stream's own: bytes written there do not pass the view."""
        if name == "stream":
            raise AttributeError(name)
        return getattr(self.stream, name)


class LiveDisplay:
    """The run's live progress: sent, in flight, done, failed, live TTFT p50; `workers` (address -> its figures and
    its share of the requests, filled as they join) each get a line of their own."""

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
        self._relays: list[tuple[str, Relay]] = []

    async def __aenter__(self) -> LiveDisplay:
        if self.enabled and on_terminal():
            self._view = start_view()
        if self._view is not None:
            self._task = asyncio.create_task(self._loop())
            for name in ("stderr", "stdout"):
                stream = getattr(sys, name)
                if stream is not None and (name == "stderr" or os.isatty(1)):
                    relay = Relay(self, stream)
                    self._relays.append((name, relay))
                    setattr(sys, name, relay)
        return self

    async def __aexit__(self, *exc: object) -> None:
        for name, relay in self._relays:
            setattr(sys, name, relay.stream)
            relay.close_relay()
        self._relays.clear()
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
        for stop in (None, signal.SIGTERM, signal.SIGKILL):  # asked by the pipe's end, then told, then made
            if stop is not None:
                with contextlib.suppress(OSError):
                    view.send_signal(stop)
            deadline = time.monotonic() + (EXIT_WAIT_S if stop is None else 0.5)
            while view.poll() is None and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            if view.poll() is not None:
                break
        if view.wait() == -signal.SIGKILL:  # it could not show the cursor again itself
            with contextlib.suppress(OSError):
                os.write(2, SHOW_CURSOR)

    def post(self, text: str) -> bool:
        """Text for the view to print above its lines; False when it could not take all of it."""
        if self._view is None:
            return False
        room = MESSAGE_MAX // 8  # characters: as JSON in UTF-8 one takes at most 6 bytes, so no piece is cut
        return all(self._write(self._view, encode({"print": text[i : i + room]})) for i in range(0, len(text), room))

    async def _loop(self) -> None:
        assert self._view is not None
        while True:
            self._send(self._view)
            await asyncio.sleep(INTERVAL_S)

    def _send(self, view: subprocess.Popen[bytes]) -> None:
        """Each line's figures, the run's last (the view redraws on it); a view that is behind misses this update
        (every update carries the whole line)."""
        lines = [message(address, f"  {address}", share, s) for address, (s, share) in list(self.workers.items())]
        for line in [*lines, message("", self.label, self.total, self.stats)]:
            if not self._write(view, line):
                return

    @staticmethod
    def _write(view: subprocess.Popen[bytes], data: bytes) -> bool:
        assert view.stdin is not None
        try:
            os.write(view.stdin.fileno(), data)
        except (OSError, ValueError):  # full (the view is behind), or gone: no display, the run goes on
            return False
        return True
