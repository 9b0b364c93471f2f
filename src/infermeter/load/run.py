"""One benchmark run end to end: workload -> prompts -> warm-up -> load -> run directory -> summary."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from infermeter.client.backend import Backend, open_backend
from infermeter.client.openai_sse import ClientConfig
from infermeter.errors import UserError
from infermeter.load.client_health import watched
from infermeter.load.clock_accuracy import measure_clock
from infermeter.load.counting import TokenCounting, choose_counting, curve_mismatch, declared_tokenizer
from infermeter.load.disclosure import clock_method, round_trip, stream_block
from infermeter.load.driver import LiveStats, LoadPattern, drive
from infermeter.load.monitors import start_monitors, stop_monitors
from infermeter.load.options import RunOptions, RunResult
from infermeter.load.progress import LiveDisplay
from infermeter.load.prompts import prepared, tokenizer_block, verify_prompts, workload_for
from infermeter.load.server_software import disclose_software
from infermeter.load.special_tokens import special_tokens
from infermeter.load.stopping import STOP_NOTES, WORKER_LOST, Stopper
from infermeter.load.warmup import (
    discover_model,
    warm_up,
)
from infermeter.metrics import RecordColumns, summarize
from infermeter.metrics.fluidity import parse_deadlines
from infermeter.metrics.latency import ItlOption
from infermeter.process_limits import raise_open_files_limit, realtime
from infermeter.records import (
    RunClock,
    RunInfo,
    RunWriter,
    claim_run_dir,
    disk_trouble,
    write_run_info,
    write_summary,
)
from infermeter.run_info import Load, Sut, Warmup, WorkloadDeclaration
from infermeter.secrets import redact_url
from infermeter.workload.prompts import ExactPrompter
from infermeter.workload.spec import Requests

if TYPE_CHECKING:
    from infermeter.distributed.load import ClusterLoad


def choose_itl_option(cols: RecordColumns) -> ItlOption:
    """Draft B.2.1: server times when every successful stream has them (C); single-token chunks dominating
    (> 90%) make direct timing exact (B); otherwise time between chunks (A)."""
    ok = cols.ok & (cols.tokens.lengths > 0)
    if ok.any() and np.all(cols.has_server[ok] & (cols.server.lengths[ok] == cols.tokens.lengths[ok])):
        return "C"
    per_chunk = cols.chunk_tokens.values[cols.chunk_tokens.values > 0]
    return "B" if len(per_chunk) == 0 or np.mean(per_chunk == 1) > 0.9 else "A"


async def benchmark(opts: RunOptions) -> RunResult:
    """Run the benchmark; returns the run directory, its summary and why it stopped early, if it did.

    SIGINT/SIGTERM stop the run and keep everything measured; a run directory that cannot be written (disk full)
    stops it too, and the records it could not take are still in the returned summary.
    """
    clock = RunClock()
    n = opts.request_count()
    reqs, declaration = workload_for(opts, n, opts.seed)
    if opts.concurrency is None and not opts.open_loop:
        raise UserError("give a load: --rate R (open loop), --concurrency C (closed loop) or --trace FILE (replay)")
    pattern = LoadPattern(
        offsets=reqs.arrival_s if opts.open_loop else None,
        concurrency=opts.concurrency,
        duration=opts.duration if opts.min_duration is None else opts.min_duration,
        barrier=opts.barrier,
        min_requests=opts.requests if opts.min_duration is not None else None,
    )
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
        cfg.model = str(opts.sut.get("model") or "")  # the embedded emulator's
    if not cfg.model:
        if opts.backend != "openai":
            raise UserError(f"--backend {opts.backend} cannot list the server's models: give --model")
        cfg.model = await discover_model(cfg)
    counting = await _counting(opts, cfg)
    prompter = ExactPrompter(counting.tokenizer, chat=opts.api == "chat", seed=opts.seed)
    cfg.count_text = counting.count_text
    client = open_backend(opts.backend, cfg, clock)
    stopper = Stopper()
    try:
        info = _run_info(opts, cfg, client, declaration, pattern, n)
        info.clock_anchor = clock.anchor()
        curve = parse_deadlines(opts.deadlines).curve if opts.deadlines else None
        if curve is not None and (why := curve_mismatch(curve, counting)):
            info.notes.append(why)
        with _cluster(opts, cfg) as cluster:  # a cluster that cannot be reached leaves no half-claimed directory
            claim_run_dir(opts.out, info)  # before the warm-up: a bad --out costs nothing
            info.network = await round_trip(opts.url)
            info.clock_accuracy, _ = await asyncio.gather(  # together, 3 s at most; once per URL in a process
                measure_clock(opts, cfg.headers()),  # draft 4.7.2
                disclose_software(info.sut, opts, cfg.headers()),  # --software and the server's own version
            )
            with stopper.installed():
                return await _measure(opts, clock, client, reqs, n, pattern, counting, prompter, info, stopper, cluster)
    finally:
        await client.close()


@contextlib.contextmanager
def _cluster(opts: RunOptions, cfg: ClientConfig) -> Iterator[ClusterLoad | None]:
    """The workers the load is sent from with --workers / --cluster; None: this process sends it."""
    if opts.workers is None and opts.cluster is None:
        yield None
        return
    from infermeter.distributed.cluster import cluster_client, describe
    from infermeter.distributed.load import ClusterLoad

    with cluster_client(opts.workers, opts.cluster) as client:
        yield ClusterLoad(client, describe(opts.workers, opts.cluster), cfg)


async def _counting(opts: RunOptions, cfg: ClientConfig) -> TokenCounting:
    """The run's tokenizer and counting option, from --tokenizer and what the server declares about its own."""
    declared = opts.sut.get("tokenizer")  # the embedded emulator's
    if declared is None:
        http = opts.url if opts.backend == "openai" else opts.metrics_url
        declared = await declared_tokenizer(http, cfg.model, cfg.headers())
    return choose_counting(opts.tokenizer, declared)


def _run_info(
    opts: RunOptions, cfg: ClientConfig, client: Backend, declaration: dict[str, Any], pattern: LoadPattern, n: int
) -> RunInfo:
    """run.json as it stands before anything is measured."""
    workload = WorkloadDeclaration.model_validate(declaration)
    client_block = client.declaration()
    client_block.open_files_limit = raise_open_files_limit()
    sut = {"model": cfg.model, "url": redact_url(opts.url), "clock_sync": clock_method(opts.url)}
    sut.update({k: v for k, v in opts.sut.items() if k != "emulated"})
    sut.update(opts.disclosed)
    return RunInfo(
        kind="emulated" if opts.sut.get("emulated") else "live",
        sut=Sut.model_validate(sut),
        workload=workload,
        load=Load(
            description=_describe_load(opts, pattern),
            requests=n if opts.min_duration is None else opts.requests,
            duration_s=opts.duration if opts.min_duration is None else opts.min_duration,
            concurrency=opts.concurrency,
            barrier=opts.barrier,
            arrivals=workload.arrivals,
        ),
        warmup=Warmup(done=False, note="warm-up not started yet"),
        slo=opts.slo,
        client=client_block,
        deadlines=opts.deadlines,
        config=opts.scenario,
    )


async def _measure(
    opts: RunOptions,
    clock: RunClock,
    client: Backend,
    reqs: Requests,
    n: int,
    pattern: LoadPattern,
    counting: TokenCounting,
    prompter: ExactPrompter,
    info: RunInfo,
    stopper: Stopper,
    cluster: ClusterLoad | None = None,
) -> RunResult:
    """Warm-up, then the measured load into the claimed run directory (sent by this process or by the cluster's
    workers), then the summary."""
    warm = Warmup(
        done=False,
        cold_start=True,
        note="warm-up skipped (--warmup off): a cold start was measured (draft 4.5.3)",
    )
    if opts.warmup:
        warm_stats = LiveStats()
        async with LiveDisplay(warm_stats, 0, opts.progress, "warm-up"):
            warm = await warm_up(client, opts, pattern, warm_stats, prompter, stopper.stop, stopper.hard_stop, reqs)
    info.warmup = warm
    special = special_tokens(counting, prompter, info.workload, ignore_eos=opts.ignore_eos, extra_body=opts.extra_body)
    info.tokenizer = tokenizer_block(counting, prompter, client.counting, special)
    info.started_at_clock = clock.now()
    requests_in: Any = prepared(reqs, opts.seed, prompter=prompter)
    if not stopper.stop.is_set():
        if pattern.offsets is not None and cluster is None:  # open loop: every prompt built before the clock starts
            requests_in = list(requests_in)
        sample = (
            requests_in[:16]
            if isinstance(requests_in, list)
            else list(prepared(reqs.head(16), opts.seed, prompter=prompter))
        )
        info.prompt_verification = await verify_prompts(client, prompter, sample, counting.method)
    writer = RunWriter(opts.out, info, on_failure=lambda reason: stopper.terminate(reason), claimed=True)
    stats = LiveStats()
    scraper, sampler = await start_monitors(opts, clock, info)
    if stopper.stop.is_set():
        requests_in = []  # stopped during the warm-up: nothing is measured
    per_worker: dict[str, tuple[LiveStats, int]] = {}
    shown = opts.requests if opts.min_duration is not None and opts.requests is not None else n
    async with LiveDisplay(stats, shown, opts.progress, "benchmark", per_worker):
        if cluster is None:
            with realtime(opts.realtime) as scheduling:
                async with watched() as probe:
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
                        probe=probe,
                    )
            if info.client is not None:
                info.client.scheduling = scheduling.in_force
            if scheduling.refused is not None:
                info.notes.append(scheduling.refused)
            if stats.sent:
                info.client_health = probe.health()
        elif not stopper.stop.is_set():
            from infermeter.distributed.load import drive_on_cluster, worker_notes

            info.distributed = await drive_on_cluster(
                cluster, backend=opts.backend, reqs=reqs, seed=opts.seed, prompter=prompter,
                pattern=pattern, grace_s=opts.grace_s, clock=clock, info=info, writer=writer, stats=stats,
                per_worker=per_worker, stop=stopper.stop, hard_stop=stopper.hard_stop,
            )  # fmt: skip
            info.notes.extend(worker_notes(info.distributed))
            if any(w.outcome.startswith(("died", "failed")) for w in info.distributed.workers):
                stopper.reason = stopper.reason or WORKER_LOST
    await client.close()  # the pool's idle sockets go before the journal is sealed (an overload leaves thousands)
    table = writer.close()
    cols = RecordColumns.from_table(table, counting.method)
    scraped, energy = await stop_monitors(opts, scraper, sampler, cols, info)
    info.itl_option = choose_itl_option(cols)
    info.stream = stream_block(table)
    if writer.failure is not None:
        kept = len(table) - len(writer.unwritten)
        info.notes.append(
            f"{writer.failure}: the run stopped after {stats.sent} of {n} requests were sent; {kept} records are in "
            f"the run directory, {len(writer.unwritten)} only in this report"
        )
    elif stopper.reason in STOP_NOTES:
        when = " during the warm-up" if not warm.done and opts.warmup else ""
        info.notes.append(STOP_NOTES[stopper.reason].format(sent=stats.sent, n=n) + when)
    info.stopped = writer.failure or stopper.reason
    summary = summarize(cols, info.itl_option, opts.slo, parse_deadlines(opts.deadlines) if opts.deadlines else None)
    if scraped is not None:
        summary.server_metrics = scraped
    if energy is not None:
        summary.energy = energy
    summary.client_health = info.client_health
    try:
        write_run_info(opts.out, info)
        if writer.failure is None:
            write_summary(opts.out, summary)
    except OSError as exc:
        writer.failure = writer.failure or disk_trouble(exc)
    return RunResult(opts.out, summary, stopper.reason, writer.failure)


def _describe_load(opts: RunOptions, pattern: LoadPattern) -> str:
    if opts.arrivals is not None:
        text = f"open-loop {opts.arrivals.describe()}"
    elif opts.open_loop and opts.trace is not None:
        text = f"open-loop replay of {opts.trace.name}'s arrival times, compressed x{opts.rps_scale:g}"
    else:
        text = f"closed-loop concurrency {opts.concurrency}" + (", simultaneous start" if opts.barrier else "")
    text += f", {opts.duration:g} s" if opts.duration else ""
    text += f", until {opts.requests} requests and {opts.min_duration:g} s" if opts.min_duration else ""
    if opts.workers is not None or opts.cluster is not None:
        from infermeter.distributed.cluster import describe

        text += f", sent from {describe(opts.workers, opts.cluster)} (dask.distributed)"
    return text
