"""The engine model on the real clock: an EngineCore stepped, and its tokens handed out when due, from the callbacks
of a kernel timer set to each instant (a task only waits for work while the engine is idle).

The engine keeps the model's timeline, as the simulator does: a step starts where the previous one ended, or, on an
idle engine, when its work arrived, never when the event loop happened to wake up; a step takes only the requests that
had arrived by its start; and each token is handed out at its scheduled time, never before (event-loop timers fire up
to a millisecond early or late: a wait ends on a kernel timer set to the instant, infermeter.alarm's Waiter).
"""

from __future__ import annotations

import asyncio
import bisect
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from infermeter.alarm import Waiter
from infermeter.emulator.config import EmulatorConfig
from infermeter.engine.config import build_engines
from infermeter.engine.latency import LatencyModel
from infermeter.engine.request import EngineRequest
from infermeter.engine.step import Step, emission_runs

MAX_LAG_S = 0.050  # how far behind the real clock a step may start: beyond it (a host's stall) the timeline resets
LATE_S = 0.001  # a token handed out later than this after its scheduled time is late (exported and logged)
LATE_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.05, 0.25)
REPORT_S = 10.0  # the log says the engine is behind at most once per this many seconds


@dataclass(frozen=True)
class ScaledLatency:
    """A latency model run `speed` times faster (tests and quick demos)."""

    inner: LatencyModel
    speed: float

    @property
    def name(self) -> str:
        return self.inner.name

    def ttft(self, b: int, prompt_tokens: int) -> float:
        return self.inner.ttft(b, prompt_tokens) / self.speed

    def tbt(self, b: int, context_tokens: float) -> float:
        return self.inner.tbt(b, context_tokens) / self.speed

    def batch_time(self, b: int, max_len: int, prompt_tokens: int) -> float:
        return self.inner.batch_time(b, max_len, prompt_tokens) / self.speed

    def step_time(self, prefill_tokens: int, decode_seqs: int, context_tokens: int, prefill_pairs: int = 0) -> float:
        return self.inner.step_time(prefill_tokens, decode_seqs, context_tokens, prefill_pairs) / self.speed

    def after_requests(self, finished: int, prompt_tokens: int = 0) -> float:
        return self.inner.after_requests(finished, prompt_tokens) / self.speed

    def arrival_cost(self, prompt_tokens: int) -> float:
        return self.inner.arrival_cost(prompt_tokens) / self.speed


@dataclass
class Handle:
    """One request inside the emulator: tokens arrive as emission times (perf_counter), then None; on `queue` for a
    handler task to take, or, with `direct` set, straight into that function (called on the engine's own turn of the
    event loop: no task wakes per token)."""

    req: EngineRequest
    received: float
    direct: Callable[[float | None], None] | None = None
    _queue: asyncio.Queue[float | None] | None = None

    @property
    def queue(self) -> asyncio.Queue[float | None]:
        """The tokens for a handler task to take (made when first asked for: a direct stream never needs one)."""
        if self._queue is None:
            self._queue = asyncio.Queue()
        return self._queue

    def deliver(self, t: float | None) -> None:
        if self.direct is not None:
            self.direct(t)
        else:
            self.queue.put_nowait(t)

    def take_direct(self, direct: Callable[[float | None], None]) -> None:
        """From now on hand tokens to `direct`, first those already queued."""
        while self._queue is not None and not self._queue.empty():
            direct(self._queue.get_nowait())
        self.direct = direct


@dataclass
class Lateness:
    """How late the engine handed out tokens against its own timeline, in buckets (seconds), and how often the
    timeline fell more than MAX_LAG_S behind the real clock and was moved up."""

    bounds: tuple[float, ...] = LATE_BUCKETS
    counts: list[int] = field(default_factory=lambda: [0] * (len(LATE_BUCKETS) + 1))
    tokens: int = 0
    late: int = 0  # handed out more than LATE_S after their time
    resets: int = 0
    window: tuple[float, int, int] = (0.0, 0, 0)  # (start, tokens, late) of the current report window

    total_s: float = 0.0

    def add(self, late_s: float) -> None:
        self.tokens += 1
        self.total_s += late_s
        self.counts[bisect.bisect_left(self.bounds, late_s)] += 1
        if late_s > LATE_S:
            self.late += 1

    def behind(self, now: float) -> str | None:
        """Once per REPORT_S: a line saying so when more than 1% of the window's tokens were over LATE_S late."""
        start, tokens, late = self.window
        if now - start < REPORT_S:
            return None
        self.window = (now, self.tokens, self.late)
        n, k = self.tokens - tokens, self.late - late
        if n == 0 or k / n <= 0.01:
            return None
        return (
            f"emulator behind its schedule: {k} of {n} tokens ({k / n:.1%}) handed out more than "
            f"{LATE_S * 1e3:g} ms after their time in the last {now - start:.0f} s (its core cannot keep up)"
        )


class RealClockEngine:
    def __init__(self, config: EmulatorConfig) -> None:
        self.config = config
        latency = config.engine.latency_model()
        if config.speed != 1.0:
            latency = ScaledLatency(latency, config.speed)
        self.core = build_engines(config.engine, 1, latency)[0]
        self._wake = asyncio.Event()
        self._handles: dict[int, Handle] = {}
        self._arrived: deque[EngineRequest] = deque()  # submitted, not yet reached by the engine's timeline
        self._next = 0
        self._task: asyncio.Task[None] | None = None
        self._waiter: Waiter | None = None
        self._idle: asyncio.Future[None] | None = None  # set when the steps run out of work
        self._free_at: float | None = None  # where the model's timeline stands: the last step's end, None when idle
        self._step: Step | None = None  # the step being handed out
        self._order: list[tuple[float, int]] = []  # its tokens in time order
        self._emitted = 0  # how many of them are out
        self.finished = 0
        self.lateness = Lateness()
        self.on_step: Callable[[Step], None] | None = None  # told of each step as it ends (metrics dialects)

    def start(self) -> None:
        self._waiter = Waiter()
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        """Stop stepping (the timer first: the steps run from its callbacks, not from the task) and end the task."""
        if self._waiter is not None:
            self._waiter.close()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def submit(
        self, prompt_tokens: int, max_tokens: int, cached: int = 0, request_class: str = "", priority: int = 0
    ) -> Handle | str:
        """Queue a request; returns its handle, or the reason the engine can never serve it."""
        idx = self._next
        self._next += 1
        now = time.perf_counter()
        out = max(max_tokens, 1)
        req = EngineRequest(idx, now, prompt_tokens, out, out, request_class, cached=cached, priority=priority)
        reason = self.core.rejection(req)
        if reason is not None:
            return reason
        handle = Handle(req, now)
        self._handles[idx] = handle
        self._arrived.append(req)
        self._wake.set()
        return handle

    def abandon(self, handle: Handle) -> None:
        """The client went away: stop delivering (the engine still finishes the work, as real engines may)."""
        self._handles.pop(handle.req.idx, None)

    @property
    def waiting(self) -> int:
        return self.core.scheduler.waiting() + len(self._arrived)

    @property
    def running(self) -> int:
        return len(self.core.running)

    @property
    def paused(self) -> int:
        """Requests preempted and waiting to be admitted again (TensorRT-LLM's paused requests)."""
        running = {r.idx for r in self.core.running}
        return sum(1 for h in self._handles.values() if h.req.preemptions and h.req.idx not in running)

    async def _run(self) -> None:
        """Wake on new work when idle; the steps themselves run from the timer's callbacks (`_advance`)."""
        loop = asyncio.get_running_loop()
        while True:
            self._idle = loop.create_future()
            self._advance()
            await self._idle  # the steps went idle (or failed: raised here, ending the engine as before)
            await self._wake.wait()

    def _advance(self) -> None:
        """Run steps on the model's timeline until the next instant lies ahead (then the timer calls this again)
        or there is nothing to run (then idle until `submit`).  Each token is handed out at its time and each step
        finished at its end from here, in the timer's callback: a task woken for them ran behind the loop turn's
        other ready work (request handling near a full core) and made the next step's tokens late."""
        assert self._waiter is not None and self._idle is not None
        try:
            while True:
                if self._step is None:
                    start = self._next_start(self._free_at)
                    step = None
                    if start is not None:
                        self._admit(start)
                        step = self.core.next_step(start)
                    if step is None:  # nothing to do, or nothing the scheduler can run now: idle until work arrives
                        self._free_at = None
                        self._wake.clear()
                        self._idle.set_result(None)
                        return
                    self._step, self._order, self._emitted = step, emission_order(step), 0
                now = self._hand_out(time.perf_counter())  # read after planning: a step behind is due at once
                if self._emitted < len(self._order):
                    self._waiter.call_at(self._order[self._emitted][0], self._advance)
                    return
                if now < self._step.end:
                    self._waiter.call_at(self._step.end, self._advance)
                    return
                self._finish(self._step)
                self._free_at, self._step = self._step.end, None
        except Exception as exc:  # raised in the timer's callback: the engine's task is the one to fail
            if not self._idle.done():
                self._idle.set_exception(RuntimeError(repr(exc)) if isinstance(exc, StopIteration) else exc)

    def _hand_out(self, now: float) -> float:
        """Hand out the current step's tokens that are due by now, in order; returns the clock after them."""
        order, handles, lateness = self._order, self._handles, self.lateness
        i, n = self._emitted, len(order)
        while i < n and order[i][0] <= now:
            at, idx = order[i]
            i += 1
            lateness.add(now - at)
            handle = handles.get(idx)
            if handle is not None:
                handle.deliver(now)
            now = time.perf_counter()
        self._emitted = i
        return now

    def _finish(self, step: Step) -> None:
        """The step's end: its finished requests' streams are told so."""
        if self.on_step is not None:
            self.on_step(step)
        for r in self.core.finish(step):
            handle = self._handles.pop(r.idx, None)
            self.finished += 1
            if handle is not None:
                handle.deliver(None)
        if (behind := self.lateness.behind(time.perf_counter())) is not None:
            print(behind, file=sys.stderr, flush=True)

    def _next_start(self, free_at: float | None) -> float | None:
        """When the next step starts on the model's timeline: where the last one ended when work is waiting, else
        when the next request arrived; None when there is nothing to do.  A timeline more than MAX_LAG_S behind the
        real clock (the host stalled the process) moves up to it."""
        if free_at is not None and (self.core.has_work() or (self._arrived and self._arrived[0].arrival <= free_at)):
            start = free_at
        elif self._arrived:
            start = self._arrived[0].arrival
        else:
            return None
        floor = time.perf_counter() - MAX_LAG_S
        if start < floor:
            self.lateness.resets += 1
            return floor
        return start

    def _admit(self, start: float) -> None:
        """Hand the engine every request that had arrived by `start`, in arrival order."""
        while self._arrived and self._arrived[0].arrival <= start:
            self.core.submit(self._arrived.popleft())


def offsets_from(times: list[float], received: float) -> list[float]:
    """Token times as a stream's last response reports them: seconds after the request was received, rounded to
    the microsecond (one numpy pass: 4 us for 32 tokens where a Python round per token took 10 us)."""
    return np.round(np.asarray(times) - received, 6).tolist()


def emission_order(step: Step) -> list[tuple[float, int]]:
    """The step's tokens as (time, request index) in time order; among tokens due at the same time, requests' first
    tokens go first.  The emulator writes a step's tokens one after another (~7 us each here): a first
    token behind a whole batch of decodes would carry that writing time into its TTFT, while a decode token keeps
    its place from step to step, so its ITL does not see it."""
    owners, first, interval, count = emission_runs(step)
    keyed: list[tuple[float, bool, int]] = []
    for r, idx, f, iv, c in zip(step.reqs, owners, first, interval, count, strict=True):
        if c == 1:  # a decode step's every token, and a prefill's first
            keyed.append((f, r.generated > 0, idx))
        else:
            keyed += ((f + k * iv, k > 0 or r.generated > 0, idx) for k in range(c))
    keyed.sort()
    return [(at, idx) for at, _, idx in keyed]
