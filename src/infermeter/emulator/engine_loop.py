"""The engine model on the real clock: one asyncio task steps an EngineCore and hands out tokens when due."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from infermeter.emulator.config import EmulatorConfig
from infermeter.engine.config import build_engines
from infermeter.engine.latency import LatencyModel
from infermeter.engine.request import EngineRequest
from infermeter.engine.step import emission_times

MAX_LAG_S = 0.050  # how far behind the real clock a step may start: beyond it (a host's stall) the timeline resets


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

    def step_time(self, prefill_tokens: int, decode_seqs: int, context_tokens: int) -> float:
        return self.inner.step_time(prefill_tokens, decode_seqs, context_tokens) / self.speed

    def after_requests(self, finished: int) -> float:
        return self.inner.after_requests(finished) / self.speed


@dataclass
class Handle:
    """One request inside the emulator: tokens arrive on `queue` as emission times (perf_counter), then None."""

    req: EngineRequest
    received: float
    queue: asyncio.Queue[float | None] = field(default_factory=asyncio.Queue)


class RealClockEngine:
    def __init__(self, config: EmulatorConfig) -> None:
        self.config = config
        latency = config.engine.latency_model()
        if config.speed != 1.0:
            latency = ScaledLatency(latency, config.speed)
        self.core = build_engines(config.engine, 1, latency)[0]
        self._wake = asyncio.Event()
        self._handles: dict[int, Handle] = {}
        self._next = 0
        self._task: asyncio.Task[None] | None = None
        self.finished = 0

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
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
        reason = self.core.submit(req)
        if reason is not None:
            return reason
        handle = Handle(req, now)
        self._handles[idx] = handle
        self._wake.set()
        return handle

    def abandon(self, handle: Handle) -> None:
        """The client went away: stop delivering (the engine still finishes the work, as real engines may)."""
        self._handles.pop(handle.req.idx, None)

    @property
    def waiting(self) -> int:
        return self.core.scheduler.waiting()

    @property
    def running(self) -> int:
        return len(self.core.running)

    async def _run(self) -> None:
        # the model's timeline: a busy engine starts each step where the last one ended, as the simulator does, so a
        # timer's overshoot and the time spent writing tokens do not add up step after step
        anchor: float | None = None
        while True:
            if not self.core.has_work():
                self._wake.clear()
                await self._wake.wait()
                anchor = None
                continue
            now = time.perf_counter()
            step = self.core.next_step(now if anchor is None else min(max(anchor, now - MAX_LAG_S), now))
            if step is None:
                self._wake.clear()
                await self._wake.wait()
                anchor = None
                continue
            anchor = step.end
            for at, idx in emission_times(step):
                delay = at - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                self._emit(idx)
            delay = step.end - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            for r in self.core.finish(step):
                handle = self._handles.pop(r.idx, None)
                self.finished += 1
                if handle is not None:
                    handle.queue.put_nowait(None)

    def _emit(self, idx: int) -> None:
        handle = self._handles.get(idx)
        if handle is None:
            return
        now = time.perf_counter()
        handle.queue.put_nowait(now)
