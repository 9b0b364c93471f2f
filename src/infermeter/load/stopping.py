"""How a run stops early: SIGINT finishes what is in flight, SIGTERM or a failed disk cancels it."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Iterator


class Stopper:
    """SIGINT stops sending and lets in-flight requests finish (a second SIGINT cancels them); SIGTERM stops
    sending and cancels in-flight requests at once; a failed run directory does the same as SIGTERM."""

    def __init__(self) -> None:
        self.stop, self.hard_stop = asyncio.Event(), asyncio.Event()
        self.reason: str | None = None

    def interrupt(self) -> None:
        if self.stop.is_set():
            self.hard_stop.set()
        self.reason = self.reason or "interrupted"
        self.stop.set()

    def terminate(self, reason: str = "terminated") -> None:
        self.reason = self.reason or reason
        self.stop.set()
        self.hard_stop.set()

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """The handlers for the block; the process's own handlers come back afterwards."""
        loop = asyncio.get_running_loop()
        handlers = {signal.SIGINT: self.interrupt, signal.SIGTERM: lambda: self.terminate()}
        saved = {sig: signal.getsignal(sig) for sig in handlers}
        with contextlib.suppress(NotImplementedError, RuntimeError):
            for sig, handler in handlers.items():
                loop.add_signal_handler(sig, handler)
        try:
            yield
        finally:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                for sig, previous in saved.items():
                    loop.remove_signal_handler(sig)
                    signal.signal(sig, previous)


WORKER_LOST = "a worker died"  # a distributed run lost a worker: what it sent is accounted for, the rest not sent

STOP_NOTES = {
    "interrupted": "run stopped by Ctrl-C (SIGINT) after {sent} of {n} requests were sent",
    "terminated": "run stopped by SIGTERM after {sent} of {n} requests were sent; requests in flight were cancelled",
}
