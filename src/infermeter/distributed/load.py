"""The coordinator's side of a distributed run: deal the requests, agree a start instant, stream every worker's
sends and records into the one run directory, and account for every request of a worker that died."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from infermeter.client.request import ClientConfig
from infermeter.distributed import clocks
from infermeter.distributed.shares import deal, id_ranges
from infermeter.distributed.worker import Report, ShareSpec, drain, forget, run_share
from infermeter.errors import UserError
from infermeter.load.driver import LiveStats, LoadPattern
from infermeter.records import (
    LEDGER_DTYPE,
    RunClock,
    RunInfo,
    RunWriter,
    read_records,
    table_to_records,
    unrecorded,
)
from infermeter.run_info import Distributed, WorkerShare
from infermeter.workload import ids
from infermeter.workload.prompts import ExactPrompter
from infermeter.workload.spec import Requests

if TYPE_CHECKING:
    from distributed import Client, Future

POLL_S = 0.25  # how often the coordinator drains its workers
WORKER_WAIT_S = 30.0  # how long a run waits for a cluster that lists no worker
START_LEAD_S = 0.5  # from the moment every worker is ready to the shared start
MISSES = 3  # checks in a row a worker may miss (unanswered, or not listed by the scheduler) before it counts as dead


@dataclass
class Dealt:
    """The coordinator's view of one worker's share."""

    worker: str
    host: str
    same_host: bool
    clock: clocks.Estimate  # zero offset on the coordinator's host
    ids: np.ndarray  # request ids dealt
    concurrency: int | None
    future: Future | None = None
    stats: LiveStats = field(default_factory=LiveStats)
    sent: dict[int, tuple[Any, ...]] = field(default_factory=dict)  # id -> ledger entry
    recorded: set[int] = field(default_factory=set)
    ready: bool = False
    finished: bool = False
    died: str | None = None
    misses: int = 0  # drains in a row the worker did not answer
    absent: int = 0  # checks in a row the scheduler did not list it
    journal: str | None = None


@dataclass
class ClusterLoad:
    """A run's load on a cluster: what `benchmark` passes when --workers or --cluster is given."""

    client: Client
    cluster: str  # how run.json names it
    target: ClientConfig
    shares: dict[int, Dealt] = field(default_factory=dict)
    run: str = field(default_factory=lambda: uuid.uuid4().hex[:12])

    def workers(self) -> list[str]:
        return sorted(self.client.scheduler_info()["workers"])

    def workers_to_deal(self) -> list[str]:
        """The workers a run's requests are dealt to: a busy scheduler can list none for a moment (as a worker's
        check can miss it), so wait up to WORKER_WAIT_S for them before saying there are none."""
        found = self.workers()
        if not found:
            with contextlib.suppress(TimeoutError, OSError):
                self.client.wait_for_workers(1, timeout=WORKER_WAIT_S)
            found = self.workers()
        if not found:
            raise UserError(f"{self.cluster} has no workers to send from (none listed for {WORKER_WAIT_S:g} s)")
        return found


def _loopback(url: str) -> bool:
    from urllib.parse import urlsplit

    host = urlsplit(url).hostname or ""
    return host in ("localhost", "::1") or host.startswith("127.")


async def drive_on_cluster(
    load: ClusterLoad,
    *,
    backend: str,
    reqs: Requests,
    seed: int,
    prompter: ExactPrompter,
    pattern: LoadPattern,
    grace_s: float,
    clock: RunClock,
    info: RunInfo,
    writer: RunWriter,
    stats: LiveStats,
    per_worker: dict[str, tuple[LiveStats, int]],
    stop: asyncio.Event,
    hard_stop: asyncio.Event,
) -> Distributed:
    """Send the run's requests from the cluster's workers and merge what they measure into `writer`; returns
    run.json's account of the workers.  Every request sent reaches the writer as exactly one record."""
    addresses = await asyncio.to_thread(load.workers_to_deal)
    measured = await _placed(load, addresses)
    me = clocks.host_identity()
    dealt = deal(len(reqs), len(addresses), pattern.concurrency)
    for k, (d, address, (est, host)) in enumerate(zip(dealt, addresses, measured, strict=False)):
        share = _dealt(address, host, host == me, est, d.rows, d.concurrency)
        load.shares[k] = share
        share_pattern = LoadPattern(
            offsets=None if pattern.offsets is None else pattern.offsets[d.rows],
            concurrency=d.concurrency,
            duration=pattern.duration,
            barrier=pattern.barrier,
            ramp_up=pattern.ramp_up,  # each worker's users rise over the same seconds
        )
        spec = ShareSpec(
            load.run, k, backend, load.target, reqs, d.rows, seed, prompter, share_pattern, grace_s,
            clock.t0 + share.clock.offset_s, info,
        )  # fmt: skip
        per_worker[address] = (share.stats, len(d.rows))
        share.future = load.client.submit(
            run_share, spec, key=f"infermeter-{load.run}-share-{k}", workers=[address], allow_other_workers=False,
            pure=False,
        )  # fmt: skip
    start_at = await _conduct(load, clock, writer, stats, stop, hard_stop)
    workers = await _accounted(load, writer, stop.is_set())
    stats.sent = sum(len(s.sent) for s in load.shares.values())
    return Distributed(
        engine=f"dask.distributed {_version()}",
        cluster=load.cluster,
        dealing=OPEN_DEALING if pattern.concurrency is None else CLOSED_DEALING,
        start_at_clock=start_at,
        workers=workers,
    )


OPEN_DEALING = (
    "open loop: request i to worker i mod W, each sent at its own scheduled time from a start instant shared by every "
    "worker"
)
CLOSED_DEALING = (
    "closed loop: the concurrency's slots dealt to the workers in turn, request i to the worker holding slot i mod C"
)


async def _placed(load: ClusterLoad, addresses: list[str]) -> list[tuple[clocks.Estimate, str]]:
    """Each worker's clock and host; a target on this machine's loopback is refused when a worker is elsewhere."""
    measured = [await asyncio.to_thread(clocks.measure, load.client, a) for a in addresses]
    url = load.target.base_url
    if _loopback(url):
        me = clocks.host_identity()
        remote = [a for a, (_, host) in zip(addresses, measured, strict=True) if host != me]
        if remote:
            raise UserError(
                f"the target {url} is on this machine's loopback, which the workers on other hosts "
                f"({', '.join(remote)}) cannot reach: give a --url they can reach"
            )
    return measured


def _dealt(
    address: str, host: str, same: bool, est: clocks.Estimate, rows: np.ndarray, concurrency: int | None
) -> Dealt:
    """The coordinator's record of a share: a worker on this host (`same`) shares its clock (zero offset)."""
    return Dealt(
        address, host.split("/")[0], same, est if not same else clocks.Estimate(0.0, est.rtt_s),
        np.asarray([ids.request_id(ids.MEASURED, int(i)) for i in rows]), concurrency,
    )  # fmt: skip


async def _conduct(
    load: ClusterLoad,
    clock: RunClock,
    writer: RunWriter,
    stats: LiveStats,
    stop: asyncio.Event,
    hard_stop: asyncio.Event,
) -> float | None:
    """Drain the workers until every share finished or died: the start instant agreed once all are ready, a stop
    passed on; returns the start instant (None: never started)."""
    start_at: float | None = None
    while True:
        command = "hard" if hard_stop.is_set() else "stop" if stop.is_set() else f"start:{start_at}" if start_at else ""
        await asyncio.to_thread(_check_alive, load)
        reports = await asyncio.to_thread(_drain_all, load, command)
        _take(load, reports, writer, stats)
        live = [s for s in load.shares.values() if s.died is None]
        if start_at is None and live and all(s.ready for s in live) and not stop.is_set():
            start_at = clock.now() + START_LEAD_S + 2 * max(s.clock.rtt_s for s in live)
        if all(s.finished or s.died for s in load.shares.values()):
            return start_at
        await asyncio.sleep(POLL_S)


async def _accounted(load: ClusterLoad, writer: RunWriter, stopped: bool) -> list[WorkerShare]:
    """run.json's line for each share (each live worker's clock measured again), and the workers' state dropped."""
    after = {}
    for s in load.shares.values():
        if s.died is None:
            with contextlib.suppress(Exception):
                after[s.worker] = (await asyncio.to_thread(clocks.measure, load.client, s.worker))[0]
    workers = [_account(s, writer, after.get(s.worker), stopped) for s in load.shares.values()]
    with contextlib.suppress(Exception):
        await asyncio.to_thread(load.client.run, forget, load.run, on_error="ignore")
    return workers


def _version() -> str:
    import distributed

    return str(distributed.__version__)


def _drain_all(load: ClusterLoad, command: str) -> dict[str, list[Report] | BaseException]:
    """Every live worker's reports (or why it did not answer), by address."""
    addresses = [s.worker for s in load.shares.values() if s.died is None and not s.finished]
    if not addresses:
        return {}
    try:
        got = load.client.run(drain, load.run, command, workers=addresses, on_error="return")
    except Exception as exc:  # the scheduler itself went away: every remaining worker is lost
        return {a: exc for a in addresses}
    return {a: got.get(a, RuntimeError("the worker did not answer")) for a in addresses}


def _take(
    load: ClusterLoad, reports: dict[str, list[Report] | BaseException], writer: RunWriter, stats: LiveStats
) -> None:
    """Write what the workers measured into the run directory, and update the live figures."""
    by_worker = {s.worker: s for s in load.shares.values()}
    for address, got in reports.items():
        share = by_worker[address]
        if isinstance(got, BaseException):
            share.misses += 1  # a worker busy for a moment is not dead: only one that stays silent
            if share.misses >= MISSES:
                share.died = share.died or f"died: the worker stopped answering ({type(got).__name__}: {got})"
            continue
        share.misses = 0
        for rep in got:
            _apply(share, rep, writer, stats)
    stats.sent = sum(len(s.sent) for s in load.shares.values())


def _apply(share: Dealt, rep: Report, writer: RunWriter, stats: LiveStats) -> None:
    share.ready, share.journal = rep.ready, rep.journal
    for e in np.frombuffer(rep.sent, dtype=LEDGER_DTYPE):
        share.sent[int(e["request_id"])] = tuple(e)
        writer.sent(int(e["request_id"]), float(e["scheduled_at"]), int(e["input_tokens"]), int(e["max_tokens"]))
    if rep.records:
        table = pa.ipc.open_stream(pa.py_buffer(rep.records)).read_all()
        _merge(share, table, writer, stats)
    share.stats.sent, share.stats.done, share.stats.failed = rep.stats[0], rep.stats[1], rep.stats[2]
    if rep.finished:
        share.finished = True
        if rep.error:
            share.died = f"failed: {rep.error}"


def _merge(share: Dealt, table: pa.Table, writer: RunWriter, stats: LiveStats) -> None:
    """Append records not seen before (a journal read after a death may repeat streamed ones)."""
    rid = table.column("request_id").to_numpy()
    fresh = np.asarray([int(i) not in share.recorded for i in rid], dtype=bool)
    if not fresh.all():
        table = table.filter(pa.array(fresh))
        rid = rid[fresh]
    if not len(rid):
        return
    share.recorded.update(int(i) for i in rid)
    try:
        writer.extend(table)
    except UserError:  # the run directory failed (the writer stops the run): keep them for the summary
        writer.unwritten.extend(table_to_records(table))
    ok = pc.equal(table.column("status"), "ok").to_numpy(zero_copy_only=False)
    times = table.column("token_times").combine_chunks()
    starts, lengths = times.offsets.to_numpy()[:-1], pc.list_value_length(times).to_numpy(zero_copy_only=False)
    values = times.values.to_numpy()
    has = ok & (lengths > 0)
    ttfts = values[starts[has]] - table.column("submitted_at").to_numpy()[has]
    stats.done += len(rid)
    stats.failed += int(np.sum(~ok))
    stats.ttfts.extend(ttfts)
    share.stats.ttfts.extend(ttfts)


def _check_alive(load: ClusterLoad) -> None:
    """A share whose task failed or whose worker left the cluster is dead; its future is cancelled (a pinned task
    would wait for its worker forever)."""
    present = set(load.client.scheduler_info()["workers"])
    for s in load.shares.values():
        if s.died or s.finished or s.future is None:
            continue
        if s.future.status == "error":
            exc = s.future.exception()
            killed = type(exc).__name__ == "KilledWorker"
            s.died = "died: its process ended (killed or crashed)" if killed else f"failed: {type(exc).__name__}: {exc}"
        elif s.future.status == "cancelled" or s.worker not in present:
            s.absent += 1  # the scheduler's view may lag a moment: only a worker gone for MISSES checks is dead
            if s.absent >= MISSES:
                why = "its task was cancelled" if s.future.status == "cancelled" else "it left the cluster"
                s.died = f"died: {why}"
        else:
            s.absent = 0
        if s.died:
            s.future.cancel()


def _account(share: Dealt, writer: RunWriter, after: clocks.Estimate | None, stopped: bool) -> WorkerShare:
    """run.json's line for a share; a dead share's requests accounted for: its journal's records (when this
    process can read it), a "cancelled: outcome not recorded" record for each sent without one, the rest not sent."""
    if share.died is not None:
        if share.journal is not None:
            with contextlib.suppress(Exception):
                table = read_records(Path(share.journal))
                for e in table.select(["request_id", "scheduled_at", "input_tokens", "max_tokens"]).to_pylist():
                    share.sent.setdefault(int(e["request_id"]), tuple(e.values()))
                _merge(share, table, writer, LiveStats())
        entries = np.array(list(share.sent.values()), dtype=LEDGER_DTYPE) if share.sent else np.empty(0, LEDGER_DTYPE)
        lost = unrecorded(entries, share.recorded, who=f"the worker {share.worker}")
        for rec in lost:
            writer.append(rec)
            share.recorded.add(rec.request_id)
    missing = [int(i) for i in share.ids if int(i) not in share.sent]
    outcome = share.died or ("stopped" if stopped and missing else "finished")
    return WorkerShare(
        worker=share.worker, host=share.host, requests=len(share.ids), concurrency=share.concurrency,
        sent=len(share.sent), recorded=len(share.recorded), not_sent=len(missing), not_sent_ids=id_ranges(missing),
        outcome=outcome, clock=clocks.placed(share.clock, after, share.same_host),
    )  # fmt: skip


def worker_notes(block: Distributed) -> list[str]:
    """run.json's notes on workers that died or were stopped: never a silently dropped request."""
    notes = []
    for w in block.workers:
        if w.outcome == "finished":
            continue
        lost = (
            f"; {w.not_sent} of its {w.requests} requests were not sent (run.json: distributed.workers)"
            if w.not_sent
            else ""
        )
        notes.append(f"worker {w.worker} on {w.host}: {w.outcome} after sending {w.sent} requests{lost}")
    return notes
