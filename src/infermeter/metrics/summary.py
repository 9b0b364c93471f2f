"""The run summary (summary.json): every metric over a run's records, as the Summary model (summary_model), and a
run directory's summary as every reader takes it (summary.json as written, or computed again from the records)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from infermeter.metrics import fairness, latency
from infermeter.metrics.breakdowns import breakdowns
from infermeter.metrics.columns import RecordColumns, distinct
from infermeter.metrics.endpoint import endpoint_block
from infermeter.metrics.fluidity import Deadlines, fluidity_block, parse_deadlines
from infermeter.metrics.goodput import meets_slo
from infermeter.metrics.latency import INPUT_BUCKETS, ItlOption, bucket_label
from infermeter.metrics.server_timing import server_timing
from infermeter.metrics.statistics import stats
from infermeter.metrics.summary_model import (
    Chunking,
    ClassLatency,
    ErrorCount,
    Fairness,
    Goodput,
    Requests,
    Stats,
    Summary,
    TtftBucket,
    read_summary,
)
from infermeter.metrics.throughput import measurement_window, throughput
from infermeter.records import STATUSES, failure_reason
from infermeter.run_info import RunInfo
from infermeter.units import MS_PER_S


@dataclass(frozen=True)
class KnownItl:
    """ITL known otherwise than from the records' token times (a simulation that records each stream's first and
    last token only): the samples' Stats in ms, and each request's jitter and max pause in seconds (NaN for none)."""

    itl_ms: Stats
    jitter: np.ndarray
    max_pause: np.ndarray


def summarize(
    cols: RecordColumns,
    itl_option: ItlOption = "B",
    slo: dict[str, float] | None = None,
    deadlines: Deadlines | None = None,
    known_itl: KnownItl | None = None,
) -> Summary:
    """Compute the whole summary; SLO bounds are in seconds (see metrics.goodput.parse_slo).  With deadlines
    the `fluidity` block is filled (seeds/001), else it is null.  With `known_itl` the ITL, jitter and max pause
    (and the max-pause SLO) are those, and the records' token times are not differenced at all."""
    if known_itl is not None and deadlines is not None:
        raise ValueError("fluidity needs every token time: it cannot be computed from a known ITL")
    ok = cols.ok
    n_ok = int(ok.sum())
    status_counts = Counter(cols.status[~ok].tolist()) + Counter({"ok": n_ok})  # a Python object per failure only

    itl = latency.itl(cols, itl_option) if known_itl is None else None  # first: B's pass gives the token ends too
    ttft = latency.ttft(cols)
    e2e = latency.e2e(cols)
    tpot = latency.tpot(cols)
    norm = latency.normalized_latency(cols)
    if itl is not None:
        itl_ms, max_pause, jitter = stats(itl.values, MS_PER_S), latency.max_pause(itl), latency.jitter(itl)
    else:
        assert known_itl is not None
        itl_ms, max_pause, jitter = known_itl.itl_ms, known_itl.max_pause, known_itl.jitter
    start, end = measurement_window(cols)
    window = end - start
    reported = server_timing(cols)
    optional: dict[str, Any] = {"server_timing": reported} if reported is not None else {}  # absent, not null
    optional.update((k, v) for k, v in breakdowns(cols, ttft, itl)._asdict().items() if v is not None)
    if (endpoint := endpoint_block(cols, e2e, window)) is not None:  # embeddings, rerank: one body per request
        optional["endpoint"] = endpoint

    return Summary(
        requests=Requests(
            total=cols.n,
            ok=n_ok,
            failed=cols.n - n_ok,
            success_rate=(n_ok / cols.n) if cols.n else None,
            by_status={s: status_counts.get(s, 0) for s in STATUSES},
            failures_by_reason=_failures_by_reason(cols),
            errors=_top_errors(cols),
        ),
        duration_s=window,
        ttft_ms=stats(ttft, MS_PER_S),
        itl_ms=itl_ms,
        tpot_ms=stats(tpot, MS_PER_S),
        e2e_ms=stats(e2e, MS_PER_S),
        normalized_latency_ms=stats(norm, MS_PER_S),
        throughput=throughput(cols, window),
        goodput=_goodput(cols, slo or {}, window, ttft, tpot, max_pause, e2e),
        fluidity=None
        if deadlines is None or itl is None  # (deadlines and a known ITL exclude each other: see above)
        else fluidity_block(
            latency.token_times(cols, itl_option),
            cols.submitted_at,
            cols.input_tokens,
            ok,
            deadlines,
            tpot,
            itl.values,
        ),
        itl_option=itl_option,
        jitter_ms=stats(jitter, MS_PER_S),
        max_pause_ms=stats(max_pause, MS_PER_S),
        ttft_by_input_tokens=_ttft_by_bucket(cols, ttft),
        chunking=_chunking(cols),
        fairness=_fairness(cols, ttft, tpot, norm),
        output_tokens=stats(np.where(ok, cols.output_tokens, np.nan)),
        input_tokens=stats(np.where(ok, cols.input_tokens, np.nan)),
        **optional,
    )


def run_summary(run_dir: Path, info: RunInfo) -> Summary:
    """A run's summary: its summary.json as written; for a run that left none (stopped by a full disk, or killed),
    computed from its records as `summary_of_run` does."""
    stored = read_summary(run_dir)
    return stored if stored is not None else summary_of_run(run_dir, info)


def summary_of_run(
    run_dir: Path,
    info: RunInfo,
    cols: RecordColumns | None = None,
    itl_option: ItlOption | None = None,
    slo: dict[str, float] | None = None,
    deadlines: str | None = None,
) -> Summary:
    """The summary `infermeter report` computes from a run's records (`cols`: already read): under run.json's ITL
    option, SLO (in seconds) and deadlines unless others are given ("": none), with the blocks the records alone
    cannot give back taken from run.json and summary.json (`kept_blocks`)."""
    cols = cols if cols is not None else RecordColumns.of_run(run_dir, info)
    spec = deadlines if deadlines is not None else info.deadlines
    summary = summarize(
        cols,
        itl_option or info.itl_option,
        slo if slo is not None else dict(info.slo),
        parse_deadlines(spec) if spec else None,
    )
    kept_blocks(summary, read_summary(run_dir), info)
    return summary


def kept_blocks(summary: Summary, stored: Summary | None, info: RunInfo) -> None:
    """Blocks the records alone cannot give back: the client's health from run.json; from summary.json the
    simulator's `sim` block, the server's metrics and energy, and ITL (with its source, and the goodput its max
    pause decides) when only the endpoints of each stream were recorded."""
    if info.client_health is not None:
        summary.client_health = info.client_health
    if stored is None:
        return
    if stored.sim is not None:
        summary.sim = stored.sim
    if stored.server_metrics is not None:
        summary.server_metrics = stored.server_metrics
    if stored.energy is not None:
        summary.energy = stored.energy
    if info.token_times == "endpoints":
        summary.itl_ms, summary.jitter_ms, summary.max_pause_ms = stored.itl_ms, stored.jitter_ms, stored.max_pause_ms
        if stored.goodput.slo == summary.goodput.slo:  # a max-pause bound judges each stream's longest pause,
            summary.goodput = stored.goodput  # which only the simulation knew
        summary.fluidity = stored.fluidity
        if stored.itl_source is not None:
            summary.itl_source = stored.itl_source
        if stored.fluidity_note is not None:
            summary.fluidity_note = stored.fluidity_note


def _failures_by_reason(cols: RecordColumns) -> dict[str, int]:
    """Failed requests counted by the reason part of their error ("HTTP 429", "first-token timeout", ...)."""
    failed = ~cols.ok
    return dict(Counter(failure_reason(e) for e in cols.error[failed].tolist()).most_common())


def _top_errors(cols: RecordColumns, limit: int = 5) -> list[ErrorCount]:
    reasons = Counter(cols.error[~cols.ok].tolist())
    return [ErrorCount(error=r, count=c) for r, c in reasons.most_common(limit)]


def _goodput(
    cols: RecordColumns,
    slo: dict[str, float],
    window: float,
    ttft: np.ndarray,
    tpot: np.ndarray,
    max_pause: np.ndarray,
    e2e: np.ndarray,
) -> Goodput:
    slo_ms = {k: v * MS_PER_S for k, v in slo.items()}
    if not slo:
        return Goodput(slo={}, req_s=None, fraction=None, met=None)
    good = meets_slo(cols.ok, {"ttft": ttft, "tpot": tpot, "itl": max_pause, "e2e": e2e}, slo)
    met = int(good.sum())
    return Goodput(
        slo=slo_ms,
        req_s=met / window if window > 0 else 0.0,
        fraction=met / cols.n if cols.n else None,
        met=met,
    )


def _ttft_by_bucket(cols: RecordColumns, ttft: np.ndarray) -> list[TtftBucket]:
    idx = latency.input_bucket_index(cols.input_tokens)
    rows = []
    for k, (lo, hi) in enumerate(INPUT_BUCKETS):
        s = stats(ttft[idx == k], MS_PER_S)
        if s.n:
            rows.append(TtftBucket(bucket=bucket_label(lo, hi), n=s.n, p50=s.p50, p95=s.p95, p99=s.p99))
    return rows


def _chunking(cols: RecordColumns) -> Chunking:
    """Delivery pattern (draft B.2.1): tokens per content chunk, and which ITL option it calls for."""
    sizes = cols.chunk_sizes()
    if sizes.chunks == 0:
        return Chunking(chunks=0, tokens_per_chunk_mean=None, single_token_share=None, server_times=False)
    return Chunking(
        chunks=sizes.chunks,
        tokens_per_chunk_mean=sizes.tokens / sizes.chunks,
        tokens_per_chunk_max=sizes.top,
        single_token_share=sizes.single / sizes.chunks,
        server_times=cols.any_server_times(cols.ok),
    )


def _fairness(cols: RecordColumns, ttft: np.ndarray, tpot: np.ndarray, norm: np.ndarray) -> Fairness:
    classes: dict[str, ClassLatency] = {}
    for name in distinct(cols.request_class):
        member = cols.request_class == name
        t, p = stats(ttft[member], MS_PER_S), stats(tpot[member], MS_PER_S)
        classes[name] = ClassLatency(
            count=int(member.sum()),
            ok=int((member & cols.ok).sum()),
            ttft_p50=t.p50,
            ttft_p99=t.p99,
            tpot_p50=p.p50,
            tpot_p99=p.p99,
        )
    return Fairness(
        jain_index=fairness.jain_index(norm),
        starvation=fairness.starvation_rate(ttft, cols.request_class),
        wait_metric="ttft",
        classes=classes,
    )
