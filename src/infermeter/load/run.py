"""One benchmark run end to end: workload -> prompts -> warm-up -> load -> run directory -> summary."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import orjson

from infermeter.client.openai_sse import Api, ClientConfig, OpenAIClient, PreparedRequest
from infermeter.client.urls import endpoint
from infermeter.errors import UserError
from infermeter.load.driver import LiveStats, LoadPattern, drive
from infermeter.metrics import RecordColumns, summarize
from infermeter.metrics.fluidity import parse_deadlines
from infermeter.process_limits import raise_open_files_limit
from infermeter.records import (
    RequestRecord,
    RunClock,
    RunInfo,
    RunWriter,
    claim_run_dir,
    disk_trouble,
    write_run_info,
    write_summary,
)
from infermeter.secrets import redact_url
from infermeter.workload import ids
from infermeter.workload.arrivals import ArrivalSpec
from infermeter.workload.build import build_requests
from infermeter.workload.prompts import ExactPrompter, build_prompt
from infermeter.workload.spec import Requests
from infermeter.workload.tokenizers import TiktokenTokenizer, resolve_tokenizer
from infermeter.workload.tokenizers import declaration as tokenizer_declaration

WARMUP_MIN_REQUESTS = 100  # draft 4.5.1
WARMUP_MIN_TOKENS = 10_000
PROBE_INPUT, PROBE_OUTPUT = 32, 16
PROBE_STABLE = 0.10  # 4.5.2: less than 10% variation across consecutive probes


@dataclass
class RunOptions:
    url: str
    out: Path
    api: Api = "completions"
    model: str = ""
    api_key_env: str = "OPENAI_API_KEY"
    workload: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    requests: int | None = None
    duration: float | None = None
    arrivals: ArrivalSpec | None = None
    concurrency: int | None = None
    barrier: bool = False
    warmup: int | None = -1  # -1: the draft's rule; 0 / None: off; N: exactly N requests
    seed: int = 42
    slo: dict[str, float] = field(default_factory=dict)
    grace_s: float = 30.0
    connect_timeout: float = 10.0
    first_token_timeout: float = 120.0
    total_timeout: float = 900.0
    ignore_eos: bool = True
    sut: dict[str, Any] = field(default_factory=dict)
    progress: bool = True
    deadlines: str | None = None
    tokenizer: str | None = None  # exact-length prompts under this tokenizer (and its chat template for chat)
    scrape_interval: float = 1.0  # server /metrics; 0 turns scraping off
    telemetry_interval: float = 1.0  # host telemetry; 0 turns it off
    gpu_price_per_hour: float | None = None
    gpus: int | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)

    def request_count(self) -> int:
        if self.requests is not None:
            return self.requests
        if self.duration is None:
            return 1000
        if self.arrivals is not None and self.arrivals.rate is not None:
            return int(self.arrivals.rate * self.duration * 1.2) + 100
        return 100_000  # closed loop bounded by time: more than it can send


@dataclass
class RunResult:
    """What a run left: its directory, its summary, and why it ended early (None when it ran as planned)."""

    run_dir: Path
    summary: dict[str, Any]
    stopped: str | None = None  # "interrupted" (SIGINT), "terminated" (SIGTERM) or why the directory failed
    disk_failure: str | None = None


def prepared(
    requests: Requests, seed: int, id_base: int = ids.MEASURED, prompter: ExactPrompter | None = None
) -> Iterator[PreparedRequest]:
    """Prompts built lazily, one per request, as the driver asks for them: exact-length under a tokenizer when
    one is given, else whole words (one token each to the emulator).  Ids come from the range at `id_base`."""
    prefixes: dict[int, str] = {}
    raw = ExactPrompter(prompter.tok, chat=False, seed=seed) if prompter is not None else None
    for i in range(len(requests)):
        rid, n = ids.request_id(id_base, i), int(requests.input_tokens[i])
        pid, ptok = int(requests.prefix_id[i]), int(requests.prefix_tokens[i])
        if prompter is not None and raw is not None:
            if pid >= 0 and pid not in prefixes:
                prefixes[pid] = raw.build_prefix(max(ptok, 1), pid)
            text = prompter.build(n, rid, prefixes.get(pid, ""))
        else:
            text = build_prompt(rid, n, pid, ptok, seed)
        yield PreparedRequest(rid, text, n, int(requests.output_tokens[i]), str(requests.request_class[i]))


async def discover_model(config: ClientConfig) -> str:
    """The first model the server lists, for runs that do not name one (asked with the run's credentials)."""
    url = endpoint(config.base_url, "/v1/models")
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as s,
            s.get(url, headers=config.headers()) as r,
        ):
            if r.status != 200:
                hint = "check --url and the API key, or give --model"
                raise UserError(f"could not list models at {redact_url(url)} (HTTP {r.status}): {hint}")
            data = orjson.loads(await r.read())
            return str(data["data"][0]["id"])
    except (aiohttp.ClientError, TimeoutError, KeyError, IndexError, orjson.JSONDecodeError, TypeError) as exc:
        raise UserError(f"could not list models at {redact_url(url)} ({type(exc).__name__}): give --model") from None


async def _probe(client: OpenAIClient, n: int) -> float | None:
    rid = ids.request_id(ids.PROBE, n)
    rec = await client.send(
        PreparedRequest(rid, build_prompt(rid, PROBE_INPUT), PROBE_INPUT, PROBE_OUTPUT), client.clock.now()
    )
    if rec.status != "ok" or not rec.token_times:
        return None
    return rec.token_times[-1] - rec.submitted_at


async def warm_up(
    client: OpenAIClient,
    opts: RunOptions,
    pattern: LoadPattern,
    stats: LiveStats,
    prompter: ExactPrompter | None = None,
    stop: asyncio.Event | None = None,
    hard_stop: asyncio.Event | None = None,
) -> dict[str, Any]:
    """Draft 4.5: probe, >= 100 requests and >= 10,000 output tokens under the run's load, drain, probe until
    stable.  Nothing of it reaches the records.  A stop ends it early (its block says so)."""
    stop = stop or asyncio.Event()
    t0 = time.perf_counter()
    before = await _probe(client, 0)
    if opts.warmup == -1:
        n = WARMUP_MIN_REQUESTS
        reqs, _ = _workload(opts, n, opts.seed + 1)
        while int(reqs.output_tokens.sum()) < WARMUP_MIN_TOKENS and n < 100_000:
            n *= 2
            reqs, _ = _workload(opts, n, opts.seed + 1)
        # the shortest head of the workload with both 100 requests and 10,000 output tokens
        enough = int(np.searchsorted(np.cumsum(reqs.output_tokens), WARMUP_MIN_TOKENS)) + 1
        reqs = reqs.head(max(WARMUP_MIN_REQUESTS, enough))
    else:
        reqs, _ = _workload(opts, int(opts.warmup or 0), opts.seed + 1)
    warm_pattern = LoadPattern(
        offsets=reqs.arrival_s if pattern.offsets is not None else None,
        concurrency=pattern.concurrency,
        barrier=False,
    )
    records: list[RequestRecord] = []
    warm_requests = list(prepared(reqs, opts.seed + 1, id_base=ids.WARMUP, prompter=prompter))
    await drive(client, warm_requests, warm_pattern, records.append, stats, stop, grace_s=5.0, hard_stop=hard_stop)
    probes: list[float] = []
    for k in range(1, 11):
        if stop.is_set():
            break
        p = await _probe(client, k)
        if p is not None:
            probes.append(p)
        last = probes[-3:]
        if len(last) == 3 and max(last) <= (1 + PROBE_STABLE) * min(last):
            break
    last = probes[-3:]
    return {
        "done": not stop.is_set(),
        "requests": len(records),
        "failed": sum(r.status != "ok" for r in records),
        "output_tokens": sum(len(r.token_times) for r in records),
        "queue_drained": not stop.is_set(),
        "probe_before_s": before,
        "probes_after_s": probes,
        "stable": len(last) == 3 and max(last) <= (1 + PROBE_STABLE) * min(last),
        "seconds": time.perf_counter() - t0,
    }


def _workload(opts: RunOptions, n: int, seed: int) -> tuple[Requests, dict[str, Any]]:
    return build_requests(
        n,
        seed,
        workload=opts.workload,
        input_tokens=opts.input_tokens,
        output_tokens=opts.output_tokens,
        arrivals=opts.arrivals,
    )


def choose_itl_option(cols: RecordColumns) -> str:
    """Draft B.2.1: server times when every successful stream has them (C); single-token chunks dominating
    (> 90%) make direct timing exact (B); otherwise time between chunks (A)."""
    ok = cols.ok & (cols.tokens.lengths > 0)
    if ok.any() and np.all(cols.has_server[ok] & (cols.server.lengths[ok] == cols.tokens.lengths[ok])):
        return "C"
    per_chunk = cols.chunk_tokens.values[cols.chunk_tokens.values > 0]
    return "B" if len(per_chunk) == 0 or np.mean(per_chunk == 1) > 0.9 else "A"


class _Display:
    """Rich progress: sent, in flight, done, failed, live TTFT p50."""

    def __init__(self, stats: LiveStats, total: int, enabled: bool, label: str) -> None:
        self.stats, self.total, self.enabled, self.label = stats, total, enabled, label
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> _Display:
        if self.enabled:
            self._task = asyncio.create_task(self._loop())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _loop(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        cols = (
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[info]}"),
            TimeElapsedColumn(),
        )
        with Progress(*cols, console=Console(stderr=True), transient=True) as bar:
            task = bar.add_task(self.label, total=self.total, info="")
            while True:
                s = self.stats
                p50 = s.ttft_p50_ms()
                info = (
                    f"sent {s.sent}  in flight {s.in_flight}  failed {s.failed}  "
                    f"TTFT p50 {'-' if p50 is None else f'{p50:.0f} ms'}"
                    + ("  stopping (Ctrl-C again cancels in-flight)" if s.stopping else "")
                )
                bar.update(task, completed=s.done, info=info)
                await asyncio.sleep(0.25)


class _Stopper:
    """SIGINT stops sending and lets in-flight requests finish (a second SIGINT cancels them); SIGTERM stops
    sending and cancels in-flight requests at once; a failed run directory does the same as SIGTERM."""

    def __init__(self) -> None:
        self.stop, self.hard_stop = asyncio.Event(), asyncio.Event()
        self.reason: str | None = None

    def interrupt(self) -> None:
        if self.stop.is_set():
            self.hard_stop.set()
        self.reason = self.reason or "interrupted"
        self.stop.set()

    def terminate(self, reason: str = "terminated") -> None:
        self.reason = self.reason or reason
        self.stop.set()
        self.hard_stop.set()

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """The handlers for the block; the process's own handlers come back afterwards."""
        loop = asyncio.get_running_loop()
        handlers = {signal.SIGINT: self.interrupt, signal.SIGTERM: lambda: self.terminate()}
        saved = {sig: signal.getsignal(sig) for sig in handlers}
        with contextlib.suppress(NotImplementedError, RuntimeError):
            for sig, handler in handlers.items():
                loop.add_signal_handler(sig, handler)
        try:
            yield
        finally:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                for sig, previous in saved.items():
                    loop.remove_signal_handler(sig)
                    signal.signal(sig, previous)


STOP_NOTES = {
    "interrupted": "run stopped by Ctrl-C (SIGINT) after {sent} of {n} requests were sent",
    "terminated": "run stopped by SIGTERM after {sent} of {n} requests were sent; requests in flight were cancelled",
}


async def benchmark(opts: RunOptions) -> RunResult:
    """Run the benchmark; returns the run directory, its summary and why it stopped early, if it did.

    SIGINT/SIGTERM stop the run and keep everything measured; a run directory that cannot be written (disk full)
    stops it too, and the records it could not take are still in the returned summary.
    """
    clock = RunClock()
    n = opts.request_count()
    reqs, declaration = _workload(opts, n, opts.seed)
    if opts.concurrency is None and opts.arrivals is None:
        raise UserError("give a load: --rate R (open loop) or --concurrency C (closed loop)")
    pattern = LoadPattern(
        offsets=reqs.arrival_s if opts.arrivals is not None else None,
        concurrency=opts.concurrency,
        duration=opts.duration,
        barrier=opts.barrier,
    )
    prompter = None
    if opts.tokenizer:
        tok = resolve_tokenizer(opts.tokenizer)
        prompter = ExactPrompter(tok, chat=opts.api == "chat", seed=opts.seed)
    cfg = ClientConfig(
        opts.url,
        opts.api,
        opts.model,
        api_key_env=opts.api_key_env,
        connect_timeout=opts.connect_timeout,
        first_token_timeout=opts.first_token_timeout,
        total_timeout=opts.total_timeout,
        ignore_eos=opts.ignore_eos,
        extra_body=opts.extra_body,
    )
    if not cfg.model:
        cfg.model = await discover_model(cfg)
    info = RunInfo(
        kind="emulated" if opts.sut.get("emulated") else "live",
        sut={"model": cfg.model, "url": redact_url(opts.url), **{k: v for k, v in opts.sut.items() if k != "emulated"}},
        workload=declaration,
        load={
            "description": _describe_load(opts, pattern),
            "requests": n,
            "duration_s": opts.duration,
            "concurrency": opts.concurrency,
            "barrier": opts.barrier,
            "arrivals": declaration.get("arrivals"),
        },
        warmup={"done": False, "note": "warm-up not started yet"},
        slo=opts.slo,
        client=cfg.declaration(),
        deadlines=opts.deadlines,
    )
    info.client["open_files_limit"] = raise_open_files_limit()
    claim_run_dir(opts.out, info)  # before the warm-up: a bad --out costs nothing
    client = OpenAIClient(cfg, clock)
    stopper = _Stopper()
    try:
        with stopper.installed():
            return await _measure(opts, clock, client, reqs, n, pattern, prompter, info, stopper)
    finally:
        await client.close()


async def _measure(
    opts: RunOptions,
    clock: RunClock,
    client: OpenAIClient,
    reqs: Requests,
    n: int,
    pattern: LoadPattern,
    prompter: ExactPrompter | None,
    info: RunInfo,
    stopper: _Stopper,
) -> RunResult:
    """Warm-up, then the measured load into the claimed run directory, then the summary."""
    warm: dict[str, Any] = {
        "done": False,
        "cold_start": True,
        "note": "warm-up skipped (--warmup off): a cold start was measured (draft 4.5.3)",
    }
    if opts.warmup:
        warm_stats = LiveStats()
        async with _Display(warm_stats, 0, opts.progress, "warm-up"):
            warm = await warm_up(client, opts, pattern, warm_stats, prompter, stopper.stop, stopper.hard_stop)
    info.warmup = warm
    info.tokenizer = _tokenizer_block(prompter, client.counting)
    info.started_at_clock = clock.now()  # type: ignore[attr-defined]
    requests_in: Any = prepared(reqs, opts.seed, prompter=prompter)
    if prompter is not None and not stopper.stop.is_set():
        if pattern.offsets is not None:  # open loop: build every prompt before the clock starts
            requests_in = list(requests_in)
        sample = (
            requests_in[:16]
            if isinstance(requests_in, list)
            else list(prepared(reqs.head(16), opts.seed, prompter=prompter))
        )
        info.prompt_verification = await verify_prompts(client, prompter, sample)  # type: ignore[attr-defined]
    writer = RunWriter(opts.out, info, on_failure=lambda reason: stopper.terminate(reason), claimed=True)
    stats = LiveStats()
    scraper, sampler = await _start_monitors(opts, clock, info)
    if stopper.stop.is_set():
        requests_in = []  # stopped during the warm-up: nothing is measured
    async with _Display(stats, n, opts.progress, "benchmark"):
        await drive(
            client,
            requests_in,
            pattern,
            writer.append,
            stats,
            stopper.stop,
            opts.grace_s,
            hard_stop=stopper.hard_stop,
            on_send=lambda req, at: writer.sent(req.request_id, at, req.input_tokens, req.max_tokens),
        )
    await client.close()  # the pool's idle sockets go before the journal is sealed (an overload leaves thousands)
    table = writer.close()
    cols = RecordColumns.from_table(table)
    monitors = await _stop_monitors(opts, scraper, sampler, cols, info)
    info.itl_option = choose_itl_option(cols)  # type: ignore[assignment]
    if writer.failure is not None:
        kept = len(table) - len(writer.unwritten)
        info.notes.append(
            f"{writer.failure}: the run stopped after {stats.sent} of {n} requests were sent; {kept} records are in "
            f"the run directory, {len(writer.unwritten)} only in this report"
        )
    elif stopper.reason in STOP_NOTES:
        when = " during the warm-up" if not warm.get("done") and opts.warmup else ""
        info.notes.append(STOP_NOTES[stopper.reason].format(sent=stats.sent, n=n) + when)
    info.stopped = writer.failure or stopper.reason
    summary = summarize(cols, info.itl_option, opts.slo, parse_deadlines(opts.deadlines) if opts.deadlines else None)
    summary.update(monitors)
    try:
        write_run_info(opts.out, info)
        if writer.failure is None:
            write_summary(opts.out, summary)
    except OSError as exc:
        writer.failure = writer.failure or disk_trouble(exc)
    return RunResult(opts.out, summary, stopper.reason, writer.failure)


async def _start_monitors(opts: RunOptions, clock: RunClock, info: RunInfo) -> tuple[Any, Any]:
    """Server /metrics scraping and host telemetry for the measured part of the run (not the warm-up)."""
    from infermeter.client.server_metrics import MetricsScraper
    from infermeter.telemetry.sampler import TelemetrySampler

    scraper = sampler = None
    if opts.scrape_interval > 0:
        scraper = MetricsScraper(opts.url, clock, opts.scrape_interval)
        if not await scraper.start():
            info.notes.append(f"no server metrics: {scraper.data.error} (scraping skipped)")
            info.server_metrics = {"url": scraper.url, "available": False, "reason": scraper.data.error}
            scraper = None
        else:
            info.server_metrics = {"url": scraper.url, "available": True, "interval_s": opts.scrape_interval}
    if opts.telemetry_interval > 0:
        sampler = TelemetrySampler(clock, opts.telemetry_interval)
        await sampler.start()
        info.telemetry = {"interval_s": opts.telemetry_interval, "sources": sampler.sources()}
    with contextlib.suppress(OSError):  # a failing disk is the writer's to report
        write_run_info(opts.out, info)
    return scraper, sampler


async def _stop_monitors(
    opts: RunOptions, scraper: Any, sampler: Any, cols: RecordColumns, info: RunInfo
) -> dict[str, Any]:
    import pyarrow.parquet as pq

    from infermeter.metrics.throughput import measurement_window
    from infermeter.telemetry.energy import energy_block

    def save(table: Any, name: str) -> None:
        try:
            pq.write_table(table, opts.out / name)
        except OSError as exc:
            info.notes.append(f"{name} was not written: {disk_trouble(exc)}")

    out: dict[str, Any] = {}
    if scraper is not None:
        await scraper.stop()
        save(scraper.data.table(), "server_metrics.parquet")
        out["server_metrics"] = scraper.data.summary()
    if sampler is not None:
        await sampler.stop()
        table = sampler.table()
        save(table, "telemetry.parquet")
        start, end = measurement_window(cols)
        samples = {k: table.column(k).to_numpy(zero_copy_only=False) for k in table.column_names}
        tokens = int(cols.output_tokens[cols.ok].sum())
        out["energy"] = energy_block(
            samples,
            start,
            end,
            tokens,
            sampler.sources(),
            opts.gpu_price_per_hour,
            opts.gpus or (len(sampler.gpu.handles) or None),
        )
        util = samples.get("cpu_util_pct")
        if util is not None and len(util):
            out["energy"]["cpu_util_pct_mean"] = float(np.nanmean(util))
    return out


def _tokenizer_block(prompter: ExactPrompter | None, counting: str) -> dict[str, Any]:
    if prompter is None:
        return {
            "name": "server-reported usage (completion_tokens, prompt_tokens)",
            "counting_method": "A",
            "per_event": counting,
            "special_tokens": "as the server counts them",
            "prompts": "whole words (one token each to infermeter's emulator); real servers count their own",
        }
    tok = prompter.tok
    # tiktoken's encodings are reference tokenizers (option B); a model's own vocabulary is native (option A)
    block = tokenizer_declaration(tok, "B" if isinstance(tok, TiktokenTokenizer) else "A")
    block.update(
        {
            "per_event": counting,
            "prompts": "exact length after the chat template" if prompter.template else "exact length",
            "template_overhead_tokens": prompter.overhead,
        }
    )
    return block


async def verify_prompts(
    client: OpenAIClient, prompter: ExactPrompter, sample: list[PreparedRequest]
) -> dict[str, Any]:
    """Count a sample of the run's prompts with the server's own tokenizer, when it offers an endpoint."""
    from infermeter.client.server_tokenizer import ServerTokenizer

    server = ServerTokenizer(client.config.base_url, client.config.model, client.headers)
    checked, mismatches, examples = 0, 0, []
    for req in sample:
        got = await server.count(client.session, prompter.render(req.prompt))
        if got is None:
            break
        checked += 1
        if got != req.input_tokens:
            mismatches += 1
            if len(examples) < 5:
                examples.append({"request_id": req.request_id, "built": req.input_tokens, "server": got})
    return {"endpoint": server.description, "checked": checked, "mismatches": mismatches, "examples": examples}


def _describe_load(opts: RunOptions, pattern: LoadPattern) -> str:
    if opts.arrivals is not None:
        text = f"open-loop {opts.arrivals.describe()}"
    else:
        text = f"closed-loop concurrency {opts.concurrency}" + (", simultaneous start" if opts.barrier else "")
    return text + (f", {opts.duration:g} s" if opts.duration else "")
