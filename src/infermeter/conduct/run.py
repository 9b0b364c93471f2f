"""One benchmark run end to end, from its plan: target checks -> warm-up -> the measured load (sent by the sender the
plan asks for) -> run directory -> summary."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from infermeter.client.apis import templated
from infermeter.client.backend import Backend, open_backend
from infermeter.client.headers import names as header_names
from infermeter.client.request import ClientConfig, PreparedRequest
from infermeter.conduct.senders import Sender, Shipment, open_sender
from infermeter.load.clock_accuracy import measure_clock
from infermeter.load.counting import TokenCounting, choose_counting, curve_mismatch, declared_tokenizer
from infermeter.load.disclosure import clock_method, round_trip, stream_block
from infermeter.load.driver import LiveStats
from infermeter.load.monitors import start_monitors, stop_monitors
from infermeter.load.plan import RunPlan, Work, plan_run
from infermeter.load.progress import LiveDisplay
from infermeter.load.prompts import prepared, tokenizer_block, verify_prompts
from infermeter.load.request_extras import RequestExtras, request_extras
from infermeter.load.server_software import disclose_software
from infermeter.load.special_tokens import special_tokens
from infermeter.load.stopping import STOP_NOTES, Stopper
from infermeter.load.warmup import warm_up
from infermeter.metrics import RecordColumns, summarize
from infermeter.metrics.columns import after_ramp
from infermeter.metrics.latency import ItlOption
from infermeter.metrics.summary_model import Summary
from infermeter.process_limits import raise_open_files_limit
from infermeter.records import (
    RunClock,
    RunInfo,
    RunWriter,
    claimed_run_dir,
    disk_trouble,
    write_run_info,
    write_summary,
)  # fmt: skip
from infermeter.run_info import Load, Sut, Warmup
from infermeter.secrets import redact_header, redact_url
from infermeter.workload.prompts import ExactPrompter
from infermeter.workload.template_floor import floor_to_template

if TYPE_CHECKING:
    from infermeter.config.run import RunConfig
    from infermeter.load.target import Endpoint

COLD_START = "warm-up skipped (--warmup off): a cold start was measured (draft 4.5.3)"


@dataclass
class RunResult:
    """What a run left: its directory, its summary, and why it ended early (None when it ran as planned)."""

    run_dir: Path
    summary: Summary
    stopped: str | None = None  # "interrupted" (SIGINT), "terminated" (SIGTERM) or why the directory failed
    disk_failure: str | None = None


@dataclass
class _Run:
    """A run under way: its plan and what the conductor opened for it."""

    plan: RunPlan
    clock: RunClock
    client: Backend
    counting: TokenCounting
    prompter: ExactPrompter
    info: RunInfo
    stopper: Stopper
    sender: Sender
    warm: Warmup = field(default_factory=lambda: Warmup(done=False, cold_start=True, note=COLD_START))
    extras: RequestExtras = field(default_factory=RequestExtras)  # texts, images and audio besides the prompt


async def conduct(
    config: RunConfig, endpoint: Endpoint, out: Path, progress: bool, work: Work | None = None
) -> RunResult:
    """A resolved configuration run against `endpoint` into `out`: its plan made, then measured (`work`: its
    requests and pattern when the caller drew them already)."""
    return await benchmark(await plan_run(config, endpoint, out, progress, work))


async def benchmark(plan: RunPlan) -> RunResult:
    """Run the plan; returns the run directory, its summary and why it stopped early, if it did.

    SIGINT/SIGTERM stop the run and keep everything measured; a run directory that cannot be written (disk full)
    stops it too, and the records it could not take are still in the returned summary.
    """
    clock = RunClock()
    counting = await _counting(plan)
    prompter = ExactPrompter(counting.tokenizer, chat=templated(plan.target.client.api), seed=plan.seed)
    floored = floor_to_template(plan.work.requests, prompter)  # the tokenizer is known only now
    if floored.raised:
        plan = dataclasses.replace(plan, work=dataclasses.replace(plan.work, requests=floored.requests))
    extras = request_extras(plan.config, plan.work.requests.images is not None)
    cfg = dataclasses.replace(plan.target.client, count_text=counting.count_text)
    client = open_backend(plan.target.backend, cfg, clock)
    try:
        with open_sender(plan, cfg) as sender:  # a cluster that cannot be reached leaves no half-claimed directory
            info = _run_info(plan, client, sender.where)
            if (note := floored.note()) is not None:
                info.workload.notes.append(note)
            info.clock_anchor = clock.anchor()
            curve = plan.deadlines.curve if plan.deadlines is not None else None
            if curve is not None and (why := curve_mismatch(curve, counting)):
                info.notes.append(why)
            # claimed before the warm-up (a bad --out costs nothing), released if the run fails before measuring
            with claimed_run_dir(plan.out, info):
                await _disclose(plan, cfg, info)
                run = _Run(plan, clock, client, counting, prompter, info, Stopper(), sender, extras=extras)
                with run.stopper.installed():
                    return await _measure(run)
    finally:
        extras.close()  # the media threads stop however the run ends
        await client.close()


async def _counting(plan: RunPlan) -> TokenCounting:
    """The run's tokenizer and counting option, from --tokenizer and what the server declares about its own."""
    target = plan.target
    declared = target.sut.get("tokenizer")  # the embedded emulator's
    if declared is None:
        declared = await declared_tokenizer(target.http_url, target.client.model, target.client.headers())
    return choose_counting(plan.config.workload.tokenizer, declared)


async def _disclose(plan: RunPlan, cfg: ClientConfig, info: RunInfo) -> None:
    """The network path, the clocks' agreement (draft 4.7.2) and the server's software, the last two together
    (3 s at most; once per URL in a process)."""
    info.network = await round_trip(plan.target.url)
    info.clock_accuracy, _ = await asyncio.gather(
        measure_clock(plan.target, cfg.headers()),
        disclose_software(info.sut, plan.target, plan.software, cfg.headers()),
    )


def _run_info(plan: RunPlan, client: Backend, where: str | None) -> RunInfo:
    """run.json as it stands before anything is measured."""
    target, work, load = plan.target, plan.work, plan.config.load
    client_block = client.declaration()
    client_block.open_files_limit = raise_open_files_limit()
    sut = {"model": target.client.model, "url": redact_url(target.url), "clock_sync": clock_method(target.url)}
    sut.update({k: v for k, v in target.sut.items() if k != "emulated"})
    sut.update(plan.disclosed)
    description = work.describe() + (f", sent from {where} (dask.distributed)" if where is not None else "")
    return RunInfo(
        kind="emulated" if target.emulated else "live",
        sut=Sut.model_validate(sut),
        workload=work.declaration.model_copy(deep=True),
        load=Load(
            description=description,
            requests=work.n if load.min_duration is None else load.requests,
            duration_s=load.duration if load.min_duration is None else load.min_duration,
            concurrency=load.concurrency,
            barrier=load.barrier,
            arrivals=work.declaration.arrivals,
            ramp_up_s=load.ramp_up,
            max_concurrency=load.max_concurrency,
            model_mix=_model_mix(load.model_mix),
            headers=header_names(plan.config.target.header),
            request_id_prefix=plan.config.target.request_id_prefix,
        ),
        warmup=Warmup(done=False, note="warm-up not started yet"),
        slo=plan.slo,
        client=client_block,
        deadlines=plan.config.objectives.deadlines,
        config=_config_block(plan.config),
    )


def _config_block(config: RunConfig) -> dict[str, Any]:
    """run.json's copy of the configuration, a credential-like --header's written-out value masked (its ${VAR}
    references kept: they say where the value comes from), and a token in a URL's query masked."""
    block = config.model_dump(mode="json")
    if config.target.header:
        block["target"]["header"] = [redact_header(h) for h in config.target.header]
    for section, key in (("target", "url"), ("monitors", "dcgm_url")):
        if isinstance(url := block[section].get(key), str):
            block[section][key] = redact_url(url)
    return block


def _model_mix(text: str | None) -> dict[str, float] | None:
    """--model-mix as model -> share, for run.json."""
    if text is None:
        return None
    from infermeter.workload.model_mix import parse_model_mix

    mix = parse_model_mix(text)
    return dict(zip(mix.names, mix.shares, strict=True))


async def _measure(run: _Run) -> RunResult:
    """Warm-up, then the measured load into the claimed run directory, then the summary."""
    plan, info, stopper = run.plan, run.info, run.stopper
    if plan.work.warmup.count:
        warm_stats = LiveStats()
        async with LiveDisplay(warm_stats, 0, plan.progress, "warm-up"):
            run.warm = await warm_up(
                run.client, plan.work.warmup, plan.work.pattern, warm_stats, run.prompter, stopper.stop,
                stopper.hard_stop, plan.work.requests, run.extras,
            )  # fmt: skip
    info.warmup = run.warm
    prompts = await _prompts(run)
    writer = RunWriter(plan.out, info, on_failure=lambda reason: stopper.terminate(reason), claimed=True)
    stats = LiveStats()
    monitors = plan.config.monitors
    scraper, sampler, dcgm = await start_monitors(monitors, plan.target, plan.out, run.clock, info)
    if stopper.stop.is_set():
        prompts = []  # stopped during the warm-up: nothing is measured
    shipment = Shipment(plan, run.client, run.clock, run.prompter, prompts, info, writer, stats, stopper)
    async with LiveDisplay(stats, plan.work.shown, plan.progress, "benchmark", shipment.per_worker):
        await run.sender.send(shipment)
    await run.client.close()  # the pool's idle sockets go before the journal is sealed (an overload leaves thousands)
    table = writer.close()
    run.extras.declare_sent(info, table.column("request_id").to_pylist())
    steady = after_ramp(table, plan.config.load.ramp_up)
    if plan.config.load.ramp_up:
        info.load.ramped = table.num_rows - steady.num_rows
        info.notes.append(
            f"--ramp-up {plan.config.load.ramp_up:g} s: the {info.load.ramped} requests scheduled while the load rose "
            "are in the records but not in the summary"
        )
    cols = RecordColumns.from_table(steady, run.counting.method)
    scraped, energy = await stop_monitors(monitors, plan.target.emulated, plan.out, scraper, sampler, cols, info, dcgm)
    info.itl_option = choose_itl_option(cols)
    info.stream = stream_block(table)
    _stop_notes(run, writer, stats, len(table))
    summary = summarize(cols, info.itl_option, plan.slo, plan.deadlines)
    if scraped is not None:
        summary.server_metrics = scraped
    if energy is not None:
        summary.energy = energy
    summary.client_health = info.client_health
    _write(plan.out, info, summary, writer)
    return RunResult(plan.out, summary, stopper.reason, writer.failure)


async def _prompts(run: _Run) -> Iterable[PreparedRequest]:
    """The measured prompts (every one built before the clock starts when this process sends an open loop), run.json's
    tokenizer block, and a sample of them counted by the server."""
    plan, info, prompter = run.plan, run.info, run.prompter
    special = special_tokens(
        run.counting, prompter, info.workload, ignore_eos=plan.config.target.ignore_eos,
        extra_body=plan.config.target.extra_body,
    )  # fmt: skip
    info.tokenizer = tokenizer_block(run.counting, prompter, run.client.counting, special)
    run.extras.declare(info)
    info.started_at_clock = run.clock.now()
    requests = plan.work.requests
    batch = run.extras.batch
    prompts: Iterable[PreparedRequest] = prepared(requests, plan.seed, prompter=prompter, batch=batch)
    if not run.stopper.stop.is_set():
        if run.sender.prebuilds:
            prompts = list(prompts)
        head = (
            prompts[:16]
            if isinstance(prompts, list)
            else prepared(requests.head(16), plan.seed, prompter=prompter, batch=batch)
        )
        sample = list(head)
        info.prompt_verification = await verify_prompts(run.client, prompter, sample, run.counting.method, batch)
    prompts = run.extras.with_media(prompts, requests, plan.seed)  # made as the driver takes each request
    await run.extras.made_ahead(run.stopper.stop)  # as far ahead as memory allows before the clock starts
    return prompts


def _stop_notes(run: _Run, writer: RunWriter, stats: LiveStats, recorded: int) -> None:
    """run.json's note on why the run ended early, and its reason."""
    info, n, stopper = run.info, run.plan.work.n, run.stopper
    if writer.failure is not None:
        kept = recorded - len(writer.unwritten)
        info.notes.append(
            f"{writer.failure}: the run stopped after {stats.sent} of {n} requests were sent; {kept} records are in "
            f"the run directory, {len(writer.unwritten)} only in this report"
        )
    elif stopper.reason in STOP_NOTES:
        when = " during the warm-up" if not run.warm.done and run.plan.work.warmup.count else ""
        info.notes.append(STOP_NOTES[stopper.reason].format(sent=stats.sent, n=n) + when)
    info.stopped = writer.failure or stopper.reason


def _write(out: Path, info: RunInfo, summary: Summary, writer: RunWriter) -> None:
    """run.json and summary.json (none after the directory failed: its records are not all there)."""
    try:
        write_run_info(out, info)
        if writer.failure is None:
            write_summary(out, summary)
    except OSError as exc:
        writer.failure = writer.failure or disk_trouble(exc)


def choose_itl_option(cols: RecordColumns) -> ItlOption:
    """Draft B.2.1: server times when every successful stream has them (C); single-token chunks dominating
    (> 90%) make direct timing exact (B); otherwise time between chunks (A)."""
    ok = cols.ok & (cols.tokens.lengths > 0)
    if ok.any() and np.all(cols.has_server[ok] & (cols.server.lengths[ok] == cols.tokens.lengths[ok])):
        return "C"
    per_chunk = cols.chunk_tokens.values[cols.chunk_tokens.values > 0]
    return "B" if len(per_chunk) == 0 or np.mean(per_chunk == 1) > 0.9 else "A"
