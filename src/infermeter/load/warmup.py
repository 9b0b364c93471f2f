"""The draft's warm-up (section 4.5): probes, a warm-up load, and probes until the server is stable.  The warm-up's
requests are the run's workload drawn with another seed, opening with the run's own shared prefixes so that a prefix
cache holds them when the measurement starts (4.5.1 item 4), or another workload's (--warmup-workload)."""

from __future__ import annotations

import asyncio
import time

import numpy as np

from infermeter.client.backend import Backend
from infermeter.client.request import PreparedRequest
from infermeter.load.driver import LiveStats, LoadPattern, drive
from infermeter.load.plan import WarmupPlan
from infermeter.load.prompts import prepared
from infermeter.load.request_extras import RequestExtras
from infermeter.load.request_inputs import Batch, batched
from infermeter.records import RequestRecord
from infermeter.run_info import Warmup
from infermeter.workload import ids
from infermeter.workload.prompts import ExactPrompter
from infermeter.workload.spec import Requests
from infermeter.workload.template_floor import floor_to_template

WARMUP_MIN_REQUESTS = 100  # draft 4.5.1
WARMUP_MIN_TOKENS = 10_000
PROBE_INPUT, PROBE_OUTPUT = 32, 16
PROBE_STABLE = 0.10  # 4.5.2: less than 10% variation across consecutive probes
MAX_WARMUP = 100_000  # requests: the auto warm-up doubles its draw up to this to reach 10,000 output tokens


async def probe(client: Backend, n: int, prompter: ExactPrompter, batch: Batch | None = None) -> float | None:
    """One isolated request's end-to-end time (draft 4.5.2's stability probe): an embeddings or rerank probe carries
    one input (and a query), and ends with its reply's last byte."""
    rid = ids.request_id(ids.PROBE, n)
    length = prompter.overhead + PROBE_INPUT  # a chat template's own tokens on top
    req = PreparedRequest(rid, prompter.build(length, rid), length, PROBE_OUTPUT, ref_input_tokens=length)
    rec = await client.send(req if batch is None else batched(prompter, req, Batch(batch.api)), client.clock.now())
    end = rec.token_times[-1] if rec.token_times else rec.completed_at
    if rec.status != "ok" or end is None:
        return None
    return end - rec.submitted_at


def with_run_prefixes(warm: Requests, run: Requests) -> Requests:
    """The warm-up's requests opening with the run's shared prefixes: each prefix the run uses at the run's length
    (its text is built from the run's seed), a prefix the run never sends dropped; the requests' own words stay
    the warm-up's, so no measured prompt is sent before the measurement."""
    shared = run.prefix_id >= 0
    if not np.any(warm.prefix_id >= 0):
        return warm
    lengths = np.zeros(int(max(run.prefix_id.max(initial=-1), warm.prefix_id.max(initial=-1))) + 1, dtype=np.int64)
    used = np.zeros(len(lengths), dtype=bool)
    lengths[run.prefix_id[shared]] = run.prefix_tokens[shared]
    used[run.prefix_id[shared]] = True
    keep = (warm.prefix_id >= 0) & used[np.maximum(warm.prefix_id, 0)]
    prefix_id = np.where(keep, warm.prefix_id, -1)
    prefix_tokens = np.where(keep, lengths[np.maximum(warm.prefix_id, 0)], 0)
    inputs = warm.input_tokens - warm.prefix_tokens + prefix_tokens
    return Requests(
        warm.request_class, inputs, warm.output_tokens, prefix_id, prefix_tokens, warm.arrival_s, warm.content
    )


def _draw(plan: WarmupPlan, n: int, run: Requests | None) -> Requests:
    """n warm-up requests: from --warmup-workload, else the run's workload with the run's shared prefixes."""
    reqs, _ = plan.source.draw(n, plan.seed + 1, plan.arrivals, plan.rps_scale)
    return reqs if plan.own is not None or run is None else with_run_prefixes(reqs, run)


def _requests(plan: WarmupPlan, run: Requests | None) -> Requests:
    """The warm-up's requests: exactly `count`, or (the draft's rule) the shortest head of the workload with both
    100 requests and 10,000 output tokens, its draw doubled until it holds them."""
    most = plan.source.size() if plan.own is None else MAX_WARMUP  # a trace holds so many requests: at most all
    if plan.count != -1:
        return _draw(plan, min(plan.count, most), run)
    n = min(WARMUP_MIN_REQUESTS, most)
    reqs = _draw(plan, n, run)
    while int(reqs.output_tokens.sum()) < WARMUP_MIN_TOKENS and n < min(MAX_WARMUP, most):
        n = min(n * 2, most)
        reqs = _draw(plan, n, run)
    enough = int(np.searchsorted(np.cumsum(reqs.output_tokens), WARMUP_MIN_TOKENS)) + 1
    return reqs.head(max(WARMUP_MIN_REQUESTS, enough))


async def warm_up(
    client: Backend,
    plan: WarmupPlan,
    pattern: LoadPattern,
    stats: LiveStats,
    prompter: ExactPrompter,
    stop: asyncio.Event | None = None,
    hard_stop: asyncio.Event | None = None,
    run: Requests | None = None,
    extras: RequestExtras | None = None,
) -> Warmup:
    """Draft 4.5: probe, >= 100 requests and >= 10,000 output tokens under the run's load, drain, probe until
    stable.  Nothing of it reaches the records.  A stop ends it early (its block says so).  `run`: the measured
    requests, whose shared prefixes the warm-up sends.  `extras`: what the run's requests carry besides their
    prompt, carried by the warm-up's alike (its images and audio drawn from its own seed, a folder's cycle started
    after the run's), so that a vision or audio encoder is warm too."""
    stop = stop or asyncio.Event()
    extras = extras or RequestExtras()
    t0 = time.perf_counter()
    before = await probe(client, 0, prompter, extras.batch)
    own = plan.own is not None
    reqs = floor_to_template(_requests(plan, run), prompter, prefix_seed=plan.seed + 1 if own else plan.seed).requests
    warm_pattern = LoadPattern(
        offsets=reqs.arrival_s if pattern.offsets is not None else None,
        concurrency=pattern.concurrency,
        barrier=False,
    )
    records: list[RequestRecord] = []
    texts = prepared(
        reqs, plan.seed + 1, id_base=ids.WARMUP, prompter=prompter, prefix_seed=None if own else plan.seed,
        batch=extras.batch,
    )  # fmt: skip
    offset = len(run) if run is not None else 0  # a folder's images: the warm-up's follow the run's
    warm_requests = extras.with_media(list(texts), reqs, plan.seed + 1, ids.WARMUP, offset)
    sent: list[int] = []  # how many were sent (drive tells of each send)
    try:
        await drive(
            client, warm_requests, warm_pattern, records.append, stats, stop, grace_s=5.0, hard_stop=hard_stop,
            on_send=lambda _req, _at: sent.append(1),
        )  # fmt: skip
    finally:
        extras.close()
    # the queue drained when every request sent finished on its own: none without a record, none cut off at a stop
    in_flight = len(sent) - len(records) + sum(r.status == "cancelled" for r in records)
    probes = await _probes_until_stable(client, prompter, stop, extras.batch)
    return Warmup(
        done=not stop.is_set(),
        requests=len(records),
        failed=sum(r.status != "ok" for r in records),
        output_tokens=sum(len(r.token_times) for r in records),
        queue_drained=in_flight == 0,
        in_flight_after=in_flight,
        probe_before_s=before,
        probes_after_s=probes,
        stable=_stable(probes),
        seconds=time.perf_counter() - t0,
        workload=plan.source.spec.name if own and plan.source.spec is not None
        else "the run's workload (another seed), with the run's shared prefixes",
        shared_prefixes=0 if own or run is None else len(np.unique(reqs.prefix_id[reqs.prefix_id >= 0])),
        max_input_tokens=int(reqs.input_tokens.max()) if len(reqs) else None,
    )  # fmt: skip


def _stable(probes: list[float]) -> bool:
    """4.5.2: the last three probes within 10% of each other."""
    last = probes[-3:]
    return len(last) == 3 and max(last) <= (1 + PROBE_STABLE) * min(last)


async def _probes_until_stable(
    client: Backend, prompter: ExactPrompter, stop: asyncio.Event, batch: Batch | None = None
) -> list[float]:
    """Up to ten probes after the warm-up's load, until three in a row agree (or a stop)."""
    probes: list[float] = []
    for k in range(1, 11):
        if stop.is_set():
            break
        p = await probe(client, k, prompter, batch)
        if p is not None:
            probes.append(p)
        if _stable(probes):
            break
    return probes
