"""Soak: the emulator at twice its capacity, then at half of it, watching records, memory and descriptors.

Capacity is measured first, unless --capacity gives it: a closed loop at --capacity-concurrency for
--capacity-seconds, its capacity the least-squares slope of completions over the last two thirds (the engine
model's own figure is printed beside it).  Then one open-loop run, journaled into a run directory like a real run,
sends at --high x capacity for --phase-seconds (the emulator's queue builds up, one open connection per waiting
request) and at --low x capacity for as long (it drains), and waits for every request.  The emulator runs in its
own process, pinned to its own core as the CLI does; the client is this process, on uvloop.  RSS, descriptors,
in-flight and the emulator's queue gauges are sampled every --sample-interval seconds.

Targets: every request sent has exactly one record (sent = recorded = rows in records.parquet, same ids); the
emulator's vllm:num_requests_waiting / _running and the client's in-flight count are back to 0; descriptors of
both processes return to their pre-load count once idle keep-alive connections close (aiohttp's 15 s timeout);
RSS does not rise after the in-flight peak while the load falls (a per-request leak would); idle RSS after the
drain is printed against the pre-load value and the peak's excursion.  Allocators keep most of a peak's memory,
so one soak cannot tell that from a leak by the idle figure: --repeat 2 soaks again on the same emulator, and the
same load must not leave more memory behind the second time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import gc
import math
import os
import resource
import shutil
import tempfile
import time
from array import array
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import numpy as np
import psutil
import pyarrow as pa

from infermeter.client import ClientConfig, OpenAIClient, PreparedRequest
from infermeter.client.server_metrics import MetricsSeries
from infermeter.emulator import EmulatorConfig, emulator_process
from infermeter.load import LiveStats, LoadPattern, drive
from infermeter.process_limits import raise_open_files_limit
from infermeter.records import RequestRecord, RunClock, RunInfo, RunWriter, read_records
from infermeter.run_info import Load, Sut, Warmup, WorkloadDeclaration
from infermeter.sim.simulator import simulate
from infermeter.tokenizers import REFERENCE, resolve_tokenizer
from infermeter.workload import ArrivalSpec, arrival_offsets, ids
from infermeter.workload.prompts import ExactPrompter
from infermeter.workload.spec import Requests

PROMPTS = ExactPrompter(resolve_tokenizer(REFERENCE))  # exact lengths under cl100k_base, as the emulator counts

MB = 1024 * 1024
MODEL = "infermeter-emulator"
CYCLE_IDS = 10**7  # each --repeat cycle takes request ids (hence prompts) from its own part of the measured range


# ----- process probes


def vm_hwm(pid: int) -> int:
    """Peak resident set size (VmHWM) of a live process, in bytes: the kernel's own high-water mark."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def tcp_states(proc: psutil.Process, port: int) -> str:
    """The process's TCP sockets to or from the emulator's port, counted by state (CLOSE_WAIT would be a leak)."""
    try:
        conns = proc.net_connections(kind="tcp")
    except (psutil.Error, OSError) as exc:
        return f"unavailable ({type(exc).__name__})"
    states = Counter(
        c.status for c in conns if (c.laddr and c.laddr.port == port) or (c.raddr and c.raddr.port == port)
    )
    return ", ".join(f"{k} {v}" for k, v in sorted(states.items())) or "none"


@dataclass
class Sample:
    """Both processes and both sides of the queue at one moment of the run clock."""

    t: float
    sent: int
    in_flight: int
    tasks: int
    client_rss: int
    client_fds: int
    emu_rss: int
    emu_fds: int
    waiting: float = math.nan
    running: float = math.nan


class Probe:
    """Reads RSS and open descriptors of the client (this process) and of the emulator.

    RSS comes from /proc/<pid>/statm files opened once, so it can still be read when a process runs out of
    descriptors (then its descriptor count reads -1)."""

    def __init__(self, emu_pid: int) -> None:
        self.client = psutil.Process(os.getpid())
        self.emu = psutil.Process(emu_pid)
        self._statm = {pid: os.open(f"/proc/{pid}/statm", os.O_RDONLY) for pid in (self.client.pid, emu_pid)}
        self._page = os.sysconf("SC_PAGE_SIZE")

    def rss(self, pid: int) -> int:
        """Resident bytes (0 once the process is gone)."""
        try:
            return int(os.pread(self._statm[pid], 256, 0).split()[1]) * self._page
        except (OSError, IndexError, ValueError):
            return 0

    @staticmethod
    def fds(proc: psutil.Process) -> int:
        """Open descriptors; -1 when they cannot be counted (the process is gone, or this one has none left)."""
        try:
            return proc.num_fds()
        except (psutil.Error, OSError):
            return -1

    def read(self) -> tuple[int, int, int, int]:
        """(client RSS, client fds, emulator RSS, emulator fds); only /proc reads, cheap enough every second."""
        return self.rss(self.client.pid), self.fds(self.client), self.rss(self.emu.pid), self.fds(self.emu)

    def peaks(self) -> tuple[int, int]:
        """(client, emulator) VmHWM so far (0 when it cannot be read)."""
        out = []
        for pid in (self.client.pid, self.emu.pid):
            try:
                out.append(vm_hwm(pid))
            except OSError:
                out.append(0)
        return out[0], out[1]

    def close(self) -> None:
        """Close the statm files."""
        for fd in self._statm.values():
            os.close(fd)


async def engine_gauges(session: aiohttp.ClientSession, url: str) -> tuple[float, float]:
    """(waiting, running) from the emulator's Prometheus /metrics, parsed with the project's scraper code."""
    try:
        async with session.get(url.rstrip("/") + "/metrics") as r:
            text = await r.text()
    except (aiohttp.ClientError, TimeoutError):
        return math.nan, math.nan
    series = MetricsSeries()
    series.add(0.0, text)
    out = []
    for role in ("waiting", "running"):
        s = series.series(role)
        out.append(float(s[2][-1]) if s is not None else math.nan)
    return out[0], out[1]


class Sampler:
    """Samples both processes every `interval` seconds in a background task; /proc reads go to a thread so the
    send loop only pays for a scheduling hop, and a slow /metrics reply delays the next sample, never a send."""

    def __init__(
        self,
        probe: Probe,
        session: aiohttp.ClientSession,
        url: str,
        clock: RunClock,
        stats: LiveStats,
        interval: float,
    ) -> None:
        self.probe, self.session, self.url, self.clock, self.stats = probe, session, url, clock, stats
        self.interval = interval
        self.samples: list[Sample] = []
        self._task: asyncio.Task[None] | None = None

    async def take(self) -> Sample:
        """One sample now (also used outside the loop: before the load, after the drain, once settled)."""
        t = self.clock.now()
        sent, in_flight, tasks = self.stats.sent, self.stats.in_flight, len(asyncio.all_tasks())
        crss, cfds, erss, efds = await asyncio.to_thread(self.probe.read)
        waiting, running = await engine_gauges(self.session, self.url)
        return Sample(t, sent, in_flight, tasks, crss, cfds, erss, efds, waiting, running)

    async def _loop(self) -> None:
        next_at = self.clock.now()
        while True:
            self.samples.append(await self.take())
            next_at += self.interval
            await asyncio.sleep(max(next_at - self.clock.now(), 0.0))

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


# ----- capacity


def model_capacity(config: EmulatorConfig, input_tokens: int, output_tokens: int, n: int = 3000) -> float:
    """Requests/s of the engine model alone (simulated, all requests queued at once), scaled by the speed factor."""
    reqs = Requests(
        request_class=np.array([""] * n, dtype=object),
        input_tokens=np.full(n, input_tokens, dtype=np.int64),
        output_tokens=np.full(n, output_tokens, dtype=np.int64),
        prefix_id=np.full(n, -1, dtype=np.int64),
        prefix_tokens=np.zeros(n, dtype=np.int64),
    )
    out = simulate(reqs, config.engine)
    return n / out.end_time * config.speed


def prepared(base: int, n: int, input_tokens: int, output_tokens: int) -> Iterator[PreparedRequest]:
    """Requests built lazily as the driver asks for them (as `infermeter run` does): prompts never pile up."""
    for i in range(n):
        rid = ids.request_id(base, i)
        yield PreparedRequest(rid, PROMPTS.build(input_tokens, rid), input_tokens, output_tokens)


async def measure_capacity(url: str, args: argparse.Namespace) -> tuple[float, str]:
    """Closed loop at high concurrency for --capacity-seconds with its own client (closed afterwards); capacity is
    the completion rate over the last two thirds of the window, after the batch filled."""
    clock = RunClock()
    client = OpenAIClient(ClientConfig(url, model=MODEL), clock)
    records: list[RequestRecord] = []
    n = args.capacity_concurrency * 50 + 1000  # more than the window can take; the duration ends it
    pattern = LoadPattern(concurrency=args.capacity_concurrency, duration=args.capacity_seconds)
    reqs = prepared(ids.WARMUP, n, args.input_tokens, args.output_tokens)
    await drive(client, reqs, pattern, records.append, grace_s=5.0)
    await client.close()
    ok = [r for r in records if r.status == "ok" and r.token_times]
    if not ok:
        raise SystemExit(f"capacity measurement failed: no request succeeded ({Counter(r.status for r in records)})")
    # completions of equal-length requests come in waves (a batch finishes together); the least-squares slope of
    # their count over time is exact for evenly spaced waves as for a smooth flow, where counting in a window is not
    t0 = min(r.submitted_at for r in ok)
    lo, hi = t0 + args.capacity_seconds / 3, t0 + args.capacity_seconds
    ends = np.sort([r.token_times[-1] for r in ok])
    ends = ends[(ends >= lo) & (ends <= hi)]
    if len(ends) < 2 or np.ptp(ends) <= 0:
        raise SystemExit("capacity measurement failed: too few completions; raise --capacity-seconds")
    rate = float(np.polyfit(ends, np.arange(len(ends)), 1)[0])
    how = (
        f"measured: closed loop, concurrency {args.capacity_concurrency}, {args.capacity_seconds:g} s, "
        f"{len(records)} requests ({len(ok)} ok); slope of the {len(ends)} completions in "
        f"[{lo - t0:.1f}, {hi - t0:.1f}] s"
    )
    return rate, how


# ----- the soak


@dataclass
class Seal:
    """What `RunWriter.close()` cost the client: it reads the journal back and writes records.parquet."""

    seconds: float
    rows: int
    table_bytes: int
    rss_before: int
    rss_after: int
    rss_released: int  # after dropping the table and asking Arrow's pool to return unused memory


@dataclass
class SoakResult:
    """Everything one soak measured, for the report."""

    capacity: float
    capacity_how: str
    schedule: str
    run_dir: Path
    samples: list[Sample]
    before: Sample
    after_drain: Sample
    settled: Sample
    settle_s: float
    after_close: tuple[int, int, int, int]
    drained_gauges: tuple[float, float]
    drain_wait_s: float
    tcp: dict[str, tuple[str, str]]
    load_peaks: tuple[int, int]  # VmHWM read before the seal
    peaks: tuple[int, int]  # VmHWM at the end
    seal: Seal
    sent_ids: np.ndarray
    record_ids: np.ndarray
    statuses: Counter[str]
    errors: Counter[str]
    last_token: np.ndarray
    disk_rows: int
    leftovers: list[str]
    writer_count: int
    stats: LiveStats
    phase_end: float
    drive_end: float
    stopped: bool
    notes: list[str] = field(default_factory=list)


async def wait_idle(probe: Probe, limit_s: float, target: Callable[[int, int], bool]) -> float:
    """Poll both processes every 0.5 s until `target(client_fds, emu_fds)` holds or `limit_s` passes; the wait."""
    t0 = time.monotonic()
    while True:
        now = await asyncio.to_thread(probe.read)
        if target(now[1], now[3]) or time.monotonic() - t0 >= limit_s:
            return time.monotonic() - t0
        await asyncio.sleep(0.5)


async def sockets(probe: Probe, port: int) -> tuple[str, str]:
    """TCP states of both processes, after a moment for closes the loop has scheduled (the last scrape's)."""
    await asyncio.sleep(0.2)
    return tcp_states(probe.client, port), tcp_states(probe.emu, port)


def release_free_memory() -> None:
    """Hand the client's free memory back to the OS (gc, Arrow's pool, glibc's malloc_trim), so RSS at the end of a
    soak counts what is still in use rather than what allocators cache: live objects, a leak's included, stay."""
    gc.collect()
    pa.default_memory_pool().release_unused()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def seal(writer: RunWriter, probe: Probe) -> tuple[pa.Table, Seal]:
    """Close the writer, timing it and reading the client's RSS around it."""
    rss0 = probe.rss(probe.client.pid)
    t0 = time.perf_counter()
    table = writer.close()
    took = time.perf_counter() - t0
    return table, Seal(took, table.num_rows, table.nbytes, rss0, probe.rss(probe.client.pid), 0)


async def find_capacity(url: str, args: argparse.Namespace) -> tuple[float, str]:
    """--capacity, or the closed-loop measurement; with the engine model's own figure beside it."""
    if args.capacity is not None:
        capacity, how = args.capacity, "given with --capacity"
    else:
        capacity, how = await measure_capacity(url, args)
    config = EmulatorConfig(speed=args.speed, prefix_caching=not args.no_prefix_caching)
    model = model_capacity(config, args.input_tokens, args.output_tokens)
    return capacity, how + f"; the engine model alone would serve {model:.1f} req/s at these lengths"


async def soak_all(url: str, emu_pid: int, args: argparse.Namespace) -> list[SoakResult]:
    """Capacity once, then --repeat soaks against the same emulator."""
    probe = Probe(emu_pid)
    fresh = probe.read()
    capacity, how = await find_capacity(url, args)
    # the measurement's client is closed: wait for the emulator to close its side too, so the soak starts clean
    await wait_idle(probe, 10.0, lambda c, e: e <= fresh[3])
    root = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="infermeter-soak-"))
    results = []
    for cycle in range(args.repeat):
        run_dir = root / (f"run-{cycle + 1}" if args.repeat > 1 else "run")
        results.append(await soak(url, probe, args, capacity, how, cycle, run_dir))
    probe.close()
    return results


async def soak(
    url: str, probe: Probe, args: argparse.Namespace, capacity: float, how: str, cycle: int, run_dir: Path
) -> SoakResult:
    """One soak: the two phases into `run_dir`, then the drain, the seal and the idle keep-alives closing.  Each
    cycle sends prompts of its own (an id range of its own), so the emulator's prefix cache cannot make it cheaper.
    """
    port = int(url.rsplit(":", 1)[1].split("/")[0])

    # the schedule: open loop, high then low, each phase bounded in count and time
    high, low = args.high * capacity, args.low * capacity
    parts = []
    for k, (rate, start) in enumerate(((high, 0.0), (low, args.phase_seconds))):
        n = int(rate * args.phase_seconds * 1.5) + 50
        off = arrival_offsets(ArrivalSpec(kind=args.arrival, rate=rate), n, args.seed + k)
        parts.append(off[off < args.phase_seconds] + start)
    offsets = np.concatenate(parts)
    n_planned = len(offsets)
    schedule = (
        f"{args.arrival} {high:.1f} req/s ({args.high:g}x) for {args.phase_seconds:g} s = {len(parts[0])} requests, "
        f"then {low:.1f} req/s ({args.low:g}x) for {args.phase_seconds:g} s = {len(parts[1])} requests; "
        f"{args.input_tokens} prompt / {args.output_tokens} output tokens"
    )
    backlog = max(high - capacity, 0) * args.phase_seconds
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    notes = []
    if backlog + args.capacity_concurrency > 0.8 * limit:
        notes.append(
            f"expected peak backlog ~{backlog:.0f} connections per process is near the descriptor limit {limit}: "
            "expect 'Too many open files'"
        )

    clock = RunClock()
    client = OpenAIClient(ClientConfig(url, model=MODEL), clock)
    info = RunInfo(
        kind="emulated",
        sut=Sut(
            model=MODEL,
            url=url,
            software=f"infermeter emulator, speed x{args.speed:g}",
            prefix_caching="disabled" if args.no_prefix_caching else "enabled",
        ),
        workload=WorkloadDeclaration(name=f"fixed {args.input_tokens} in / {args.output_tokens} out tokens"),
        load=Load(description=f"soak: {schedule} (capacity {capacity:g} req/s)", requests=n_planned),
        warmup=Warmup(done=True, note=f"capacity measurement ({how})"),
        notes=["benchmarks/soak.py"],
    )
    stats = LiveStats()
    sent_ids = array("q")  # 8 bytes a request: the script's own bookkeeping hardly moves the client's RSS

    def on_send(req: PreparedRequest, at: float) -> None:
        sent_ids.append(req.request_id)
        writer.sent(req.request_id, at, req.input_tokens, req.max_tokens)

    metrics_session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(force_close=True), timeout=aiohttp.ClientTimeout(total=5)
    )
    sampler = Sampler(probe, metrics_session, url, clock, stats, args.sample_interval)
    before = await sampler.take()
    tcp = {"before": await sockets(probe, port)}
    writer = RunWriter(run_dir, info)  # after `before`: its journal and ledger are open until the seal
    stop = asyncio.Event()
    phase_end = 2 * args.phase_seconds
    deadline = asyncio.get_running_loop().call_later(phase_end + args.drain_timeout, stop.set)
    sampler.start()
    try:
        await drive(
            client,
            prepared(ids.MEASURED + cycle * CYCLE_IDS, n_planned, args.input_tokens, args.output_tokens),
            LoadPattern(offsets=offsets, duration=phase_end),
            writer.append,
            stats,
            stop,
            grace_s=args.grace_seconds,
            on_send=on_send,
        )
    finally:
        deadline.cancel()
        await sampler.stop()
    drive_end = clock.now()

    # the emulator's queue: abandoned work (if any request was cancelled) may still be finishing
    t0 = time.monotonic()
    while True:
        gauges = await engine_gauges(metrics_session, url)
        if (gauges[0] == 0 and gauges[1] == 0) or time.monotonic() - t0 > 10:
            break
        await asyncio.sleep(0.2)
    drain_wait = time.monotonic() - t0
    after_drain = await sampler.take()
    load_peaks = probe.peaks()
    tcp["after drain"] = await sockets(probe, port)

    # sealing reads the journal back and writes Parquet: a one-off cost at the end, reported on its own
    table, sealed = seal(writer, probe)
    record_ids = table.column("request_id").to_numpy()
    statuses = Counter(table.column("status").to_pylist())
    errors = Counter(e.split(":")[0] for e in table.column("error").to_pylist() if e)
    last_token = np.array([t[-1] for t in table.column("token_times").to_pylist() if t])
    del table
    disk_rows = read_records(run_dir).num_rows
    leftovers = [p.name for p in run_dir.iterdir() if p.name not in ("run.json", "records.parquet")]
    release_free_memory()
    sealed.rss_released = probe.rss(probe.client.pid)

    # idle keep-alive connections close after aiohttp's 15 s keepalive_timeout (checked every 15 s: up to 30 s)
    settle_s = await wait_idle(probe, args.settle_seconds, lambda c, e: c <= before.client_fds and e <= before.emu_fds)
    release_free_memory()  # the closed connections' memory too
    settled = await sampler.take()
    tcp["settled"] = await sockets(probe, port)
    await client.close()
    await metrics_session.close()
    await asyncio.sleep(0.5)  # let the emulator see the closes
    after_close = await asyncio.to_thread(probe.read)
    tcp["client closed"] = await sockets(probe, port)
    return SoakResult(
        capacity=capacity,
        capacity_how=how,
        schedule=schedule,
        run_dir=run_dir,
        samples=sampler.samples,
        before=before,
        after_drain=after_drain,
        settled=settled,
        settle_s=settle_s,
        after_close=after_close,
        drained_gauges=gauges,
        drain_wait_s=drain_wait,
        tcp=tcp,
        load_peaks=load_peaks,
        peaks=probe.peaks(),
        seal=sealed,
        sent_ids=np.frombuffer(sent_ids, dtype=np.int64),
        record_ids=record_ids,
        statuses=statuses,
        errors=errors,
        last_token=last_token,
        disk_rows=disk_rows,
        leftovers=leftovers,
        writer_count=writer.count,
        stats=stats,
        phase_end=phase_end,
        drive_end=drive_end,
        stopped=stop.is_set(),
        notes=notes,
    )


# ----- report


def mb(x: float) -> str:
    """Bytes as MB with one decimal."""
    return f"{x / MB:.1f}"


def signed_mb(x: float) -> str:
    """Bytes as signed MB with one decimal."""
    return f"{x / MB:+.1f}"


class Verdicts:
    """Prints checks as PASS, FAIL or NOTE (a figure to read, not a check) and remembers whether all held."""

    def __init__(self) -> None:
        self.ok = True

    def __call__(self, name: str, ok: bool | None, why: str) -> None:
        self.ok &= ok is not False
        print(f"  {'NOTE' if ok is None else 'PASS' if ok else 'FAIL'}  {name}: {why}")


def report(r: SoakResult, args: argparse.Namespace) -> bool:
    """Print one soak's figures and verdicts; True when every check passed."""
    verdict = Verdicts()

    print(f"\nrun directory: {r.run_dir}")
    for note in r.notes:
        print(f"  note: {note}")

    # records
    dupes = len(r.record_ids) - len(np.unique(r.record_ids))
    missing = np.setdiff1d(r.sent_ids, r.record_ids).size
    extra = np.setdiff1d(r.record_ids, r.sent_ids).size
    print("\nrequests")
    print(
        f"  sent {len(r.sent_ids):,} (driver count {r.stats.sent:,}), recorded {r.writer_count:,} (sink), "
        f"{r.seal.rows:,} in the sealed table, {r.disk_rows:,} in records.parquet on disk"
    )
    print(
        f"  statuses: {dict(r.statuses)}; duplicate ids {dupes}, sent without record {missing}, record never sent "
        f"{extra}; files left besides run.json/records.parquet: {r.leftovers or 'none'}"
    )
    if r.errors:
        print(f"  error reasons: {dict(r.errors.most_common(5))}")
    last = float(r.last_token.max()) if r.last_token.size else math.nan
    stopped = f" (stop set at --drain-timeout, then {args.grace_seconds:g} s of grace before cancelling)" * r.stopped
    print(
        f"  sends ended at {r.phase_end:.1f} s, last token at {last:.1f} s, drive returned at {r.drive_end:.1f} s"
        + stopped
    )
    sl = r.seal
    print(
        f"  sealing the journal into records.parquet: {sl.seconds:.2f} s, client RSS {mb(sl.rss_before)} -> "
        f"{mb(sl.rss_after)} MB (the table it returns is {mb(sl.table_bytes)} MB; the rest is the Parquet writer "
        f"and the allocators' caches), {mb(sl.rss_released)} MB once the table is dropped and free memory is "
        "handed back (gc, Arrow's pool, malloc_trim)"
    )

    # samples
    s = r.samples or [r.before]
    print(f"\nsamples (every {args.sample_interval:g} s; printed about every {args.print_every:g} s)")
    print(
        f"  {'t s':>6} {'phase':>6} {'sent':>7} {'in-flight':>9} {'waiting':>7} {'running':>7} {'tasks':>6}  "
        f"{'client RSS MB':>13} {'fds':>5}  {'emulator RSS MB':>15} {'fds':>5}"
    )

    def row(x: Sample, label: str) -> None:
        print(
            f"  {x.t:6.1f} {label:>6} {x.sent:7,} {x.in_flight:9,} {x.waiting:7.0f} {x.running:7.0f} {x.tasks:6,}  "
            f"{mb(x.client_rss):>13} {x.client_fds:5}  {mb(x.emu_rss):>15} {x.emu_fds:5}"
        )

    def phase(x: Sample) -> str:
        return "high" if x.t < args.phase_seconds else "low" if x.t < r.phase_end else "drain"

    row(r.before, "pre")
    every = max(round(args.print_every / args.sample_interval), 1)
    peak_i = int(np.argmax([x.in_flight for x in s]))
    for i, x in enumerate(s):
        if i % every == 0 or i == peak_i or i == len(s) - 1:
            row(x, phase(x) + ("*" if i == peak_i else ""))
    row(r.after_drain, "idle")
    row(r.settled, "settle")
    print(
        "  (* the sample with the most requests in flight; 'idle' right after the drain, before sealing; 'settle' "
        f"{r.settle_s:.1f} s later, after sealing, once idle keep-alive connections closed)"
    )

    # peaks and descriptors
    peak = s[peak_i]
    print("\npeak RSS (kernel VmHWM; the max of the samples)")

    def hwm(x: int) -> str:
        return f"{mb(x)} MB" if x > 0 else "n/a (unreadable then)"

    print(
        f"  client   {hwm(r.load_peaks[0])} through the load (sampled {mb(max(x.client_rss for x in s))} MB); "
        f"{hwm(r.peaks[0])} including the seal"
    )
    print(f"  emulator {hwm(r.peaks[1])} (sampled {mb(max(x.emu_rss for x in s))} MB)")
    print("\nopen file descriptors             client  emulator")
    print(f"  before the load                {r.before.client_fds:6}  {r.before.emu_fds:8}")
    print(f"  at peak in-flight ({peak.in_flight:,})".ljust(33) + f"{peak.client_fds:6}  {peak.emu_fds:8}")
    print(f"  max sampled                    {max(x.client_fds for x in s):6}  {max(x.emu_fds for x in s):8}")
    print(f"  right after the drain          {r.after_drain.client_fds:6}  {r.after_drain.emu_fds:8}")
    print(f"  {r.settle_s:.1f} s later (keep-alive)".ljust(33) + f"{r.settled.client_fds:6}  {r.settled.emu_fds:8}")
    print(f"  after client.close()           {r.after_close[1]:6}  {r.after_close[3]:8}")
    print("  (during the load the client's count includes the run's journal and ledger, closed by the seal)")
    if any(x.client_fds < 0 or x.emu_fds < 0 for x in [*s, r.after_drain]):
        print("  (-1: not countable then, this process had no descriptor left to open /proc with)")
    print("  TCP sockets on the emulator's port, by state (client | emulator):")
    for k, (c, e) in r.tcp.items():
        print(f"    {k:14} {c} | {e}")

    # RSS at equal load levels: in flight on the way up (high phase) vs on the way down (after the peak)
    up, down = s[: peak_i + 1], [*s[peak_i:], r.after_drain]
    print("\nRSS at equal in-flight levels, on the way up vs on the way down (MB)")
    print(
        f"  {'level':>7} | {'t up':>6} {'in-fl':>6} {'client':>7} {'emu':>7} | {'t down':>6} {'in-fl':>6} "
        f"{'client':>7} {'emu':>7} | {'d client':>8} {'d emu':>7}"
    )
    for frac in (0.0, 0.25, 0.5, 0.75):
        level = frac * peak.in_flight
        a = min([r.before, *up], key=lambda x: abs(x.in_flight - level))
        b = min(down, key=lambda x: abs(x.in_flight - level))
        print(
            f"  {level:7.0f} | {a.t:6.1f} {a.in_flight:6} {mb(a.client_rss):>7} {mb(a.emu_rss):>7} | "
            f"{b.t:6.1f} {b.in_flight:6} {mb(b.client_rss):>7} {mb(b.emu_rss):>7} | "
            f"{signed_mb(b.client_rss - a.client_rss):>8} {signed_mb(b.emu_rss - a.emu_rss):>7}"
        )
    print("  (the way down follows the peak: what allocators kept from it shows here as a constant offset)")

    # verdicts
    print("\nverdict")
    accounted = len(r.sent_ids) == r.stats.sent == r.writer_count == r.seal.rows == r.disk_rows
    verdict(
        "one record per request",
        accounted and not (dupes or missing or extra or r.leftovers),
        f"{len(r.sent_ids):,} sent, {r.writer_count:,} recorded, {r.disk_rows:,} in records.parquet; "
        f"{dupes} duplicates, {missing} missing, {extra} never sent",
    )
    cancelled = r.statuses.get("cancelled", 0)
    gauges, when = r.drained_gauges, f"{r.drain_wait_s:.1f} s after the last response"
    if any(math.isnan(g) for g in gauges):  # /metrics could not be read then (no descriptor left): the next read
        gauges, when = (r.settled.waiting, r.settled.running), f"read only {r.settle_s:.0f} s later"
    verdict(
        "queue drained",
        gauges == (0.0, 0.0) and r.stats.in_flight == 0 and not cancelled,
        f"emulator waiting {gauges[0]:.0f}, running {gauges[1]:.0f} "
        f"({when}); client in flight {r.stats.in_flight}, asyncio tasks "
        f"{r.after_drain.tasks} (before: {r.before.tasks}); {cancelled} cancelled at --drain-timeout",
    )
    for name, b, a, pk in (
        ("client", r.before.client_fds, r.settled.client_fds, peak.client_fds),
        ("emulator", r.before.emu_fds, r.settled.emu_fds, peak.emu_fds),
    ):
        verdict(
            f"{name} descriptors released",
            0 <= a <= b + args.fd_slack,
            f"{b} before, {pk} at the peak, {a} once idle {r.settle_s:.1f} s after the drain "
            f"(allowed +{args.fd_slack})",
        )
    tol = args.rss_tolerance_mb * MB
    after = [*s[peak_i:], r.after_drain]
    done = np.array([x.sent - x.in_flight for x in after], dtype=float)
    for name, get in (("client", lambda x: x.client_rss), ("emulator", lambda x: x.emu_rss)):
        # from the peak on, in flight only falls: no new memory is needed, and a per-request leak shows as a rise
        rss = np.array([get(x) for x in after], dtype=float)
        rise = float(rss.max() - rss[0])
        finished = int(done[-1] - done[0])
        slope = float(np.polyfit(done, rss, 1)[0]) if len(after) > 2 and np.ptp(done) > 0 else 0.0
        verdict(
            f"{name} RSS does not grow while the load falls",
            rise <= tol,
            f"{mb(rss[0])} MB at the peak ({peak.t:.0f} s, {peak.in_flight:,} in flight), at most {mb(rss.max())} MB "
            f"after it ({signed_mb(rise)} MB) while {finished:,} more requests finished; fitted "
            f"{slope:+,.0f} B per finished request (allowed rise {args.rss_tolerance_mb:g} MB)",
        )
        growth = get(r.after_drain) - get(r.before)
        excursion = get(peak) - get(r.before)
        # below the tolerance: back to where it started; up to the peak's excursion: the peak's memory kept by the
        # allocators (a figure, not a failure); beyond it: memory added after the peak, i.e. growth
        kept = growth <= excursion + tol
        why = (
            ""
            if growth <= tol
            else ", so this is the peak's memory kept (--repeat 2 tells it from a leak)"
            if kept
            else ", so it grew after it"
        )
        verdict(
            f"{name} idle RSS after the drain vs before the load",
            True if growth <= tol else None if kept else False,
            f"{mb(get(r.before))} MB before, {mb(get(r.after_drain))} MB idle after the drain ({signed_mb(growth)} MB, "
            f"{growth / max(len(r.sent_ids), 1):,.0f} B per request sent); the peak took it {signed_mb(excursion)} "
            f"MB above the start{why}",
        )
    return verdict.ok


def across(results: list[SoakResult], args: argparse.Namespace) -> bool:
    """Compare the repeats at the same point of each: idle at its end, after its seal, once keep-alives closed.  The
    same load again must not leave more memory behind (the first peak's and the first seal's memory is kept by the
    allocators, so the first repeat's start is not the reference)."""
    verdict = Verdicts()
    tol = args.rss_tolerance_mb * MB
    print(f"\nacross the {len(results)} repeats (same schedule, new prompts; RSS in MB)")
    print(
        f"  {'repeat':>6} {'peak in-fl':>10} | {'client before':>13} {'peak':>7} {'idle':>7} {'end':>7} {'fds':>5} | "
        f"{'emulator before':>15} {'peak':>7} {'idle':>7} {'end':>7} {'fds':>5}"
    )
    for k, r in enumerate(results):
        pk = max(r.samples, key=lambda x: x.in_flight) if r.samples else r.before
        print(
            f"  {k + 1:6} {pk.in_flight:10,} | {mb(r.before.client_rss):>13} {mb(pk.client_rss):>7} "
            f"{mb(r.after_drain.client_rss):>7} {mb(r.settled.client_rss):>7} {r.settled.client_fds:5} | "
            f"{mb(r.before.emu_rss):>15} {mb(pk.emu_rss):>7} {mb(r.after_drain.emu_rss):>7} "
            f"{mb(r.settled.emu_rss):>7} {r.settled.emu_fds:5}"
        )
    print(
        "  (idle: right after the drain, before the seal; end: after the seal, once keep-alives closed and the "
        "client's free memory was handed back)"
    )
    first, last = results[0], results[-1]
    sent = sum(len(r.sent_ids) for r in results[1:])
    for name, get in (("client", lambda x: x.client_rss), ("emulator", lambda x: x.emu_rss)):
        grew = get(last.settled) - get(first.settled)
        verdict(
            f"{name} RSS the same from repeat to repeat",
            grew <= tol,
            f"at the end of repeat 1 {mb(get(first.settled))} MB, of repeat {len(results)} "
            f"{mb(get(last.settled))} MB ({signed_mb(grew)} MB, {grew / max(sent, 1):+,.0f} B per request of the "
            f"later repeats; allowed {args.rss_tolerance_mb:g} MB)",
        )
    return verdict.ok


def main() -> None:
    """Parse the options, start the emulator, soak, report."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--phase-seconds", type=float, default=60.0, help="length of each phase (default 60)")
    parser.add_argument("--speed", type=float, default=1.0, help="the emulator's speed factor")
    parser.add_argument("--high", type=float, default=2.0, help="first phase's rate, times capacity")
    parser.add_argument("--low", type=float, default=0.5, help="second phase's rate, times capacity")
    parser.add_argument("--capacity", type=float, default=None, help="req/s; skips the measurement")
    parser.add_argument("--capacity-seconds", type=float, default=10.0, help="closed-loop measurement length")
    parser.add_argument("--capacity-concurrency", type=int, default=512, help="closed-loop concurrency")
    parser.add_argument("--input-tokens", type=int, default=128, help="prompt length of every request")
    parser.add_argument("--output-tokens", type=int, default=64, help="max_tokens of every request (ignore_eos)")
    parser.add_argument("--arrival", default="poisson", choices=["poisson", "constant"], help="open-loop process")
    parser.add_argument("--seed", type=int, default=7, help="seed of the arrival times")
    parser.add_argument("--no-prefix-caching", action="store_true", help="turn the emulator's prefix cache off")
    parser.add_argument("--sample-interval", type=float, default=1.0, help="seconds between samples")
    parser.add_argument("--print-every", type=float, default=5.0, help="seconds between printed samples")
    parser.add_argument(
        "--drain-timeout",
        type=float,
        default=None,
        help="seconds after the last send before in-flight requests are cancelled (default: phase-seconds + 30)",
    )
    parser.add_argument("--grace-seconds", type=float, default=5.0, help="after --drain-timeout, before cancelling")
    parser.add_argument("--settle-seconds", type=float, default=40.0, help="wait for idle keep-alives to close")
    parser.add_argument("--fd-slack", type=int, default=2, help="descriptors allowed above the pre-load count")
    parser.add_argument("--rss-tolerance-mb", type=float, default=16.0, help="RSS rise allowed, MB")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="soak this many times on one emulator and compare (tells a leak from "
        "memory an allocator kept from the first peak)",
    )
    parser.add_argument("--out", default=None, help="run directory (default: a temporary one, removed after)")
    args = parser.parse_args()
    if args.drain_timeout is None:
        args.drain_timeout = args.phase_seconds + 30.0
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:  # pragma: no cover
        runner = asyncio.run
    limit = raise_open_files_limit()
    print(
        f"descriptor limit {limit}; emulator speed x{args.speed:g}; {os.cpu_count()} CPUs (client and emulator "
        "pinned apart)"
    )
    config = EmulatorConfig(speed=args.speed, prefix_caching=not args.no_prefix_caching)
    with emulator_process(config, pin_cpus=True) as emu:
        results = runner(soak_all(emu.url, emu.process.pid, args))
        alive = emu.process.poll() is None
    first = results[0]
    print(f"capacity {first.capacity:.1f} req/s ({first.capacity_how})")
    print(f"schedule: {first.schedule}")
    if not alive:
        print(f"the emulator exited during the soak (code {emu.process.returncode})")
    passed = alive
    for k, r in enumerate(results):
        if len(results) > 1:
            print(f"\n===== repeat {k + 1} of {len(results)}")
        passed &= report(r, args)
    if len(results) > 1:
        passed &= across(results, args)
    print(f"\n{'all checks passed' if passed else 'some checks FAILED'}")
    if args.out is None:
        shutil.rmtree(first.run_dir.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
