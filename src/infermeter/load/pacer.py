"""The open loop's schedule, sent from wherever the event loop is when a send falls due.

A single-threaded event loop runs its timers between turns; at a high rate a turn handles tens of reads of replies,
so a send that waits for its timer waits out the turn (0.1-2 ms at 1,000 req/s, most of the spread between sends).
The pacer is polled by a kernel timer set to the next send's instant (infermeter.alarm; asyncio's timers where there is
none) and, through the backend's `pace` hook, after each read of a reply: a send goes at the first of those moments
after its time, and `Backend.start` writes it there and then.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterator

from infermeter.alarm import Alarm
from infermeter.client.request import PreparedRequest
from infermeter.records import RunClock

Launch = Callable[[PreparedRequest, float], None]


class Pacer:
    """Launches each (request, time on the run clock) of `schedule` once its time has come, in order; none after a
    stop.  `due` is the next send's time (inf when the schedule is spent); `alarm`, when given, is kept set to it."""

    def __init__(
        self, schedule: Iterator[tuple[PreparedRequest, float]], launch: Launch, clock: RunClock, stop: asyncio.Event
    ) -> None:
        self._schedule, self._launch, self._clock, self._stop = schedule, launch, clock, stop
        self._next: tuple[PreparedRequest, float] | None = None
        self.due = math.inf
        self.alarm: Alarm | None = None
        self._advance()

    @property
    def pending(self) -> bool:
        return self._next is not None and not self._stop.is_set()

    def arm(self, alarm: Alarm | None) -> None:
        """Keep `alarm` set to the next send's time from now on."""
        self.alarm = alarm
        if alarm is not None and self.pending:
            alarm.set(self.due)

    def poll(self) -> None:
        """Launch every send whose time has come (cheap when none has: one clock read)."""
        if self._clock.now() < self.due:
            return
        while self._next is not None and not self._stop.is_set() and self._clock.now() >= self.due:
            req, at = self._next
            self._advance()  # first: a launch that fails must not send the same request again
            self._launch(req, at)
        if self.alarm is not None and self.pending:
            self.alarm.set(self.due)

    def close(self) -> None:
        """Launch nothing more, and close the alarm."""
        self._next, self.due = None, math.inf
        if self.alarm is not None:
            self.alarm.close()
            self.alarm = None

    def _advance(self) -> None:
        self._next = next(self._schedule, None)
        self.due = self._next[1] if self._next is not None else math.inf
