"""A simulated run as a normal run directory: records with per-token times, summary.json with a `sim` block."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa

from infermeter import __version__
from infermeter.metrics import RecordColumns, summarize
from infermeter.metrics.columns import Ragged
from infermeter.metrics.fluidity import parse_deadlines
from infermeter.metrics.statistics import stats, stats_weighted
from infermeter.metrics.summary_model import Sim, Stats, Summary
from infermeter.records import LATER_FIELDS, SCHEMA, RunInfo, RunWriter, write_summary
from infermeter.run_info import Engine, Load, Sut, Tokenizer, Warmup, WorkloadDeclaration
from infermeter.sim.simulator import SimOutcome
from infermeter.units import MS_PER_S

TokenTimes = Literal["auto", "full", "endpoints"]
DEFAULT_TOKEN_LIMIT = 25_000_000  # above this many tokens, `auto` records endpoints only (100k requests fit)


def _list_array(r: Ragged, dtype: pa.DataType) -> pa.ListArray:
    offsets = pa.array(r.offsets.astype(np.int32))
    return pa.ListArray.from_arrays(offsets, pa.array(r.values, type=dtype))


def records_table(out: SimOutcome, mode: Literal["full", "endpoints"]) -> pa.Table:
    """One RequestRecord per request; every token is its own SSE event, and the times are the engine's."""
    req = out.requests
    n = len(req)
    times = out.emissions.token_times() if mode == "full" else out.emissions.endpoints()
    token_list = _list_array(times, pa.float64())
    ones = Ragged(times.offsets, np.ones(len(times.values), dtype=np.int32))
    arrivals = out.sent
    status = np.full(n, "ok", dtype=object)
    error = np.full(n, "", dtype=object)
    for idx, reason in out.rejected.items():
        status[idx], error[idx] = "error", reason
    cols = {
        "request_id": pa.array(np.arange(n, dtype=np.int64)),
        "request_class": pa.array(req.request_class.astype(str)),
        "input_tokens": pa.array(req.input_tokens.astype(np.int32)),
        "output_tokens": pa.array(out.emissions.tokens_per_request().astype(np.int32)),
        "max_tokens": pa.array(req.output_tokens.astype(np.int32)),
        "scheduled_at": pa.array(arrivals.astype(float)),
        "submitted_at": pa.array(arrivals.astype(float)),
        "token_times": token_list,
        "chunk_times": token_list,
        "chunk_tokens": _list_array(ones, pa.int32()),
        "server_token_times": pa.nulls(n, pa.list_(pa.float64())),
        "status": pa.array(status.astype(str)),
        "error": pa.array(error.astype(str)),
        # no text, no tokenizer, no server: the workload's counts are the counts, and nothing is reported
        **{name: pa.nulls(n, SCHEMA.field(name).type) for name in LATER_FIELDS},
    }
    return pa.Table.from_pydict(cols, schema=SCHEMA)


def tpot_e2e(out: SimOutcome) -> tuple[np.ndarray, np.ndarray]:
    """Each request's TPOT (NaN under two tokens) and end-to-end latency from its send, in seconds: what the
    token and request SLAs of multi-bin dynamic batching judge."""
    first, last = out.emissions.first_token(), out.emissions.last_token()
    n_tok = out.emissions.tokens_per_request()
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(n_tok >= 2, (last - first) / (n_tok - 1), np.nan)
    return tpot, last - out.sent


def makespan_of(out: SimOutcome) -> float:
    """From the first send until the last engine is free again (a static batch outlasts its last token)."""
    return float(out.end_time - out.sent.min()) if len(out.requests) else 0.0


def sim_block(out: SimOutcome) -> Sim:
    """The seed's own metrics (seeds/004 section 9) for summary.json's `sim` block."""
    cfg = out.config
    n = len(out.requests)
    ok = out.served()
    arrivals = out.sent
    makespan = makespan_of(out)
    n_tok = out.emissions.tokens_per_request()
    tpot, e2e = tpot_e2e(out)
    token_viol = np.sum(tpot[ok] > cfg.d_sla_token) / max(int(np.sum(ok & (n_tok >= 2))), 1)
    request_viol = (np.sum(e2e[ok] > cfg.d_sla_request) + (n - int(ok.sum()))) / max(n, 1)
    return Sim(
        scheduler=cfg.scheduler.name,
        engines=out.engines,
        latency_model=cfg.latency_model().name,
        kv_capacity_tokens=cfg.capacity(),
        gpu_utilization=float(out.busy_time.sum() / (out.engines * makespan)) if makespan > 0 else 0.0,
        avg_batch_size=out.batch_size_sum / out.steps if out.steps else 0.0,
        steps=out.steps,
        queueing_delay_ms=stats(out.first_scheduled - arrivals, MS_PER_S),
        token_sla_violation=float(token_viol),
        request_sla_violation=float(request_viol),
        d_sla_token_ms=cfg.d_sla_token * MS_PER_S,
        d_sla_request_s=cfg.d_sla_request,
        preemptions=int(out.preemptions.sum()),
        preempted_requests=int(np.sum(out.preemptions > 0)),
        rejected=len(out.rejected),
        peak_kv_usage=out.peak_kv_usage,
        makespan_s=float(makespan),
        decode_step_time_ms=out.decode_time / out.decode_steps * MS_PER_S if out.decode_steps else None,
        seconds_per_generated_token=float(out.busy_time.sum() / n_tok.sum()) if n_tok.sum() else None,
    )


def _itl_from_emissions(out: SimOutcome, ok: np.ndarray) -> tuple[Stats, Stats, Stats]:
    """ITL, jitter and max pause computed from the emission runs, for runs that record endpoints only."""
    owner, value, weight = out.emissions.itl_weighted()
    keep = ok[owner]
    owner, value, weight = owner[keep], value[keep], weight[keep]
    n = len(out.requests)
    w = np.bincount(owner, weights=weight, minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.bincount(owner, weights=weight * value, minlength=n) / w
        var = np.bincount(owner, weights=weight * (value - mean[owner]) ** 2, minlength=n) / w
    max_pause = np.full(n, -np.inf)
    np.maximum.at(max_pause, owner, value)
    return (
        stats_weighted(value, weight, MS_PER_S),
        stats(np.where(w >= 2, np.sqrt(var), np.nan), MS_PER_S),
        stats(np.where(w >= 1, max_pause, np.nan), MS_PER_S),
    )


def write_sim_run(
    out: SimOutcome,
    run_dir: Path,
    declaration: dict[str, Any],
    seed: int,
    token_times: TokenTimes = "auto",
    token_limit: int = DEFAULT_TOKEN_LIMIT,
    slo: dict[str, float] | None = None,
    deadlines: str | None = None,
    concurrency: int | None = None,
) -> Summary:
    """Write run.json, records.parquet and summary.json; returns the summary (`concurrency`: a closed loop's)."""
    total_tokens = int(out.emissions.count.sum())
    mode: Literal["full", "endpoints"] = (
        ("full" if total_tokens <= token_limit else "endpoints") if token_times == "auto" else token_times
    )
    cfg = out.config
    workload = WorkloadDeclaration.model_validate(declaration)
    info = RunInfo(
        kind="simulated",
        sut=Sut(
            model=f"engine model: {cfg.latency_model().name} latency, scheduler {cfg.scheduler.name}"
            + (f", calibrated against {cfg.calibration.source}" if cfg.calibration else ""),
            hardware=f"{out.engines} x simulated engine, KV capacity {cfg.capacity()} tokens each",
            software=f"infermeter {__version__} discrete-event simulator",
            boundary="Model Engine",
            prefix_caching="not modelled",
            guardrails="none (simulated engine)",
        ),
        workload=workload,
        load=Load(
            description=f"closed loop: {concurrency} requests in flight, the next sent as one completes"
            if concurrency is not None
            else workload.arrivals.description
            if workload.arrivals
            else "all requests at t=0 (offline)",
            requests=len(out.requests),
            concurrency=concurrency,
        ),
        tokenizer=Tokenizer(name="workload token counts", counting_method="A", source="workload specification"),
        itl_option="B",
        warmup=Warmup(done=False, note="a simulated engine has no warm-up effects"),
        slo=slo or {},
        engine=Engine(
            latency_model=cfg.latency_model().name, kv_capacity=cfg.capacity(), config=cfg.model_dump(mode="json")
        ),
        token_times=mode,
        deadlines=deadlines,
        notes=[f"simulated run: every token is its own event at the engine's emission time ({mode} token times)"],
    )
    table = records_table(out, mode)
    with RunWriter(run_dir, info) as writer:
        writer.extend(table)
    cols = RecordColumns.from_table(table, "A")
    full = mode == "full"
    summary = summarize(cols, "B", slo, parse_deadlines(deadlines) if deadlines and full else None)
    if mode == "endpoints":
        summary.itl_ms, summary.jitter_ms, summary.max_pause_ms = _itl_from_emissions(out, cols.ok)
        summary.itl_source = "simulator emissions (records hold first and last token times only)"
        if deadlines:
            summary.fluidity_note = "fluidity needs every token time: rerun with --token-times full"
    summary.sim = sim_block(out)
    write_summary(run_dir, summary)
    return summary
