"""The load driver: open loop at absolute scheduled times (draft 4.2.3, 4.2.5) or closed loop (4.2.4).

Open loop computes every send time up front and never waits on a response before the next send: each request
is its own task, launched by the pacer (load.pacer) from a kernel alarm at its instant or from between two reads
of replies, its bytes written there and then (`Backend.start`), not a turn of the event loop later; with a cap on
requests in flight (load.slots) a send due while the cap is reached waits for the next to finish.  Closed loop
keeps C requests in flight, sending the next the moment one finishes; an optional barrier releases the first C
together (seeds/003's simultaneous start), or a ramp-up starts user i of C at i x ramp / C.  Both stop on a request
count, a duration, or a stop event (Ctrl-C), then give in-flight requests a grace period before cancelling them.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from infermeter.alarm import Alarm, sleep_until
from infermeter.client.backend import Backend
from infermeter.client.request import PreparedRequest
from infermeter.load.client_health import HealthProbe
from infermeter.load.pacer import Pacer
from infermeter.load.slots import Slots
from infermeter.records import RequestRecord


@dataclass
class LoadPattern:
    """Open loop when `offsets` is given (seconds from start), closed loop with `concurrency` otherwise."""

    offsets: np.ndarray | None = None
    concurrency: int | None = None
    duration: float | None = None
    barrier: bool = False
    min_requests: int | None = None  # closed loop: the duration does not stop it before this many sends
    # closed loop: user i of C starts at i x ramp_up / C seconds (an open loop's ramp is in its offsets already)
    ramp_up: float | None = None
    max_concurrency: int | None = None  # open loop: a send due while this many are in flight waits for a free slot

    def describe(self) -> str:
        bound = f", stopping after {self.duration:g} s" if self.duration else ""
        if self.min_requests is not None and self.duration is not None:
            bound = f", until {self.min_requests} requests and {self.duration:g} s"
        if self.offsets is not None:
            cap = f", at most {self.max_concurrency} in flight" if self.max_concurrency else ""
            return f"open-loop, {len(self.offsets)} scheduled sends{cap}{bound}"
        start = ", simultaneous start" if self.barrier else ""
        start += f", users starting over {self.ramp_up:g} s" if self.ramp_up else ""
        return f"closed-loop, concurrency {self.concurrency}{start}{bound}"


@dataclass
class LiveStats:
    """What the progress display shows while a run goes on."""

    sent: int = 0
    done: int = 0
    failed: int = 0
    ttfts: deque[float] = field(default_factory=lambda: deque(maxlen=500))  # the most recent only: bounded memory
    stopping: bool = False

    @property
    def in_flight(self) -> int:
        return self.sent - self.done

    def ttft_p50_ms(self) -> float | None:
        return float(np.median(self.ttfts)) * 1000 if self.ttfts else None

    def record(self, rec: RequestRecord) -> None:
        self.done += 1
        if rec.status != "ok":
            self.failed += 1
        elif rec.token_times:
            self.ttfts.append(rec.token_times[0] - rec.submitted_at)


@contextlib.contextmanager
def quiet_gc() -> Iterator[None]:
    """Keep the cyclic garbage collector from pausing the send loop.

    A full collection scans every live object (tens of ms with numpy, pyarrow, rich and pydantic loaded), which
    showed up as 40-50 ms send-lag spikes at 500 req/s.  Objects alive before the load are frozen out of
    collection and young collections run less often; both are restored afterwards.
    """
    gc.collect()
    gc.freeze()
    old = gc.get_threshold()
    gc.set_threshold(20_000, 50, 1000)
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()


OnSend = Callable[[PreparedRequest, float], None]
SPENT_CHECK_S = 0.05  # with a kernel alarm sending, how often the driver looks whether the schedule is spent


async def drive(
    client: Backend,
    requests: Iterable[PreparedRequest],
    pattern: LoadPattern,
    sink: Callable[[RequestRecord], None],
    stats: LiveStats | None = None,
    stop: asyncio.Event | None = None,
    grace_s: float = 30.0,
    lead_s: float = 0.02,
    hard_stop: asyncio.Event | None = None,
    on_send: OnSend | None = None,
    start_at: float | None = None,
    probe: HealthProbe | None = None,
) -> None:
    """Send the requests under the pattern; every request that was sent reaches `sink` as exactly one record, a
    cancelled one included.  `on_send(request, scheduled_at)` is told of each send as it starts (just after
    `Backend.start` wrote what it could).  The schedule
    starts `lead_s` from now, or at `start_at` on the client's clock (an instant shared by several processes).
    `probe` is told how late each open-loop send started."""
    with quiet_gc():
        await _drive(client, requests, pattern, sink, stats, stop, grace_s, lead_s, hard_stop, on_send, start_at, probe)


async def _drive(
    client: Backend,
    requests: Iterable[PreparedRequest],
    pattern: LoadPattern,
    sink: Callable[[RequestRecord], None],
    stats: LiveStats | None,
    stop: asyncio.Event | None,
    grace_s: float,
    lead_s: float,
    hard_stop: asyncio.Event | None,
    on_send: OnSend | None,
    start_at: float | None,
    probe: HealthProbe | None,
) -> None:
    stats = stats or LiveStats()
    stop = stop or asyncio.Event()
    tasks: set[asyncio.Task[None]] = set()
    t_start = client.clock.now() + lead_s if start_at is None else start_at
    if pattern.offsets is not None:
        after: list[Callable[[], None]] = []  # what a finished request calls: its slot freed, the pacer polled
        flights = _flights(client, sink, stats, on_send, probe, tasks, after)
        await _open_loop(client, requests, pattern, pattern.offsets, t_start, stop, flights, after)
    else:
        flights = _flights(client, sink, stats, on_send, None, tasks, [])
        await _closed_loop(client, requests, pattern, t_start, start_at is not None, stop, flights, tasks)
    await finish_in_flight(tasks, stop, grace_s, stats, hard_stop or asyncio.Event())


class _Flights(NamedTuple):
    """How a request goes out and comes back, for either loop."""

    launch: Callable[[PreparedRequest, float], None]  # an open-loop send: its bytes, then its own task
    one: Callable[[PreparedRequest, float], Awaitable[None]]  # a closed-loop send, awaited in its worker's task
    # an open-loop send that waited for a free slot (--max-concurrency) this many seconds past its scheduled instant
    launch_waited: Callable[[PreparedRequest, float, float], None]


def _flights(
    client: Backend,
    sink: Callable[[RequestRecord], None],
    stats: LiveStats,
    on_send: OnSend | None,
    probe: HealthProbe | None,
    tasks: set[asyncio.Task[None]],
    after: list[Callable[[], None]],
) -> _Flights:
    """The sends of one drive: every request sent reaches `sink` as one record; `probe` (the open loop's) is told
    how late each send started; `after` holds what a finished request calls (the open loop's slots and pacer)."""
    clock = client.clock

    async def finish(rec: RequestRecord, exchange: Awaitable[RequestRecord]) -> None:
        try:
            await exchange
        finally:  # a cancelled request is recorded too, then the cancellation goes on
            stats.record(rec)
            sink(rec)
            for call in after:  # the loop's ready callbacks are the other place a send would wait behind
                call()

    def begin(req: PreparedRequest, scheduled_at: float) -> tuple[RequestRecord, Awaitable[RequestRecord]]:
        """A request's record, and its bytes written at once where they can be (`Backend.start`)."""
        rec = req.record(scheduled_at)
        try:
            return rec, client.start(req, scheduled_at, rec)
        except Exception:  # what could not be written at once is sent (and its failure recorded) by `send`
            return rec, client.send(req, scheduled_at, rec)

    def noted(req: PreparedRequest, scheduled_at: float, lag: float) -> None:
        """A send's bookkeeping, after its bytes (it would delay them by tens of microseconds: the ledger, a flush)."""
        if probe is not None:
            probe.sent(lag)
        stats.sent += 1
        if on_send is not None:
            on_send(req, scheduled_at)

    def launch(req: PreparedRequest, scheduled_at: float) -> None:
        """An open-loop send: bytes, then its task (whatever fails in the bookkeeping, it has its record)."""
        lag = clock.now() - scheduled_at
        rec, exchange = begin(req, scheduled_at)
        task = asyncio.create_task(finish(rec, exchange))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        noted(req, scheduled_at, lag)

    async def one(req: PreparedRequest, scheduled_at: float) -> None:
        """A closed-loop send, in its worker's task."""
        rec, exchange = begin(req, scheduled_at)
        try:
            noted(req, scheduled_at, 0.0)
        finally:
            await finish(rec, exchange)

    def launch_waited(req: PreparedRequest, scheduled_at: float, waited: float) -> None:
        """An open-loop send that waited `waited` s for a slot: late by the cap, not by the client (its lag for the
        probe counts from the slot's freeing)."""
        lag = clock.now() - scheduled_at - waited
        rec, exchange = begin(req, scheduled_at)
        rec.slot_wait_s = waited
        task = asyncio.create_task(finish(rec, exchange))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        noted(req, scheduled_at, lag)

    return _Flights(launch, one, launch_waited)


async def _open_loop(
    client: Backend,
    requests: Iterable[PreparedRequest],
    pattern: LoadPattern,
    offsets: np.ndarray,
    t_start: float,
    stop: asyncio.Event,
    flights: _Flights,
    after: list[Callable[[], None]],
) -> None:
    """Every send at its scheduled instant from `t_start`, launched by the pacer (through the slots when requests in
    flight are capped); returns when the schedule is spent and nothing waits for a slot, or at a stop (requests
    still in flight are the caller's)."""
    clock = client.clock

    def scheduled() -> Iterator[tuple[PreparedRequest, float]]:
        for req, offset in zip(requests, offsets, strict=False):
            if pattern.duration is not None and offset >= pattern.duration:  # [0, duration)
                return
            yield req, t_start + float(offset)

    slots = None
    launch = flights.launch
    if pattern.max_concurrency is not None:
        slots = Slots(pattern.max_concurrency, flights.launch, flights.launch_waited, clock, stop)
        launch = slots.offer
        after.append(slots.free)  # first: a send that waited was due before any the pacer would launch now
    pacer = Pacer(scheduled(), launch, clock, stop)
    after.append(pacer.poll)
    # one waiter on the stop for the whole schedule: wait_for(stop.wait(), delay) would start and cancel a task
    # per send, each a trip round the event loop between the timer and the write (worse send lag under load)
    stopper = asyncio.ensure_future(stop.wait())
    try:
        client.pace(pacer.poll)
        pacer.arm(Alarm.open(clock, pacer.poll))
        while True:
            pacer.poll()
            if not pacer.pending:
                break
            delay = pacer.due - clock.now()
            if pacer.alarm is not None:  # the alarm sends; this wakes to see the schedule spent or stopped
                await asyncio.wait((stopper,), timeout=max(delay, 0.0) + SPENT_CHECK_S)
            elif delay > 0:  # asyncio's timer may fire up to a millisecond early: the next turn polls again
                await asyncio.wait((stopper,), timeout=delay)
            else:
                await asyncio.sleep(0)
        if slots is not None and not stop.is_set():  # sends still waiting for a slot go as requests finish
            drained = asyncio.ensure_future(slots.drained.wait())
            await asyncio.wait((stopper, drained), return_when=asyncio.FIRST_COMPLETED)
            drained.cancel()
    finally:  # also when drive itself fails or is cancelled: a request still finishing launches nothing more
        client.pace(None)
        pacer.close()
        if slots is not None:
            slots.close()
        stopper.cancel()


async def _closed_loop(
    client: Backend,
    requests: Iterable[PreparedRequest],
    pattern: LoadPattern,
    t_start: float,
    shared_start: bool,
    stop: asyncio.Event,
    flights: _Flights,
    tasks: set[asyncio.Task[None]],
) -> None:
    """C workers, each sending its next request the moment its last finished, from `t_start` (together with a
    barrier, or a start shared by several processes; with a ramp-up, worker i of C from `t_start` + i x ramp / C);
    returns when they ran out of requests or time, or at a stop."""
    assert pattern.concurrency is not None and pattern.concurrency > 0
    clock = client.clock
    queue = iter(requests)
    gate = asyncio.Event()
    deadline = t_start + pattern.duration if pattern.duration is not None else None
    floor = pattern.min_requests or 0
    issued = 0
    one = flights.one
    stopped = asyncio.ensure_future(stop.wait())
    stagger = (pattern.ramp_up or 0.0) / pattern.concurrency

    async def worker(i: int) -> None:
        nonlocal issued
        if pattern.barrier or shared_start:  # a shared start (several processes) waits for its instant
            await gate.wait()
        if stagger > 0:  # a stop ends the wait at once: a worker not started yet has nothing in flight
            begin_at = t_start + i * stagger
            while (left := begin_at - clock.now()) > 0 and not stop.is_set():
                if stopped.done():  # the loop itself was cancelled: no stop to wake this early
                    await asyncio.sleep(left)
                else:
                    await asyncio.wait((stopped,), timeout=left)
        for req in queue:
            now = clock.now()
            if stop.is_set() or (deadline is not None and now >= deadline and issued >= floor):
                return
            issued += 1
            await one(req, now)

    workers = [asyncio.create_task(worker(i)) for i in range(pattern.concurrency)]
    for w in workers:
        tasks.add(w)
        w.add_done_callback(tasks.discard)
    try:
        await sleep_until(clock.t0 + t_start)
        gate.set()
        # wait for the workers to run out of requests, or for a stop
        running = set(workers)
        while running and not stop.is_set():
            done, _ = await asyncio.wait(running | {stopped}, return_when=asyncio.FIRST_COMPLETED)
            running -= done
    finally:
        stopped.cancel()


async def finish_in_flight(
    tasks: set[asyncio.Task[None]], stop: asyncio.Event, grace_s: float, stats: LiveStats, hard_stop: asyncio.Event
) -> None:
    """Let in-flight requests finish; after a stop, give them grace_s (or until hard_stop), then cancel them
    (their records say "cancelled")."""
    pending = set(tasks)
    if not pending:
        return
    if not stop.is_set():
        stopper = asyncio.create_task(stop.wait())
        while pending and not stop.is_set():
            done, _ = await asyncio.wait(pending | {stopper}, return_when=asyncio.FIRST_COMPLETED)
            pending -= done
        stopper.cancel()
    if pending:
        stats.stopping = True
        hard = asyncio.create_task(hard_stop.wait())
        deadline = asyncio.get_running_loop().time() + grace_s
        while pending and not hard_stop.is_set():
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                break
            done, _ = await asyncio.wait(pending | {hard}, timeout=left, return_when=asyncio.FIRST_COMPLETED)
            pending -= done
        hard.cancel()
        # a task launched in the last turn has not run a step, and one cancelled before its first step never runs
        # its `finally` (no record): let every such task start first
        await asyncio.sleep(0)
        for t in pending:
            t.cancel()
        if pending:
            await asyncio.wait(pending)
            for t in pending:  # collect the cancellations so asyncio does not report them as never retrieved
                if not t.cancelled():
                    t.exception()
