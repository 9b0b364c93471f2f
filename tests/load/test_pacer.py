"""The open loop's pacer and its kernel alarm: sends launched in order once due (never before, none after a stop),
the alarm kept set to the next one, and a timerfd that fires at its instant and not before."""

import asyncio
import math
import statistics
import sys
import time

import pytest
import uvloop

from infermeter.alarm import Alarm, Waiter
from infermeter.client import PreparedRequest
from infermeter.load.pacer import Pacer
from infermeter.records import RunClock


class StoppedClock(RunClock):
    """A run clock that reads what the test sets."""

    def __init__(self) -> None:
        super().__init__()
        self.t = 0.0

    def now(self) -> float:
        return self.t


class FakeAlarm:
    def __init__(self) -> None:
        self.instants: list[float] = []

    def set(self, at: float) -> None:
        self.instants.append(at)


def _pacer(times: list[float]) -> tuple[Pacer, StoppedClock, list[tuple[int, float]], asyncio.Event]:
    clock, launched, stop = StoppedClock(), [], asyncio.Event()
    schedule = iter([(PreparedRequest(i, "p", 1, 1), t) for i, t in enumerate(times)])
    pacer = Pacer(schedule, lambda req, at: launched.append((req.request_id, at)), clock, stop)
    return pacer, clock, launched, stop


def test_sends_go_once_due_in_order_every_one_due_at_a_poll():
    pacer, clock, launched, _ = _pacer([0.010, 0.020, 0.020, 0.050])
    alarm = FakeAlarm()
    pacer.arm(alarm)  # type: ignore[arg-type]
    assert alarm.instants == [0.010] and pacer.due == 0.010
    clock.t = 0.009999
    pacer.poll()
    assert launched == []  # not a microsecond early
    clock.t = 0.0205  # late: the one due at 10 ms and both due at 20 ms go, in schedule order
    pacer.poll()
    assert launched == [(0, 0.010), (1, 0.020), (2, 0.020)]
    assert alarm.instants == [0.010, 0.050] and pacer.due == 0.050
    clock.t = 0.060
    pacer.poll()
    assert [i for i, _ in launched] == [0, 1, 2, 3]
    assert not pacer.pending and pacer.due == math.inf
    assert alarm.instants == [0.010, 0.050]  # nothing left to wake for


def test_nothing_is_launched_after_a_stop():
    pacer, clock, launched, stop = _pacer([0.0, 0.001, 0.002])
    clock.t = 0.0
    pacer.poll()
    stop.set()
    clock.t = 1.0
    pacer.poll()
    assert launched == [(0, 0.0)] and not pacer.pending


def test_a_closed_pacer_launches_nothing_and_closes_its_alarm():
    pacer, clock, launched, _ = _pacer([0.0, 0.001])

    class ClosingAlarm(FakeAlarm):
        closed = False

        def close(self) -> None:
            self.closed = True

    alarm = ClosingAlarm()
    pacer.arm(alarm)  # type: ignore[arg-type]
    pacer.close()
    clock.t = 1.0
    pacer.poll()
    assert launched == [] and not pacer.pending and alarm.closed and pacer.alarm is None


def test_a_launch_that_raises_does_not_send_its_request_again():
    clock, stop = StoppedClock(), asyncio.Event()
    tries: list[int] = []

    def launch(req: PreparedRequest, at: float) -> None:
        tries.append(req.request_id)
        if req.request_id == 0:
            raise RuntimeError("boom")

    pacer = Pacer(iter([(PreparedRequest(i, "p", 1, 1), 0.0) for i in range(2)]), launch, clock, stop)
    with pytest.raises(RuntimeError):
        pacer.poll()
    pacer.poll()
    assert tries == [0, 1]


async def _alarm_firings(delays: list[float], replace_with: float | None = None) -> tuple[list[float], list[float]]:
    clock = RunClock()
    fired: list[float] = []
    alarm = Alarm.open(clock, lambda: fired.append(clock.now()))
    assert alarm is not None, "this machine's kernel has a timerfd (Linux)"
    instants = []
    try:
        for delay in delays:
            at = clock.now() + delay
            instants.append(at)
            alarm.set(at)
            if replace_with is not None:
                alarm.set(at + replace_with)  # replaces the first instant
            count = len(fired)
            deadline = time.perf_counter() + 2.0 + (replace_with or 0.0)
            while len(fired) == count and time.perf_counter() < deadline:
                await asyncio.sleep(0.0005)
    finally:
        alarm.close()
    return instants, fired


def test_the_alarm_fires_at_its_instant_never_before_it():
    """The kernel never fires a timerfd early (asyncio's uvloop timers can be a millisecond early); how late is the
    machine's wake-up latency, which benchmarks/open_loop.py measures."""
    instants, fired = asyncio.run(_alarm_firings([0.003, 0.0001, 0.010, 0.0017, 0.0, 0.02, 0.0005]))
    assert len(fired) == len(instants)
    late = sorted(f - i for f, i in zip(fired, instants, strict=True))
    assert late[0] >= 0
    assert late[len(late) // 2] < 0.005  # a median: one wake-up may be late on a busy host, the arming may not


def test_setting_the_alarm_again_replaces_its_instant():
    instants, fired = asyncio.run(_alarm_firings([0.001], replace_with=0.3))
    assert len(fired) == 1 and fired[0] >= instants[0] + 0.3  # not at the first instant: only at the second


def test_a_waiter_whose_timer_the_kernel_refuses_waits_on_asyncio_from_then_on(monkeypatch):
    """A Waiter on a timer that raises when set: the wait still ends at or after its instant, and the timer is closed
    (asyncio's waits from then on) instead of the error ending the caller's task."""

    def refuse(self, at):
        raise OSError(22, "timerfd_settime failed")

    async def run() -> tuple[bool, bool, float, float]:
        waiter = Waiter()
        had = waiter.kernel_timer
        monkeypatch.setattr(Alarm, "set", refuse)
        at = time.perf_counter() + 0.005
        await waiter.until(at)
        ended = time.perf_counter()
        waiter.close()
        return had, waiter.kernel_timer, at, ended

    had, has, at, ended = asyncio.run(run())
    assert had and not has
    assert ended >= at


def test_a_call_is_never_early_when_the_kernel_timer_rings_before_its_instant(monkeypatch):
    """The timer is set to the nanosecond nearest the instant, which may precede it: a ring before the instant (here
    2 ms before, the timer set early on purpose) waits on asyncio's timers for the rest, for `call_at` and `until`."""
    if not sys.platform.startswith("linux"):
        pytest.skip("a timerfd is Linux's")
    set_at = Alarm.set
    monkeypatch.setattr(Alarm, "set", lambda self, at: set_at(self, at - 0.002))

    async def run() -> list[tuple[float, float]]:
        waiter = Waiter()
        assert waiter.kernel_timer
        got = []
        for _ in range(5):
            at = time.perf_counter() + 0.004
            ran: asyncio.Future[float] = asyncio.get_running_loop().create_future()
            waiter.call_at(at, lambda ran=ran: ran.set_result(time.perf_counter()))  # type: ignore[misc]
            got.append((at, await ran))
            at = time.perf_counter() + 0.004
            await waiter.until(at)
            got.append((at, time.perf_counter()))
        waiter.close()
        return got

    got = asyncio.run(run())
    assert all(t >= at for at, t in got), [(t - at) * 1e3 for at, t in got]


@pytest.mark.parametrize("timer", ["kernel timer", "asyncio timers"])
def test_a_wait_cancelled_takes_its_call_with_it(timer, monkeypatch):
    """A task cancelled while `until` waits leaves nothing set: its instant passes with no call (a stray one would
    wake the loop, or poll it a turn at a time for the last millisecond on asyncio's timers)."""
    from infermeter import alarm

    if timer == "asyncio timers":
        monkeypatch.setattr(Alarm, "open", classmethod(lambda cls, clock, fire: None))
    elif not sys.platform.startswith("linux"):
        pytest.skip("a timerfd is Linux's")
    resolved = []
    resolve = alarm._resolve
    monkeypatch.setattr(alarm, "_resolve", lambda due: (resolved.append(due), resolve(due)))

    async def run() -> None:
        waiter = Waiter()
        task = asyncio.create_task(waiter.until(time.perf_counter() + 0.01))
        await asyncio.sleep(0.002)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await asyncio.sleep(0.03)  # well past the instant
        waiter.call_at(time.perf_counter() + 0.001, lambda: None)  # and the Waiter still takes calls
        waiter.close()

    asyncio.run(run())
    assert resolved == []


async def _busy_callbacks_passed(wait: str, instants: int = 15) -> list[int]:
    """For each instant 2 ms ahead: how many busy callbacks (0.3 ms each, each scheduling the next: request handling
    near a full core) started after the instant and before the waiting code ran, by `call_at` or by `until`."""
    loop = asyncio.get_running_loop()
    waiter = Waiter()
    started: list[float] = []
    running = True

    def busy() -> None:
        started.append(time.perf_counter())
        end = started[-1] + 0.0003
        while time.perf_counter() < end:
            pass
        if running and len(started) < 20_000:
            loop.call_soon(busy)

    async def woken(at: float, ran: asyncio.Future[float]) -> None:
        await waiter.until(at)
        ran.set_result(time.perf_counter())

    passed = []
    loop.call_soon(busy)
    try:
        for _ in range(instants):
            at = time.perf_counter() + 0.002
            ran: asyncio.Future[float] = loop.create_future()
            if wait == "call_at":
                waiter.call_at(at, lambda ran=ran: ran.set_result(time.perf_counter()))  # type: ignore[misc]
                t = await ran
            else:
                task = asyncio.create_task(woken(at, ran))
                t = await ran
                await task
            assert t >= at
            passed.append(sum(1 for s in started if at <= s < t))
    finally:
        running = False
        waiter.close()
    return passed


def test_call_at_runs_in_the_loop_turn_its_instant_comes_in():
    """The emulator hands out a step's tokens from `call_at`: the function runs from the kernel timer's callback,
    before any ready callback that started after the instant; a task woken by `until` waits behind one more."""
    if not uvloop.run(_has_kernel_timer()):
        pytest.skip("no timerfd here")
    by_call_at = uvloop.run(_busy_callbacks_passed("call_at"))
    by_until = uvloop.run(_busy_callbacks_passed("until"))
    assert statistics.median(by_until) >= 1  # the busy callbacks do hold the turn: the check below can fail
    assert statistics.median(by_call_at) == 0


async def _has_kernel_timer() -> bool:
    waiter = Waiter()
    try:
        return waiter.kernel_timer
    finally:
        waiter.close()


@pytest.mark.parametrize("timer", ["kernel timer", "asyncio timers"])
def test_call_at_runs_at_its_instant_never_before_and_a_later_call_replaces_it(timer, monkeypatch):
    """On the timerfd, or where there is none on asyncio's timers and then a turn at a time until the instant: a
    call never runs early, a later call_at replaces a pending one, and close drops it."""
    if timer == "asyncio timers":
        monkeypatch.setattr(Alarm, "open", classmethod(lambda cls, clock, fire: None))
    elif not sys.platform.startswith("linux"):
        pytest.skip("a timerfd is Linux's")

    async def run() -> tuple[list[tuple[str, float]], float]:
        waiter = Waiter()
        assert waiter.kernel_timer == (timer == "kernel timer")
        calls: list[tuple[str, float]] = []
        waiter.call_at(time.perf_counter() + 0.003, lambda: calls.append(("replaced", time.perf_counter())))
        second = time.perf_counter() + 0.006
        waiter.call_at(second, lambda: calls.append(("second", time.perf_counter())))
        await asyncio.sleep(0.02)
        waiter.call_at(time.perf_counter() + 0.003, lambda: calls.append(("dropped", time.perf_counter())))
        waiter.close()
        await asyncio.sleep(0.01)
        return calls, second

    calls, second = asyncio.run(run())
    assert [name for name, _ in calls] == ["second"]
    assert calls[0][1] >= second


def test_the_pacer_never_sends_early_on_a_live_loop():
    """A whole schedule on a live event loop, only the alarm polling: every send launched, in order, at its
    instant (the median lateness; the machine's wake-up latency is benchmarks/open_loop.py's)."""

    async def run() -> tuple[list[float], list[tuple[int, float, float]]]:
        clock, stop = RunClock(), asyncio.Event()
        start = clock.now() + 0.01
        times = [start + k * 0.0007 for k in range(40)]
        launched: list[tuple[int, float, float]] = []
        schedule = iter([(PreparedRequest(i, "p", 1, 1), t) for i, t in enumerate(times)])
        pacer = Pacer(schedule, lambda req, at: launched.append((req.request_id, at, clock.now())), clock, stop)
        pacer.arm(Alarm.open(clock, pacer.poll))
        deadline = time.perf_counter() + 10
        while pacer.pending and time.perf_counter() < deadline:
            await asyncio.sleep(0.005)
        assert pacer.alarm is not None
        pacer.alarm.close()
        return times, launched

    _, launched = asyncio.run(run())
    assert [i for i, _, _ in launched] == list(range(40))
    late = sorted(sent - at for _, at, sent in launched)
    assert late[len(late) // 2] < 0.005  # at the alarm's instant (a systematic error in its arming would show)
