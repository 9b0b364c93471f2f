"""Black-box calibration of a live server over its normal API: isolated prompts of growing length (prefill cost,
fixed overhead, chunking), requests sent together at concurrency 1, 2, 4, ... with short and long prompts (the
decode step against batch and context, the largest running batch), the KV usage gauge where /metrics has one (KV
capacity), a prompt sent while another request decodes (whether prefill shares the decode steps), and one prompt
sent twice (prefix caching).  Bounded in time: what does not fit is left out, noted."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import aiohttp
import numpy as np
from prometheus_client.parser import text_string_to_metric_families

from infermeter.client.apis import templated
from infermeter.client.backend import Backend, open_backend
from infermeter.client.request import ClientConfig, PreparedRequest
from infermeter.client.server_metrics import ROLES
from infermeter.client.urls import endpoint
from infermeter.engine.probe_data import (
    ClosedLoop,
    DecodePoint,
    Interference,
    PrefillPoint,
    PrefixCacheProbe,
    ProbeData,
    SentTogether,
    Turnaround,
)
from infermeter.engine.probe_points import decode_points, interference, longest_gap, streaming_peak, turnarounds
from infermeter.errors import UserError
from infermeter.load.counting import choose_counting, declared_tokenizer
from infermeter.load.target import list_models
from infermeter.records import RequestRecord, RunClock
from infermeter.workload import ids
from infermeter.workload.prompts import ExactPrompter


@dataclass(frozen=True)
class ProbePlan:
    """What the probe sends, in order, until its time budget runs out."""

    lengths: tuple[int, ...]  # isolated prompts
    repeats: int
    ladder: tuple[int, ...]  # requests sent together, short prompts
    long_ladder: tuple[int, ...]  # requests sent together, long prompts (context cost, KV gauge)
    short_prompt: int
    long_prompt: int
    decode_tokens: int
    budget_s: float

    closed_loop_s: float  # each closed loop at saturation sends for at most this long

    def capped(self, max_prompt: int) -> ProbePlan:
        """The plan for a server whose context holds `max_prompt` prompt tokens (plus the decoded ones)."""
        lengths = tuple(n for n in self.lengths if n <= max_prompt)
        if len(lengths) < 4:  # too few below the cap to fit a line and tell chunking apart: spread 5 up to it
            lengths = tuple(sorted({int(n) for n in np.geomspace(max(max_prompt // 16, 1), max_prompt, 5)}))
        return replace(self, lengths=lengths, short_prompt=min(self.short_prompt, max_prompt),
                       long_prompt=min(self.long_prompt, max_prompt))  # fmt: skip


FULL = ProbePlan(
    lengths=(16, 64, 200, 400, 600, 800, 1100, 1500, 2000, 3000, 4000),
    repeats=5,  # medians of 5: a host's stall in one repeat does not move a length
    ladder=(1, 2, 4, 8, 16, 32, 64),
    long_ladder=(1, 4, 16),
    short_prompt=32,
    long_prompt=2048,
    decode_tokens=48,
    budget_s=270.0,
    closed_loop_s=8.0,
)
QUICK = ProbePlan(
    lengths=(16, 64, 300, 600, 1000),
    repeats=3,
    ladder=(1, 2, 4, 8, 16, 32),
    long_ladder=(1, 4),
    short_prompt=32,
    long_prompt=1000,
    decode_tokens=24,
    budget_s=50.0,
    closed_loop_s=4.0,
)
GAUGE_INTERVAL_S = 0.05
INTERFERENCE_REPEATS = 5  # the median of them is replayed (a host's stall in one does not move it)
NEWCOMER_STEPS = 5  # the newcomer's prompt: the shortest whose isolated TTFT is this many decode steps
MAX_RUNNING_TOKENS = 512  # the running request's output, enough to outlast the newcomer's prefill
MIN_SHORT_TURNS = 3  # a one-at-a-time server gets short prompts sent together until this many turnarounds
CLOSED_LOOP_REQUESTS = 8 * 48  # a closed loop sends at most this many requests per request in flight, over its output
SHORT_REPLY = 2  # output tokens of the closed loop whose time is mostly per-request work


class Prober:
    """Sends the probe's requests through one backend client, one unique prompt each (no prefix-cache hits)."""

    def __init__(self, client: Backend, prompter: ExactPrompter, clock: RunClock, count_a: bool) -> None:
        self.client = client
        self.prompter = prompter
        self.clock = clock
        self.count_a = count_a
        self.k = 0

    def prepare(self, tokens: int, max_tokens: int, rid: int | None = None) -> PreparedRequest:
        if rid is None:
            rid = ids.request_id(ids.PREFILL, self.k)
            self.k += 1
        return PreparedRequest(rid, self.prompter.build(tokens, rid), tokens, max_tokens, ref_input_tokens=tokens)

    async def one(self, req: PreparedRequest) -> RequestRecord:
        return await self.client.send(req, self.clock.now())

    async def together(self, tokens: int, count: int, max_tokens: int) -> list[RequestRecord]:
        reqs = [self.prepare(tokens, max_tokens) for _ in range(count)]
        return list(await asyncio.gather(*(self.one(r) for r in reqs)))

    def prompt_tokens(self, rec: RequestRecord, asked: int) -> int:
        """The prompt's tokens as the server counted them (option A) when it said, else as built."""
        return rec.input_tokens if self.count_a and rec.input_tokens else asked


async def measure_interference(probe: Prober, plan: ProbePlan, prefill: list[PrefillPoint],
                               step_s: float) -> list[Interference]:  # fmt: skip
    """A prompt sent while one request decodes alone, INTERFERENCE_REPEATS times: where the running request's token
    fell against the newcomer's first (`interference`).  `step_s`: the decode step of one sequence."""
    newcomer = next((x for x in prefill if x.ttft_s >= NEWCOMER_STEPS * step_s), prefill[-1])
    # the running request's own prefill, as the isolated prompts measured it: the newcomer is sent a few decode
    # steps after it (sent sooner, both prompts can share one step, and nothing is learnt)
    running_ttft = float(np.interp(plan.short_prompt, [x.prompt_tokens for x in prefill], [x.ttft_s for x in prefill]))
    delay = running_ttft + NEWCOMER_STEPS * step_s
    output = min(max(plan.decode_tokens, int((delay + newcomer.ttft_s) / step_s) + 3 * NEWCOMER_STEPS),
                 MAX_RUNNING_TOKENS)  # fmt: skip
    out = []
    for _ in range(INTERFERENCE_REPEATS):
        running = asyncio.create_task(probe.one(probe.prepare(plan.short_prompt, output)))
        await asyncio.sleep(delay)
        new = await probe.one(probe.prepare(newcomer.prompt_tokens, 2))
        run = await running
        if run.status == new.status == "ok" and run.token_times and new.token_times:
            times = np.asarray(run.token_times)
            point = interference(times, new.token_times[0])
            if point is not None:
                scene = {
                    "running_prompt": probe.prompt_tokens(run, plan.short_prompt),
                    "running_output": output,
                    "prompt_tokens": probe.prompt_tokens(new, newcomer.prompt_tokens),
                    "delay_s": new.submitted_at - run.submitted_at,
                    "stall_s": longest_gap(times, new.submitted_at, new.token_times[0]),
                    "newcomer_ttft_s": new.token_times[0] - new.submitted_at,
                }
                out.append(point.model_copy(update=scene))
    return out


class KvGauge:
    """Polls the KV usage gauge of /metrics (vLLM, SGLang, llama.cpp names) while requests run."""

    def __init__(self, base_url: str, clock: RunClock, headers: dict[str, str]) -> None:
        self.url = endpoint(base_url, "/metrics")
        self.clock = clock
        self.headers = headers
        self.samples: list[tuple[float, float]] = []
        self.available = True

    async def read(self, session: aiohttp.ClientSession) -> float | None:
        try:
            async with session.get(self.url, headers=self.headers) as r:
                if r.status != 200:
                    return None
                text = await r.text()
        except (aiohttp.ClientError, TimeoutError):
            return None
        try:
            families = {f.name: f for f in text_string_to_metric_families(text)}
        except ValueError:
            return None
        for name in ROLES["kv_usage"]:
            family = families.get(name)
            if family is not None and family.samples:
                return float(family.samples[0].value)
        return None

    async def watch(self, stop: asyncio.Event) -> None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
            while not stop.is_set() and self.available:
                value = await self.read(session)
                if value is None:
                    self.available = False
                    return
                self.samples.append((self.clock.now(), value))
                await asyncio.sleep(GAUGE_INTERVAL_S)


def kv_capacity(samples: list[tuple[float, float]], times: list[np.ndarray], prompts: list[int]) -> float | None:
    """Tokens held / usage at the gauge's samples taken while every request streamed: the capacity in tokens."""
    if not times or any(len(t) == 0 for t in times):
        return None
    start, end = max(t[0] for t in times), min(t[-1] for t in times)
    estimates = []
    for at, usage in samples:
        if start <= at <= end and usage > 0:
            held = sum(p + int(np.searchsorted(t, at, side="right")) for t, p in zip(times, prompts, strict=True))
            estimates.append(held / usage)
    return float(np.median(estimates)) if estimates else None


@dataclass
class Probing:
    """One probe of a server under way: the prober, the plan and its deadline (time.monotonic), where each stage says
    what it did, and what the stages found so far (ProbeData's fields)."""

    probe: Prober
    plan: ProbePlan
    deadline: float
    say: Callable[[str], None]
    notes: list[str] = field(default_factory=list)
    prefill: list[PrefillPoint] = field(default_factory=list)
    decode: list[DecodePoint] = field(default_factory=list)
    turns: list[Turnaround] = field(default_factory=list)
    mixing: list[Interference] = field(default_factory=list)
    peak: int = 1
    most_sent: int = 1
    kv: float | None = None
    held_most: int = 0  # the KV tokens held where `kv` was estimated: the most held, the most precise
    kv_source: str = "not measured"
    cache: PrefixCacheProbe | None = None
    loops: list[ClosedLoop] = field(default_factory=list)
    together: list[SentTogether] = field(default_factory=list)

    def data(self, source: str, duration_s: float) -> ProbeData:
        return ProbeData(
            source=source,
            prefill=self.prefill,
            decode=self.decode,
            turnarounds=self.turns,
            interference=self.mixing,
            largest_batch=max(self.peak, 1),
            most_sent=self.most_sent,
            kv_capacity_tokens=None if self.kv is None else round(self.kv),
            kv_capacity_source=self.kv_source,
            prefix_cache=self.cache,
            closed_loops=self.loops,
            together=self.together,
            duration_s=duration_s,
            notes=self.notes,
        )


async def probe_server(
    config: ClientConfig,
    plan: ProbePlan,
    backend: str = "openai",
    tokenizer: str | None = None,
    declared: str | None = None,
    say: Callable[[str], None] = lambda line: None,
    metrics_url: str | None = None,
) -> ProbeData:
    """Measure the server; `say` gets one line per stage; `metrics_url` is where /metrics lives (the base URL)."""
    t0 = time.monotonic()
    if declared is None:
        declared = await declared_tokenizer(
            config.base_url if backend == "openai" else None, config.model, config.headers()
        )
    counting = choose_counting(tokenizer, declared)
    clock = RunClock()
    client = open_backend(backend, config, clock)
    # a seed of its own each probe: a server's prefix cache keeps an earlier probe's prompts (llama-server's slots
    # served a second calibration's isolated prompts from the first's KV), and a hit is not a prefill
    seed = secrets.randbits(32)
    probe = Prober(client, ExactPrompter(counting.tokenizer, chat=templated(config.api), seed=seed), clock,
                   counting.method == "A")  # fmt: skip
    context = (await list_models(config)).context(config.model) if backend == "openai" else None
    capped = context is not None and max(max(plan.lengths), plan.long_prompt) + plan.decode_tokens > context
    if context is not None and capped:
        plan = plan.capped(context - plan.decode_tokens)
    run = Probing(probe, plan, t0 + plan.budget_s, say)
    if capped:
        run.notes.append(f"prompts of at most {plan.long_prompt} tokens: the server holds {context} tokens a request "
                         "(max_model_len, as its /v1/models says)")  # fmt: skip
    try:
        await warm_up(probe, plan)
        await isolated_prompts(run)
        gauge = KvGauge(metrics_url or config.base_url, clock, config.headers())
        await ladders(run, gauge)
        if run.peak > 1:
            await closed_loops(run)
        if time.monotonic() < run.deadline:
            await prefix_cache(run)
        if not gauge.available:
            run.notes.append("the server has no KV usage gauge in /metrics: kv_capacity_tokens is not calibrated")
    finally:
        await client.close()
    return run.data(config.base_url, time.monotonic() - t0)


async def warm_up(probe: Prober, plan: ProbePlan) -> None:
    """One short prompt (refused: the probe ends) and one at the longest length, neither measured."""
    warm = await probe.one(probe.prepare(plan.short_prompt, 2))
    if warm.status != "ok":
        raise UserError(f"the server refused the probe's first request: {warm.error or warm.status}")
    # and once at the longest length, unmeasured: a server's first long prompt sizes its buffers (llama.cpp's
    # first 256-token prefill after an idle spell ran 25% slower than the next on two cores)
    await probe.one(probe.prepare(max(plan.lengths), 2))


async def isolated_prompts(run: Probing) -> None:
    """The prefill points: each length's median TTFT sent alone.  Every length once, then again, so a cut by the
    budget still leaves each length measured."""
    probe, plan = run.probe, run.plan
    ttfts: dict[int, list[float]] = {}
    for rep in range(plan.repeats):
        for length in plan.lengths:
            if time.monotonic() > run.deadline:
                break
            rec = await probe.one(probe.prepare(length, 2))
            if rec.status == "ok" and rec.token_times:
                ttfts.setdefault(probe.prompt_tokens(rec, length), []).append(rec.token_times[0] - rec.submitted_at)
            elif rep == 0:
                run.notes.append(f"a {length}-token prompt failed ({rec.error or rec.status}): longer ones skipped")
                break
    run.prefill = [PrefillPoint(prompt_tokens=n, ttft_s=float(np.median(v))) for n, v in sorted(ttfts.items())]
    run.say(f"isolated prompts: {len(run.prefill)} lengths, {sum(map(len, ttfts.values()))} requests")


async def ladders(run: Probing, gauge: KvGauge) -> None:
    """The short prompts' ladder, then a prompt sent while another decodes (interference), then the long prompts'
    ladder (context cost, the KV gauge)."""
    plan = run.plan
    await ladder(run, gauge, plan.short_prompt, plan.ladder, False)
    # right after the short prompts, before the long ones can spend the budget (--quick's 50 s ran out before it
    # when this came last)
    alone = [p.step_s for p in run.decode if p.batch == 1]
    if run.peak > 1 and alone and run.prefill and time.monotonic() < run.deadline:
        run.mixing = await measure_interference(run.probe, plan, run.prefill, min(alone))
        run.say(f"a prompt sent while another decodes: {len(run.mixing)} of {INTERFERENCE_REPEATS} measured")
    await ladder(run, gauge, plan.long_prompt, plan.long_ladder, True)


async def ladder(run: Probing, gauge: KvGauge, prompt: int, rungs: tuple[int, ...], long: bool) -> None:
    """`prompt`-token prompts sent together, `rungs` at a time in turn: decode points, turnarounds of a one-at-a-time
    server, the largest running batch and, with `long` prompts, the KV capacity from the gauge."""
    probe, plan = run.probe, run.plan
    last_seen = 0
    for c in rungs:
        if time.monotonic() > run.deadline:
            run.notes.append(f"the time budget ({plan.budget_s:.0f} s) ended the probe before {c} x {prompt} tokens")
            break
        stop = asyncio.Event()
        watcher = asyncio.create_task(gauge.watch(stop)) if long and gauge.available else None
        recs = await probe.together(prompt, c, plan.decode_tokens)
        stop.set()
        if watcher is not None:
            await watcher
        ok = [r for r in recs if r.status == "ok" and r.token_times]
        if len(ok) < len(recs):
            run.notes.append(f"{len(recs) - len(ok)} of {c} requests with {prompt}-token prompts failed")
        times = [np.asarray(r.token_times) for r in ok]
        prompts = [probe.prompt_tokens(r, prompt) for r in ok]
        if long and c > 1 and len(ok) == c:  # the token budget shows in how far apart their prefills end
            ttfts = sorted(r.token_times[0] - r.submitted_at for r in ok)
            run.together.append(SentTogether(prompt_tokens=prompts[0], ttfts_s=ttfts))
        run.decode += decode_points(times, prompts, sent=[r.submitted_at for r in ok])
        seen = streaming_peak(times)
        if seen == 1:
            run.turns += turnarounds(times, prompts)
        run.peak = max(run.peak, seen)
        run.most_sent = max(run.most_sent, c)
        if watcher is not None and gauge.samples:
            est = kv_capacity(gauge.samples, times, prompts)
            gauge.samples.clear()
            if est is not None and c * prompt >= run.held_most:  # the most KV held: the most precise
                run.kv, run.held_most = est, c * prompt
                run.kv_source = "tokens held / the KV usage gauge of /metrics"
        run.say(f"{c} together, {prompt}-token prompts: {seen} streaming at most")
        # the server queued some and its running batch stopped growing: sending more shows nothing new,
        # except to a one-at-a-time server more turnarounds after short prompts (where the prefill
        # subtracted, and so its error, is small).  A batch that still grew goes on: a server that admits
        # requests a step or two apart runs fewer than it was sent at first, yet batches more when sent more
        one_at_a_time = seen == 1 and not long
        if seen < c and seen <= last_seen and not (one_at_a_time and len(run.turns) < MIN_SHORT_TURNS):
            break
        last_seen = seen


async def closed_loop(probe: Prober, prompt: int, output: int, concurrency: int, most: int,
                      seconds: float) -> ClosedLoop | None:  # fmt: skip
    """`concurrency` requests in flight, each completion sending the next, until `most` were sent or `seconds` passed;
    None when any failed."""
    sent = failed = 0
    counted = prompt
    stop = time.monotonic() + seconds
    start = last = probe.clock.now()

    async def one_slot() -> None:
        nonlocal sent, failed, counted, last
        while sent < most and (sent < concurrency or time.monotonic() < stop):
            sent += 1
            rec = await probe.one(probe.prepare(prompt, output))
            failed += rec.status != "ok" or len(rec.token_times) != output
            counted = probe.prompt_tokens(rec, prompt)
            last = max(last, probe.clock.now())

    await asyncio.gather(*(one_slot() for _ in range(concurrency)))
    if failed:
        return None
    return ClosedLoop(prompt_tokens=counted, output_tokens=output, concurrency=concurrency, requests=sent,
                      duration_s=last - start)  # fmt: skip


async def closed_loops(run: Probing) -> None:
    """Closed loops at twice the largest batch seen (the server's queue never empties): short prompts with
    SHORT_REPLY output tokens (where per-request work weighs most), a quarter of the ladders' and all of them (where
    the decode steps do), and longer prompts with SHORT_REPLY (where per-prompt-token work does).  What the engine
    spends per request beyond its steps is fitted to them (`sim.load_fit`), each loop held out in turn."""
    probe, plan = run.probe, run.plan
    concurrency = 2 * run.peak
    short, longer = plan.short_prompt, min(max(plan.long_prompt // 4, 4 * plan.short_prompt), plan.long_prompt)
    shapes = [(short, SHORT_REPLY), (short, max(plan.decode_tokens // 4, SHORT_REPLY + 1)), (short, plan.decode_tokens),
              (longer, SHORT_REPLY)]  # fmt: skip
    for prompt, output in shapes:
        if time.monotonic() > run.deadline:
            run.notes.append(f"the time budget ({plan.budget_s:.0f} s) ended the probe before its closed loops")
            return
        most = CLOSED_LOOP_REQUESTS * concurrency // output  # about as many tokens in each loop
        seconds = min(plan.closed_loop_s, max(run.deadline - time.monotonic(), 0.0))
        loop = await closed_loop(probe, prompt, output, concurrency, most, seconds)
        if loop is None:
            run.notes.append(f"a closed loop of {prompt}-token prompts and {output}-token replies had failures: "
                             "not used")  # fmt: skip
            continue
        run.loops.append(loop)
        run.say(f"closed loop at {concurrency}, {loop.prompt_tokens}+{output} tokens: {loop.requests} requests in "
                f"{loop.duration_s:.2f} s")  # fmt: skip


async def prefix_cache(run: Probing) -> None:
    """One long prompt sent twice: a second TTFT well under the first's shows a prefix cache."""
    probe, plan = run.probe, run.plan
    rid = ids.request_id(ids.PREFILL, 10**6)
    first = await probe.one(probe.prepare(plan.long_prompt, 2, rid))
    second = await probe.one(probe.prepare(plan.long_prompt, 2, rid))
    if first.status == second.status == "ok" and first.token_times and second.token_times:
        run.cache = PrefixCacheProbe(
            prompt_tokens=probe.prompt_tokens(first, plan.long_prompt),
            first_ttft_s=first.token_times[0] - first.submitted_at,
            second_ttft_s=second.token_times[0] - second.submitted_at,
        )
        run.say(f"prefix cache: {'present' if run.cache.present else 'absent'}")
