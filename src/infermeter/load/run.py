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

from infermeter.client.openai import Api, ClientConfig, OpenAIClient, PreparedRequest
from infermeter.errors import UserError
from infermeter.load.driver import LiveStats, LoadPattern, drive
from infermeter.metrics import RecordColumns, summarize
from infermeter.metrics.fluidity import parse_deadlines
from infermeter.records import RequestRecord, RunClock, RunInfo, RunWriter, write_run_info, write_summary
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


def prepared(
    requests: Requests, seed: int, id_offset: int = 0, prompter: ExactPrompter | None = None
) -> Iterator[PreparedRequest]:
    """Prompts built lazily, one per request, as the driver asks for them: exact-length under a tokenizer when
    one is given, else whole words (one token each to the emulator)."""
    prefixes: dict[int, str] = {}
    raw = ExactPrompter(prompter.tok, chat=False, seed=seed) if prompter is not None else None
    for i in range(len(requests)):
        rid, n = id_offset + i, int(requests.input_tokens[i])
        pid, ptok = int(requests.prefix_id[i]), int(requests.prefix_tokens[i])
        if prompter is not None and raw is not None:
            if pid >= 0 and pid not in prefixes:
                prefixes[pid] = raw.build(max(ptok, 1), 10**9 + pid)
            text = prompter.build(n, rid, prefixes.get(pid, ""))
        else:
            text = build_prompt(rid, n, pid, ptok, seed)
        yield PreparedRequest(rid, text, n, int(requests.output_tokens[i]), str(requests.request_class[i]))


async def discover_model(url: str) -> str:
    """The first model the server lists, for runs that do not name one."""
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as s,
            s.get(url.rstrip("/") + "/v1/models") as r,
        ):
            data = orjson.loads(await r.read())
            return str(data["data"][0]["id"])
    except (aiohttp.ClientError, TimeoutError, KeyError, IndexError, orjson.JSONDecodeError, TypeError) as exc:
        raise UserError(f"could not list models at {url}/v1/models ({type(exc).__name__}): give --model") from None


async def _probe(client: OpenAIClient, n: int) -> float | None:
    rec = await client.send(
        PreparedRequest(2 * 10**9 + n, build_prompt(2 * 10**9 + n, PROBE_INPUT), PROBE_INPUT, PROBE_OUTPUT),
        client.clock.now(),
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
) -> dict[str, Any]:
    """Draft 4.5: probe, >= 100 requests and >= 10,000 output tokens under the run's load, drain, probe until
    stable.  Nothing of it reaches the records."""
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
    warm_requests = list(prepared(reqs, opts.seed + 1, id_offset=10**9, prompter=prompter))
    await drive(client, warm_requests, warm_pattern, records.append, stats)
    probes: list[float] = []
    for k in range(1, 11):
        p = await _probe(client, k)
        if p is not None:
            probes.append(p)
        last = probes[-3:]
        if len(last) == 3 and max(last) <= (1 + PROBE_STABLE) * min(last):
            break
    last = probes[-3:]
    return {
        "done": True,
        "requests": len(records),
        "failed": sum(r.status != "ok" for r in records),
        "output_tokens": sum(len(r.token_times) for r in records),
        "queue_drained": True,
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


async def benchmark(opts: RunOptions) -> tuple[Path, dict[str, Any]]:
    """Run the benchmark; returns the run directory and its summary.  Ctrl-C stops sending and keeps all."""
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
    model = opts.model or await discover_model(opts.url)
    cfg = ClientConfig(
        opts.url,
        opts.api,
        model,
        connect_timeout=opts.connect_timeout,
        first_token_timeout=opts.first_token_timeout,
        total_timeout=opts.total_timeout,
        ignore_eos=opts.ignore_eos,
        extra_body=opts.extra_body,
    )
    client = OpenAIClient(cfg, clock)
    stop, hard_stop = asyncio.Event(), asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_sigint() -> None:
        (hard_stop if stop.is_set() else stop).set()

    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGINT, on_sigint)
    try:
        warm: dict[str, Any] = {"done": False, "note": "warm-up skipped (--warmup off): cold start measured"}
        if opts.warmup:
            warm_stats = LiveStats()
            async with _Display(warm_stats, 0, opts.progress, "warm-up"):
                warm = await warm_up(client, opts, pattern, warm_stats, prompter)
        info = RunInfo(
            kind="emulated" if opts.sut.get("emulated") else "live",
            sut={"model": model, "url": opts.url, **{k: v for k, v in opts.sut.items() if k != "emulated"}},
            workload=declaration,
            load={
                "description": _describe_load(opts, pattern),
                "requests": n,
                "duration_s": opts.duration,
                "concurrency": opts.concurrency,
                "barrier": opts.barrier,
                "arrivals": declaration.get("arrivals"),
            },
            tokenizer=_tokenizer_block(prompter, client.counting),
            warmup=warm,
            slo=opts.slo,
            client=cfg.declaration(),
            deadlines=opts.deadlines,
            started_at_clock=clock.now(),
        )
        requests_in: Any = prepared(reqs, opts.seed, prompter=prompter)
        if prompter is not None:
            if pattern.offsets is not None:  # open loop: build every prompt before the clock starts
                requests_in = list(requests_in)
            sample = (
                requests_in[:16]
                if isinstance(requests_in, list)
                else list(prepared(reqs.head(16), opts.seed, prompter=prompter))
            )
            info.prompt_verification = await verify_prompts(client, prompter, sample)
        writer = RunWriter(opts.out, info)
        stats = LiveStats()
        scraper, sampler = await _start_monitors(opts, clock, info)
        async with _Display(stats, n, opts.progress, "benchmark"):
            await drive(
                client,
                requests_in,
                pattern,
                writer.append,
                stats,
                stop,
                opts.grace_s,
                hard_stop=hard_stop,
            )
        table = writer.close()
        cols = RecordColumns.from_table(table)
        monitors = await _stop_monitors(opts, scraper, sampler, cols)
        info.itl_option = choose_itl_option(cols)  # type: ignore[assignment]
        if stop.is_set():
            info.notes.append(f"run stopped by Ctrl-C after {stats.sent} of {n} requests were sent")
        write_run_info(opts.out, info)
        summary = summarize(
            cols, info.itl_option, opts.slo, parse_deadlines(opts.deadlines) if opts.deadlines else None
        )
        summary.update(monitors)
        write_summary(opts.out, summary)
        return opts.out, summary
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGINT)
        await client.close()


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
    write_run_info(opts.out, info)
    return scraper, sampler


async def _stop_monitors(opts: RunOptions, scraper: Any, sampler: Any, cols: RecordColumns) -> dict[str, Any]:
    import pyarrow.parquet as pq

    from infermeter.metrics.throughput import measurement_window
    from infermeter.telemetry.energy import energy_block

    out: dict[str, Any] = {}
    if scraper is not None:
        await scraper.stop()
        pq.write_table(scraper.data.table(), opts.out / "server_metrics.parquet")
        out["server_metrics"] = scraper.data.summary()
    if sampler is not None:
        await sampler.stop()
        table = sampler.table()
        pq.write_table(table, opts.out / "telemetry.parquet")
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
    from infermeter.client.tokenize import ServerTokenizer

    server = ServerTokenizer(client.config.base_url, client.config.model)
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
