"""An open loop's cap on requests in flight (--rate R --max-concurrency C).

The arrival process still decides when each request is due; a send due while C requests are in flight waits, first
come first served, and goes the moment one of them finishes.  How long it waited (its actual send instant less its
scheduled one) goes into its record's `slot_wait_s`.  Without a cap the driver makes no `Slots` at all: the uncapped
open loop's path is untouched.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from infermeter.client.request import PreparedRequest
from infermeter.records import RunClock

Launch = Callable[[PreparedRequest, float], None]
LaunchWaited = Callable[[PreparedRequest, float, float], None]  # request, scheduled instant, seconds it waited


class Slots:
    """At most `limit` requests in flight: `offer` launches at once when a slot is free, else queues; `free` (a
    request finished) launches the longest-waiting one.  Nothing is launched after a stop or `close`."""

    def __init__(
        self, limit: int, launch: Launch, launch_waited: LaunchWaited, clock: RunClock, stop: asyncio.Event
    ) -> None:
        if limit < 1:
            raise ValueError(f"a cap on requests in flight must be at least 1, not {limit}")
        self.limit = limit
        self.in_flight = 0
        self._launch, self._launch_waited, self._clock, self._stop = launch, launch_waited, clock, stop
        self._waiting: deque[tuple[PreparedRequest, float]] = deque()
        self.drained = asyncio.Event()  # set while no send waits
        self.drained.set()
        self._closed = False

    def offer(self, req: PreparedRequest, scheduled_at: float) -> None:
        """A send whose time has come (the pacer's launch)."""
        if self._closed:
            return
        if self.in_flight < self.limit and not self._waiting:
            self.in_flight += 1  # its task frees the slot when it ends, whatever fails after the launch
            self._launch(req, scheduled_at)
        else:
            self._waiting.append((req, scheduled_at))
            self.drained.clear()

    def free(self) -> None:
        """A request in flight finished: the next waiting send takes its slot."""
        self.in_flight -= 1
        while self._waiting and self.in_flight < self.limit and not self._closed and not self._stop.is_set():
            req, at = self._waiting.popleft()
            self.in_flight += 1
            self._launch_waited(req, at, self._clock.now() - at)
        if not self._waiting:
            self.drained.set()

    def close(self) -> None:
        """Launch nothing more; what still waits is never sent (a stop, or the drive itself ended)."""
        self._closed = True
        self._waiting.clear()
        self.drained.set()
