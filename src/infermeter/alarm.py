"""A kernel timer on the event loop (Linux timerfd): a callback at an instant of the run clock, to the microsecond.

asyncio's timers are only as fine as the loop's clock (uvloop's is the millisecond) and run after the loop's turn;
a timerfd makes the loop's poll return at its instant and its callback runs among the turn's reads.  Where there is
no timerfd (not Linux), `Alarm.open` gives None and its users wait on asyncio's timers instead: the open loop's pacer
polls on them, and a `Waiter` (the emulator's engine) sets asyncio's timer to just short of the instant and then
yields to the loop a turn at a time until it has come.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import sys
import time
from collections.abc import Callable

from infermeter.records import RunClock

_CLOCK_MONOTONIC = 1  # time.perf_counter's clock on Linux
SPIN_S = 0.001  # without a kernel timer, a wait sleeps until this long before its instant, then yields until it comes
_TFD_NONBLOCK, _TFD_CLOEXEC, _TFD_TIMER_ABSTIME = 0o4000, 0o2000000, 1


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


class Alarm:
    """Calls `fire` once the run clock reaches the instant last `set` (at once if it has passed)."""

    def __init__(self, fd: int, settime: Callable[[int, int], None], clock: RunClock, fire: Callable[[], None]) -> None:
        self._fd, self._settime, self._clock, self._fire = fd, settime, clock, fire
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(fd, self._ready)

    @classmethod
    def open(cls, clock: RunClock, fire: Callable[[], None]) -> Alarm | None:
        """An alarm on the running loop, or None where the kernel offers no timerfd on perf_counter's clock."""
        if not sys.platform.startswith("linux"):
            return None
        if abs(time.clock_gettime(_CLOCK_MONOTONIC) - time.perf_counter()) > 1e-3:
            return None
        try:
            fd, settime = _timerfd()
        except (OSError, AttributeError):
            return None
        return cls(fd, settime, clock, fire)

    def set(self, at: float) -> None:
        """Fire at `at` on the run clock (replacing the instant set before)."""
        self._settime(self._fd, max(round((self._clock.t0 + at) * 1e9), 1))

    def close(self) -> None:
        self._loop.remove_reader(self._fd)
        os.close(self._fd)

    def _ready(self) -> None:
        try:
            os.read(self._fd, 8)  # the expiry count: reading it disarms the readiness
        except BlockingIOError:  # re-set to a later instant after it expired: nothing to fire yet
            return
        self._fire()


class Waiter:
    """Calls functions, or wakes a task, at instants of time.perf_counter on the running loop: on an Alarm where there
    is one, else on asyncio's timers (a _LoopTimer); never before the instant."""

    def __init__(self) -> None:
        self._alarm = Alarm.open(RunClock(origin=0.0), self._ring)
        self._pending: tuple[float, Callable[[], None]] | None = None  # the instant and function the alarm is set for
        self._timer: _LoopTimer | None = None  # asyncio's stand-in for the alarm
        self._until: asyncio.Future[None] | None = None  # what `until` waits on

    @property
    def kernel_timer(self) -> bool:
        return self._alarm is not None

    async def until(self, at: float) -> None:
        """Return at `at` (perf_counter seconds) or just after: `call_at` waking this task, a loop turn later."""
        if time.perf_counter() >= at:
            return
        due: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._set(at, lambda: _resolve(due))
        self._until = due
        try:
            await due
        finally:
            self._until = None
            if due.cancelled():  # the waiting task was cancelled: its call goes with it
                self.cancel()

    def call_at(self, at: float, fn: Callable[[], None]) -> None:
        """Call `fn` at `at` (perf_counter seconds) or just after, from the alarm's own callback: among the reads of
        the loop turn in which the instant comes, not a turn later as a task woken by `until` runs.  One call is
        pending at a time: a later call_at replaces it; not while `until` waits (it would never wake)."""
        assert self._until is None, "call_at while until waits on the same Waiter"
        self._set(at, fn)

    def _set(self, at: float, fn: Callable[[], None]) -> None:
        self.cancel()
        if self._alarm is not None:
            try:
                self._alarm.set(at)
            except OSError:  # the kernel refused the timer: asyncio's from now on
                self._alarm.close()
                self._alarm = None
            else:
                self._pending = (at, fn)
                return
        self._timer = _LoopTimer(at, fn)

    def cancel(self) -> None:
        """Drop the pending call."""
        self._pending = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def close(self) -> None:
        """Drop the pending call and free the kernel timer."""
        self.cancel()
        if self._alarm is not None:
            self._alarm.close()
            self._alarm = None

    def _ring(self) -> None:
        if self._pending is None:
            return
        (at, fn), self._pending = self._pending, None
        if time.perf_counter() < at:  # the timer is set to the nanosecond nearest the instant, which may precede it
            self._timer = _LoopTimer(at, fn)
            return
        fn()


class _LoopTimer:
    """Calls `fn` once perf_counter reaches `at` on asyncio's timers alone, which fire up to a millisecond early or
    late: asyncio's timer to SPIN_S short of the instant, then a turn of the loop at a time until it has come."""

    def __init__(self, at: float, fn: Callable[[], None]) -> None:
        self._at, self._fn = at, fn
        self._loop = asyncio.get_running_loop()
        self._handle: asyncio.Handle = self._loop.call_later(max(at - time.perf_counter() - SPIN_S, 0.0), self._poll)

    def cancel(self) -> None:
        self._handle.cancel()

    def _poll(self) -> None:
        if time.perf_counter() < self._at:
            self._handle = self._loop.call_soon(self._poll)
            return
        self._fn()


async def sleep_until(at: float) -> None:
    """Return at `at` (perf_counter seconds) or just after, on asyncio's timers (a _LoopTimer)."""
    if time.perf_counter() >= at:
        return
    due: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    timer = _LoopTimer(at, lambda: _resolve(due))
    try:
        await due
    finally:
        timer.cancel()


def _resolve(due: asyncio.Future[None]) -> None:
    if not due.done():
        due.set_result(None)


def _timerfd() -> tuple[int, Callable[[int, int], None]]:
    """A non-blocking CLOCK_MONOTONIC timerfd and a function arming it at an absolute instant in ns."""
    if sys.version_info >= (3, 13) and hasattr(os, "timerfd_create"):  # Python 3.13+ on Linux
        fd = os.timerfd_create(_CLOCK_MONOTONIC, flags=_TFD_NONBLOCK | _TFD_CLOEXEC)

        def settime(fd: int, at_ns: int) -> None:
            os.timerfd_settime_ns(fd, flags=_TFD_TIMER_ABSTIME, initial=at_ns)

        return fd, settime
    libc = ctypes.CDLL(None, use_errno=True)
    create, arm = libc.timerfd_create, libc.timerfd_settime
    create.argtypes, create.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    arm.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(_Itimerspec), ctypes.c_void_p]
    arm.restype = ctypes.c_int
    fd = create(_CLOCK_MONOTONIC, _TFD_NONBLOCK | _TFD_CLOEXEC)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "timerfd_create failed")
    spec = _Itimerspec()
    ref = ctypes.byref(spec)

    def settime_libc(fd: int, at_ns: int) -> None:
        spec.it_value.tv_sec, spec.it_value.tv_nsec = divmod(at_ns, 1_000_000_000)
        if arm(fd, _TFD_TIMER_ABSTIME, ref, None) != 0:
            raise OSError(ctypes.get_errno(), "timerfd_settime failed")

    return fd, settime_libc
