"""A simulated run as a normal run directory: records with per-token times, summary.json with a `sim` block.

`write_sim_run` writes a finished simulation's; `simulate_run` writes the records while the simulation runs
(sim/stream.py), which is how millions of requests fit in memory.  Both give the same files."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import numpy as np

from infermeter import __version__
from infermeter.engine.config import EngineConfig
from infermeter.engine.multi_bin import BinEdges
from infermeter.metrics import RecordColumns, summarize
from infermeter.metrics.columns import Ragged
from infermeter.metrics.fluidity import parse_deadlines
from infermeter.metrics.statistics import stats, stats_weighted
from infermeter.metrics.summary import KnownItl
from infermeter.metrics.summary_model import Sim, Summary
from infermeter.records import RunInfo, claim_run_dir, out_error, write_summary
from infermeter.run_info import Engine, Load, Sut, Tokenizer, Warmup
from infermeter.sim.bins import plan_bins
from infermeter.sim.predict import unreliable
from infermeter.sim.simulator import SimOutcome, simulate
from infermeter.sim.stream import CHUNK, Mode, RecordStream, RunItl, Streamed
from infermeter.units import MS_PER_S
from infermeter.workload.spec import Requests
from infermeter.workload_declaration import WorkloadDeclaration

TokenTimes = Literal["auto", "full", "endpoints"]
DEFAULT_TOKEN_LIMIT = 25_000_000  # above this many tokens, `auto` records endpoints only (100k requests fit)


def tpot_e2e(out: SimOutcome) -> tuple[np.ndarray, np.ndarray]:
    """Each request's TPOT (NaN under two tokens) and end-to-end latency from its send, in seconds: what the
    token and request SLAs of multi-bin dynamic batching judge."""
    first, last, n_tok = out.ends.first, out.ends.last, out.ends.count
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
    n_tok = out.ends.count
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


def _known_itl(itl: RunItl) -> KnownItl:
    """ITL, jitter and max pause computed from the emission runs, for runs that record endpoints only."""
    return KnownItl(stats_weighted(itl.value, itl.weight, MS_PER_S), itl.jitter, itl.max_pause)


def token_mode(token_times: TokenTimes, total_tokens: int, token_limit: int) -> Mode:
    """The token times a run records: `auto` keeps every one up to `token_limit` tokens, endpoints past it."""
    if token_times == "auto":
        return "full" if total_tokens <= token_limit else "endpoints"
    return token_times


def expected_tokens(requests: Requests, config: EngineConfig) -> int:
    """Tokens a simulation of these requests emits, known before it runs: every output token of every request
    an engine accepts (`EngineCore.rejection` refuses those whose prompt + output can never fit its KV memory)."""
    outputs = np.maximum(requests.output_tokens.astype(np.int64, copy=False), 1)
    block = config.block_size
    fits = -(-(requests.input_tokens.astype(np.int64, copy=False) + outputs) // block) <= config.capacity() // block
    return int(outputs[fits].sum())


def _run_info(
    config: EngineConfig,
    engines: int,
    n: int,
    declaration: dict[str, Any],
    mode: Mode,
    slo: dict[str, float] | None,
    deadlines: str | None,
    concurrency: int | None,
) -> RunInfo:
    workload = WorkloadDeclaration.model_validate(declaration)
    return RunInfo(
        kind="simulated",
        sut=Sut(
            model=f"engine model: {config.latency_model().name} latency, scheduler {config.scheduler.name}"
            + (f", calibrated against {config.calibration.source}" if config.calibration else ""),
            hardware=f"{engines} x simulated engine, KV capacity {config.capacity()} tokens each",
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
            requests=n,
            concurrency=concurrency,
        ),
        tokenizer=Tokenizer(name="workload token counts", counting_method="A", source="workload specification"),
        itl_option="B",
        warmup=Warmup(done=False, note="a simulated engine has no warm-up effects"),
        slo=slo or {},
        engine=Engine(
            latency_model=config.latency_model().name,
            kv_capacity=config.capacity(),
            config=config.model_dump(mode="json"),
        ),
        token_times=mode,
        deadlines=deadlines,
        notes=[f"simulated run: every token is its own event at the engine's emission time ({mode} token times)"]
        + [f"every figure of this prediction is {caveat}" for caveat in [unreliable(config.calibration)] if caveat],
    )


def _columns(requests: Requests, sent: np.ndarray, rejected: dict[int, str], streamed: Streamed) -> RecordColumns:
    """The records' columns as `RecordColumns.from_table` reads them back, built from the simulator's arrays (and
    sharing them) instead of from a table of every record: what nothing was reported for is a broadcast constant."""
    n = len(requests)
    status = np.broadcast_to(np.array("ok", dtype=object), (n,))
    error = np.broadcast_to(np.array("", dtype=object), (n,))
    if rejected:
        status, error = np.full(n, "ok", dtype=object), np.full(n, "", dtype=object)
        for idx, reason in rejected.items():
            status[idx], error[idx] = "error", reason
    times = streamed.times
    inputs = requests.input_tokens.astype(np.int64, copy=False)
    outputs = streamed.ends.count
    nothing = np.broadcast_to(np.nan, (n,))
    none = np.broadcast_to(np.int64(-1), (n,))
    classes = requests.request_class
    return RecordColumns(
        request_id=np.arange(n, dtype=np.int64),
        request_class=classes if classes.dtype == object else classes.astype(object),
        input_tokens=inputs,
        output_tokens=outputs,
        max_tokens=requests.output_tokens.astype(np.int64, copy=False),
        scheduled_at=sent,
        submitted_at=sent,
        tokens=times,
        chunks=times,
        # one token per event: int8 ones (what the summary reads of them, counts and shares, is the same)
        chunk_tokens=Ragged(times.offsets, np.ones(len(times.values), dtype=np.int8)),
        server=Ragged(np.zeros(n + 1, dtype=np.int64), np.zeros(0)),
        has_server=np.zeros(n, dtype=bool),
        status=status,
        error=error,
        cached_tokens=nothing,
        server_prefill_s=nothing,
        server_decode_s=nothing,
        server_input_tokens=inputs,
        server_output_tokens=outputs,
        ref_input_tokens=none,
        ref_output_tokens=none,
        counting="A",
    )


def _summary(
    sim: Sim,
    requests: Requests,
    sent: np.ndarray,
    rejected: dict[int, str],
    streamed: Streamed,
    slo: dict[str, float] | None,
    deadlines: str | None,
) -> Summary:
    """summary.json's figures: the records' summary, ITL from the emission runs when the records hold endpoints
    only, and the `sim` block.  The emission runs' ITL goes first, so its samples are let go before the summary
    makes its own arrays; the records' endpoints are then never differenced."""
    itl = None if streamed.itl is None else _known_itl(streamed.itl)
    streamed.itl = None
    cols = _columns(requests, sent, rejected, streamed)
    summary = summarize(cols, "B", slo, parse_deadlines(deadlines) if deadlines and itl is None else None, itl)
    if itl is not None:
        summary.itl_source = "simulator emissions (records hold first and last token times only)"
        if deadlines:
            summary.fluidity_note = "fluidity needs every token time: rerun with --token-times full"
    summary.sim = sim
    return summary


@contextlib.contextmanager
def _on_disk(run_dir: Path) -> Iterator[None]:
    """A write that fails (a full disk, a file-size limit) ends the command with what went wrong, as a live run's."""
    try:
        yield
    except OSError as exc:
        raise out_error(run_dir, exc) from None


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
    chunk: int = CHUNK,
) -> Summary:
    """Write run.json, records.parquet and summary.json; returns the summary (`concurrency`: a closed loop's)."""
    if out.emissions is None:
        raise ValueError("this outcome's records were streamed into a run directory when it was simulated")
    mode = token_mode(token_times, int(out.ends.count.sum()), token_limit)
    info = _run_info(out.config, out.engines, len(out.requests), declaration, mode, slo, deadlines, concurrency)
    claim_run_dir(run_dir, info)
    with _on_disk(run_dir):
        stream = RecordStream(out.requests, run_dir, mode, chunk)
        stream.write_all(out.emissions, out.sent, out.rejected)
        summary = _summary(sim_block(out), out.requests, out.sent, out.rejected, stream.seal(), slo, deadlines)
        write_summary(run_dir, summary)
    return summary


def outcome_summary(out: SimOutcome, declaration: dict[str, Any], seed: int, concurrency: int | None = None) -> Summary:
    """The summary of a simulation whose run directory is not kept (a prediction interval's ends)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="infermeter-sim-") as tmp:
        return write_sim_run(out, Path(tmp) / "run", declaration, seed, concurrency=concurrency)


def simulate_run(
    requests: Requests,
    config: EngineConfig,
    engines: int,
    seed: int,
    run_dir: Path,
    declaration: dict[str, Any],
    token_times: TokenTimes = "auto",
    token_limit: int = DEFAULT_TOKEN_LIMIT,
    slo: dict[str, float] | None = None,
    deadlines: str | None = None,
    concurrency: int | None = None,
    progress: Callable[[int], None] | None = None,
    chunk: int = CHUNK,
    timings: dict[str, float] | None = None,
    bins: list[BinEdges] | None = None,
) -> Summary:
    """Simulate and write the run directory as the simulation goes: records leave memory as requests finish
    (`sim.stream`), so memory holds per-request arrays, not every record, and the simulation's own arrays are let
    go before the summary is computed.  The same files as `simulate` followed by `write_sim_run`.  `timings`, when
    given, gets the wall seconds of the simulation (records streamed included), of sealing records.parquet and of
    the summary; `bins`, the edges multi-bin dynamic batching ran with (run.json holds those set before the run)."""
    t0 = time.perf_counter()
    planned = plan_bins(config, requests, seed)  # once: run.json holds the bins resolved before the run
    config = planned.config
    total = expected_tokens(requests, config)
    mode = token_mode(token_times, total, token_limit)
    claim_run_dir(run_dir, _run_info(config, engines, len(requests), declaration, mode, slo, deadlines, concurrency))
    with _on_disk(run_dir):
        stream = RecordStream(requests, run_dir, mode, chunk)
        out = simulate(
            requests, config, engines, seed, progress=progress, concurrency=concurrency, sink=stream, planned=planned
        )
        assert int(out.ends.count.sum()) == total, "the simulation emitted other tokens than its workload asked for"
        t1 = time.perf_counter()
        streamed = stream.seal()
        del stream
        t2 = time.perf_counter()
        sim, sent, rejected = sim_block(out), out.sent, out.rejected
        used = out.bins
        del out
        summary = _summary(sim, requests, sent, rejected, streamed, slo, deadlines)
        write_summary(run_dir, summary)
    if timings is not None:
        timings.update(simulation=t1 - t0, records=t2 - t1, summary=time.perf_counter() - t2)
    if bins is not None and used is not None:
        bins.append(used)
    return summary
