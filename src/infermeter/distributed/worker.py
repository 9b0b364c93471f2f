"""What runs inside a dask worker: one share of a run's load (today's asyncio driver over its requests, journaled
on the worker's disk), and `drain`, the coordinator's periodic call that starts it, stops it, and takes what it
measured since the last call.

The share runs as a task (a worker thread with its own event loop); `drain` runs on the worker's own event loop via
`Client.run`, so a busy share never delays it.  Both meet in this process's registry of shares.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from infermeter.client.backend import open_backend
from infermeter.client.request import ClientConfig, PreparedRequest
from infermeter.load.driver import LiveStats, LoadPattern, drive
from infermeter.load.prompts import prepared
from infermeter.records import LEDGER_DTYPE, RequestRecord, RunClock, RunWriter, records_to_table
from infermeter.run_info import RunInfo
from infermeter.workload.prompts import ExactPrompter
from infermeter.workload.spec import Requests


@dataclass
class ShareSpec:
    """Everything a worker needs for its share; pickled to it once."""

    run: str  # the run's key: every share of one run drains together
    index: int
    backend: str
    client: ClientConfig
    requests: Requests  # the whole run's; the share sends `rows` of them
    rows: np.ndarray
    seed: int
    prompter: ExactPrompter
    pattern: LoadPattern  # the share's offsets (open loop) or its part of the concurrency
    grace_s: float
    clock_origin: float  # the coordinator's run-clock 0 on this worker's perf_counter
    info: RunInfo  # for the worker's own journal


@dataclass
class Report:
    """What one drain took from a share."""

    run: str
    index: int
    ready: bool  # prompts built, waiting for the start
    finished: bool
    error: str | None
    sent: bytes  # ledger entries (LEDGER_DTYPE) since the last drain
    records: bytes  # Arrow IPC stream of the records finished since the last drain (empty: none)
    stats: tuple[int, int, int]  # sent, done, failed (TTFTs come from the records)
    journal: str | None  # the share's run directory on the worker's disk


@dataclass
class _Share:
    lock: threading.Lock = field(default_factory=threading.Lock)
    ready: bool = False
    finished: bool = False
    error: str | None = None
    sent: list[tuple[int, float, int, int]] = field(default_factory=list)  # ledger entries since the last drain
    records: list[RequestRecord] = field(default_factory=list)
    stats: LiveStats = field(default_factory=LiveStats)
    journal: str | None = None
    loop: asyncio.AbstractEventLoop | None = None
    start: asyncio.Future[float] | None = None
    stop: asyncio.Event | None = None
    hard_stop: asyncio.Event | None = None
    command: str = ""  # the last command given before the share's loop existed


_SHARES: dict[tuple[str, int], _Share] = {}


def run_share(spec: ShareSpec) -> None:
    """The task: build the share's prompts, wait for the start instant, send, journal.  A failure is reported by
    the next drain (and raised, so the coordinator's future says so too)."""
    state = _SHARES.setdefault((spec.run, spec.index), _Share())
    try:
        _new_loop().run_until_complete(_share(spec, state))
    except BaseException as exc:
        state.error = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        state.finished = True


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop

        return uvloop.new_event_loop()
    except ImportError:
        return asyncio.new_event_loop()


async def _share(spec: ShareSpec, state: _Share) -> None:
    from distributed import get_worker

    clock = RunClock(origin=spec.clock_origin)
    built: list[PreparedRequest] = list(prepared(spec.requests, spec.seed, prompter=spec.prompter, rows=spec.rows))
    place = Path(get_worker().local_directory) / "infermeter" / f"{spec.run}-share-{spec.index}"
    writer = RunWriter(place, spec.info)
    backend = open_backend(spec.backend, spec.client, clock)
    loop = asyncio.get_running_loop()
    with state.lock:
        state.journal = str(place)
        state.loop, state.start = loop, loop.create_future()
        state.stop, state.hard_stop = asyncio.Event(), asyncio.Event()
        _obey(state, state.command)
        state.ready = True

    def sink(rec: RequestRecord) -> None:
        writer.append(rec)
        with state.lock:
            state.records.append(rec)

    def on_send(req: PreparedRequest, at: float) -> None:
        writer.sent(req.request_id, at, req.input_tokens, req.max_tokens)
        with state.lock:
            state.sent.append((req.request_id, at, req.input_tokens, req.max_tokens))

    try:
        stopped = asyncio.ensure_future(state.stop.wait())
        await asyncio.wait((state.start, stopped), return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        if state.start.done():
            await drive(
                backend, built, spec.pattern, sink, state.stats, state.stop, spec.grace_s,
                hard_stop=state.hard_stop, on_send=on_send, start_at=state.start.result(),
            )  # fmt: skip
    finally:
        await backend.close()
        writer.close()


def _obey(state: _Share, command: str) -> None:
    """Apply a command on the share's own loop: "start:<t>", "stop" (finish in-flight) or "hard" (cancel them)."""
    state.command = command or state.command
    loop = state.loop
    if loop is None or not command:
        return
    if command.startswith("start:"):
        at = float(command.split(":", 1)[1])
        start = state.start
        assert start is not None

        def begin() -> None:
            if not start.done():
                start.set_result(at)

        loop.call_soon_threadsafe(begin)
    if command in ("stop", "hard") and state.stop is not None:
        loop.call_soon_threadsafe(state.stop.set)
    if command == "hard" and state.hard_stop is not None:
        loop.call_soon_threadsafe(state.hard_stop.set)


def drain(run: str, command: str = "") -> list[Report]:
    """Run on a worker by the coordinator: give `command` to this process's shares of `run` and take what they
    measured since the last drain."""
    out = []
    for (key, index), state in list(_SHARES.items()):
        if key != run:
            continue
        with state.lock:
            if command:
                _obey(state, command)
            s = state.stats  # counters only: its TTFT deque is the share thread's, iterating it here could fail
            stats = (s.sent, s.done, s.failed)
            records, state.records = state.records, []
            sent, state.sent = state.sent, []
            ready, finished, error, journal = state.ready, state.finished, state.error, state.journal
        try:
            payload = _ipc(records)
        except Exception:  # never lose what was taken: back in front of what came since, for the next drain
            with state.lock:
                state.records[:0], state.sent[:0] = records, sent
            raise
        ledger = np.array(sent, dtype=LEDGER_DTYPE).tobytes()
        out.append(Report(run, index, ready, finished, error, ledger, payload, stats, journal))
    return out


def _ipc(records: list[RequestRecord]) -> bytes:
    if not records:
        return b""
    sink = pa.BufferOutputStream()
    table = records_to_table(records)
    with pa.ipc.new_stream(sink, table.schema) as stream:
        stream.write_table(table)
    return sink.getvalue().to_pybytes()


def forget(run: str) -> None:
    """Run on a worker after the merge: drop the run's shares and their journals."""
    for key in [k for k in _SHARES if k[0] == run]:
        state = _SHARES.pop(key)
        if state.journal:
            with contextlib.suppress(OSError):
                shutil.rmtree(state.journal)
