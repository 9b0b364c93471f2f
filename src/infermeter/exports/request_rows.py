"""One row per request of a run (or of several, each row saying whose): the record's identity and outcome fields
and every per-request metric, each computed by the function the summaries use (metrics.latency, metrics.fluidity,
metrics.goodput), so that a row agrees with the run's report to the last bit.

A metric that does not apply to a request (a failed request, a one-body embeddings reply, a one-token reply's TPOT)
is null, never 0.  Times are seconds on the run's clock (relative to its start, as the records keep them);
durations are milliseconds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from infermeter.errors import UserError
from infermeter.metrics import latency
from infermeter.metrics.columns import Ragged, RecordColumns, after_ramp, counting_of, segment_sum
from infermeter.metrics.fluidity import parse_deadlines, per_request
from infermeter.metrics.goodput import meets_slo
from infermeter.records import RecordsFile, failure_reason, read_records, read_run_info
from infermeter.run_info import RunInfo
from infermeter.units import MS_PER_S


@dataclass(frozen=True)
class Column:
    """One column of the export: its name (with its unit), Arrow type, and what it holds."""

    name: str
    type: pa.DataType
    meaning: str


F64, I32, I64, STR, BOOL = pa.float64(), pa.int32(), pa.int64(), pa.string(), pa.bool_()
Values = dict[str, pa.Array | pa.ChunkedArray]  # a column's values by its name, while the rows are put together
FieldReader = Callable[[str], pa.ChunkedArray]  # a record field by name: RecordsFile.column, or a table's column

RUN_COLUMN = Column("run", STR, "which run (several runs exported together: a suite's run key, or the folder's name)")
COLUMNS: tuple[Column, ...] = (
    Column("request_id", I64, "the request's position in the workload"),
    Column("request_class", STR, "its workload class (empty when none)"),
    Column("model", STR, "the model or adapter it named (--model-mix); null: the run's one model"),
    Column("session_id", I64, "its multi-turn session (--multi-turn); null where none"),
    Column("turn", I32, "its turn in the session, from 0"),
    Column("status", STR, "ok, error, timeout or cancelled"),
    Column("ok", BOOL, "whether it succeeded (only successful requests have latency metrics)"),
    Column("error_reason", STR, "why it failed, the reason the summaries count failures by; null when ok"),
    Column("error", STR, "the whole error text; null when ok"),
    Column("finish_reason", STR, "why the server ended the reply (length, stop, ...), as it said"),
    Column("ramp_up", BOOL, "sent during --ramp-up: left out of the run's summary"),
    Column("input_tokens", I32, "prompt tokens, as recorded (the server's count where it gave one)"),
    Column("output_tokens", I32, "content tokens received, as recorded (the server's count where it gave one)"),
    Column(
        "counted_input_tokens",
        I32,
        "prompt tokens as the metrics count them: run.json's counting method (B: the reference tokenizer's count)",
    ),
    Column(
        "counted_output_tokens",
        I32,
        "output tokens as the metrics count them (TPOT, normalized latency and output_tok_s divide by this count)",
    ),
    Column("max_tokens", I32, "the requested cap"),
    Column("ref_input_tokens", I32, "the prompt's length under run.json's reference tokenizer"),
    Column("ref_output_tokens", I32, "the reply's length under it"),
    Column("cached_tokens", I32, "prompt tokens the server served from its prefix cache, where it said"),
    Column("inputs", I32, "embedding inputs or documents to rerank the request carried; null for generation"),
    Column("scheduled_at_s", F64, "when the arrival process wanted it sent (run clock)"),
    Column("submitted_at_s", F64, "when its last byte was written (run clock)"),
    Column("first_token_at_s", F64, "when its first content token arrived (run clock)"),
    Column("completed_at_s", F64, "when its reply ended: its last token, or a one-body reply's last byte (run clock)"),
    Column("ttft_ms", F64, "time to first token: first content token - submission (the IETF draft, 5.1.3)"),
    Column("e2e_ms", F64, "end-to-end latency: the reply's end - submission"),
    Column("tpot_ms", F64, "time per output token: (E2E - TTFT) / (output tokens - 1), from 2 tokens on"),
    Column("normalized_latency_ms", F64, "E2E / output tokens"),
    Column("output_tok_s", F64, "output tokens per second of the request: output tokens / E2E"),
    Column("itl_count", I64, "its inter-token latency samples under the run's ITL option (the IETF draft, 4.6.3)"),
    Column("itl_mean_ms", F64, "the mean of its ITL samples"),
    Column("max_pause_ms", F64, "its largest ITL sample (the IETF draft, 5.4.3)"),
    Column("jitter_ms", F64, "the standard deviation of its ITL samples (the IETF draft, 5.4.3)"),
    Column("fluidity", F64, "Metron's fluidity-index under run.json's deadlines; null when it declares none"),
    Column("meets_slo", BOOL, "whether it met every bound of run.json's SLO at once (goodput); null without one"),
    Column("slot_wait_ms", F64, "how long it waited for a free slot under --max-concurrency"),
    Column("server_prefill_ms", F64, "the server's own time processing the prompt, where it said"),
    Column("server_decode_ms", F64, "the server's own time generating the reply, where it said"),
)
LIST_COLUMNS: tuple[Column, ...] = (
    Column("token_times_ms", pa.list_(F64), "each content token's arrival as received, ms after submission"),
    Column("server_token_times_ms", pa.list_(F64), "each token's time as the server reported it, where it did"),
    Column("itl_ms", pa.list_(F64), "its ITL samples under the run's ITL option; null where ITL does not apply"),
)


@dataclass
class Rows:
    """The rows of one or more runs, and what a reader of them should know (said on stderr by the command)."""

    table: pa.Table
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RunSource:
    """One run to export: its directory, and the label its rows carry in a `run` column (None: a run exported on
    its own, no such column)."""

    run_dir: Path
    label: str | None = None


def export_rows(sources: list[RunSource], lists: bool) -> Rows:
    """The rows of every run, in order; labelled runs' rows start with a `run` column saying whose.  With `lists`,
    each row also carries its token times and ITL samples."""
    if len(sources) == 1 and sources[0].label is None:
        return request_rows(sources[0].run_dir, lists)
    parts: list[pa.Table] = []
    notes: list[str] = []
    for source in sources:
        label = source.label if source.label is not None else source.run_dir.name
        rows = request_rows(source.run_dir, lists)
        column = pa.array(np.full(rows.table.num_rows, label, dtype=object), STR)
        parts.append(rows.table.add_column(0, pa.field(RUN_COLUMN.name, RUN_COLUMN.type), column))
        notes.extend(f"{label}: {note}" for note in rows.notes)
    return Rows(pa.concat_tables(parts) if parts else schema(lists, several=True).empty_table(), notes)


def schema(lists: bool, several: bool = False) -> pa.Schema:
    """The export's columns in order (the `run` column first where several runs are exported together)."""
    columns = ((RUN_COLUMN,) if several else ()) + COLUMNS + (LIST_COLUMNS if lists else ())
    return pa.schema([pa.field(c.name, c.type) for c in columns])


def request_rows(run_dir: Path, lists: bool = False) -> Rows:
    """Every request a run recorded, one row each (the ramp-up's too, flagged; a run that never closed: what its
    journal and ledger hold).  The metrics follow run.json: its ITL option, token counting, SLO and deadlines."""
    info = read_run_info(run_dir)
    counting = counting_of(info.tokenizer)
    file = RecordsFile.of_run(run_dir)
    notes: list[str] = []
    if file is None:
        table = read_records(run_dir)
        record_field = table.column
        cols = RecordColumns.from_table(table, counting)
        notes.append(f"this run never closed: {table.num_rows} requests read from its journal")
    else:
        record_field = file.column
        cols = RecordColumns.of_run(run_dir, _every_request(info))
    values = _record_fields(record_field)
    values.update(_metrics(cols, info, lists, notes))
    values["ramp_up"] = pa.array(_in_ramp_up(cols.scheduled_at, info.load.ramp_up_s))
    out = schema(lists)
    arrays = [_chunked(values[f.name]).cast(f.type) for f in out]
    return Rows(pa.Table.from_arrays(arrays, schema=out), notes)


def _chunked(values: pa.Array | pa.ChunkedArray) -> pa.ChunkedArray:
    return values if isinstance(values, pa.ChunkedArray) else pa.chunked_array([values])


def _every_request(info: RunInfo) -> RunInfo:
    """run.json as RecordColumns.of_run reads it, the ramp-up's requests kept (an export shows every request)."""
    return info.model_copy(update={"load": info.load.model_copy(update={"ramp_up_s": None})})


def _in_ramp_up(scheduled_at: np.ndarray, ramp_up_s: float | None) -> np.ndarray:
    """Which requests the summary leaves out as the ramp-up's (metrics.columns.after_ramp decides)."""
    ramp = np.zeros(len(scheduled_at), dtype=bool)
    if ramp_up_s:
        rows = pa.table({"scheduled_at": scheduled_at, "row": np.arange(len(scheduled_at))})
        ramp[:] = True
        ramp[after_ramp(rows, ramp_up_s).column("row").to_numpy()] = False
    return ramp


def _record_fields(record_field: FieldReader) -> Values:
    """The record's own fields, as recorded (nulls kept), times renamed with their unit and durations in ms."""
    out: Values = {
        name: record_field(name)
        for name in (
            "request_id",
            "request_class",
            "model",
            "session_id",
            "turn",
            "status",
            "finish_reason",
            "input_tokens",
            "output_tokens",
            "max_tokens",
            "ref_input_tokens",
            "ref_output_tokens",
            "cached_tokens",
            "inputs",
        )
    }
    out["scheduled_at_s"] = record_field("scheduled_at")
    out["submitted_at_s"] = record_field("submitted_at")
    for name in ("slot_wait", "server_prefill", "server_decode"):
        out[f"{name}_ms"] = pc.multiply(record_field(f"{name}_s"), MS_PER_S)
    error = record_field("error").combine_chunks().dictionary_encode()
    texts = error.dictionary.to_pylist()  # each distinct error once: failure_reason is the one definition
    out["error"] = pa.array([t or None for t in texts], STR).take(error.indices)
    reasons = [(failure_reason(t) or None) if t else None for t in texts]
    out["error_reason"] = pa.array(reasons, STR).take(error.indices)
    return out


def _metrics(cols: RecordColumns, info: RunInfo, lists: bool, notes: list[str]) -> Values:
    """Every per-request metric, NaN (null) where it does not apply."""
    option = info.itl_option
    full = info.token_times != "endpoints"  # a simulation that kept each stream's first and last token only
    if lists:
        cols.tokens  # noqa: B018  # read whole first: ITL B and the token lists then share one read
    itl = latency.itl(cols, option) if full else None  # before TTFT: B's pass gives the token ends too
    ttft, e2e, tpot = latency.ttft(cols), latency.e2e(cols), latency.tpot(cols)
    norm = latency.normalized_latency(cols)
    streamed = np.isfinite(ttft)  # ok with a first token: ITL applies (one-body replies and failures: none)
    with np.errstate(divide="ignore"):
        out: Values = {
            "ok": pa.array(cols.ok),
            "counted_input_tokens": pa.array(cols.input_tokens),
            "counted_output_tokens": pa.array(cols.output_tokens),
            "first_token_at_s": _nullable(latency.first_token_time(cols)),
            "completed_at_s": _nullable(latency.completion_time(cols)),
            "ttft_ms": _nullable(ttft * MS_PER_S),
            "e2e_ms": _nullable(e2e * MS_PER_S),
            "tpot_ms": _nullable(tpot * MS_PER_S),
            "normalized_latency_ms": _nullable(norm * MS_PER_S),
            "output_tok_s": _nullable(np.where(norm > 0, 1.0 / norm, np.nan)),
        }
    nothing = np.full(cols.n, np.nan)
    if itl is None:
        notes.append(
            "ITL, jitter, max pause and fluidity are null: this simulated run recorded each stream's first and last "
            "token only (its summary.json keeps their statistics)"
        )
    count = itl.lengths if itl is not None else np.zeros(cols.n, dtype=np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = segment_sum(itl.values, itl.offsets) / count if itl is not None else nothing
    max_pause = latency.max_pause(itl) if itl is not None else nothing
    out["itl_count"] = pa.array(count, mask=~streamed if itl is not None else np.ones(cols.n, dtype=bool))
    out["itl_mean_ms"] = _nullable(np.where(count > 0, mean, np.nan) * MS_PER_S)
    out["max_pause_ms"] = _nullable(max_pause * MS_PER_S)
    out["jitter_ms"] = _nullable((latency.jitter(itl) if itl is not None else nothing) * MS_PER_S)
    out["fluidity"] = _nullable(_fluidity(cols, info, notes) if full else nothing)
    out["meets_slo"] = _meets_slo(cols, info, {"ttft": ttft, "tpot": tpot, "itl": max_pause, "e2e": e2e}, full)
    if lists:
        out["token_times_ms"] = _list_ms(cols.tokens, np.zeros(cols.n, dtype=bool), cols.submitted_at)
        out["server_token_times_ms"] = _list_ms(cols.server, ~cols.has_server, cols.submitted_at)
        out["itl_ms"] = _list_ms(itl, ~streamed) if itl is not None else pa.nulls(cols.n, pa.list_(F64))
    return out


def _nullable(values: np.ndarray) -> pa.Array:
    """Floats with NaN as null (a metric that does not apply is absent, never 0)."""
    return pa.array(values, F64, from_pandas=True)


def _fluidity(cols: RecordColumns, info: RunInfo, notes: list[str]) -> np.ndarray:
    """Each request's fluidity-index (Metron, Algorithm 1) under run.json's deadlines, counted as the summary's
    fluidity block counts it (metrics.fluidity.per_request)."""
    nothing = np.full(cols.n, np.nan)
    if not info.deadlines:
        return nothing
    try:
        deadlines = parse_deadlines(info.deadlines)
    except UserError as exc:
        notes.append(f"fluidity is null: run.json's deadlines cannot be read again ({exc})")
        return nothing
    times = latency.token_times(cols, info.itl_option)
    return per_request(times, cols.submitted_at, cols.input_tokens, cols.ok, deadlines).index()


def _meets_slo(cols: RecordColumns, info: RunInfo, per_request: dict[str, np.ndarray], full: bool) -> pa.Array:
    """Whether each request met every bound of run.json's SLO (goodput's test); null where the run has no SLO, or
    where it bounds ITL and the records kept no gaps to judge."""
    if not info.slo or ("itl" in info.slo and not full):
        return pa.nulls(cols.n, BOOL)
    return pa.array(meets_slo(cols.ok, per_request, dict(info.slo)))


def _list_ms(lists: Ragged, null: np.ndarray, minus: np.ndarray | None = None) -> pa.Array:
    """Per-request lists in ms (less each request's `minus` seconds), null where `null` holds."""
    end = int(lists.offsets[-1])
    values = lists.values[:end] if minus is None else lists.values[:end] - np.repeat(minus, lists.lengths)
    offsets = pa.array(lists.offsets.astype(np.int32))
    return pa.ListArray.from_arrays(offsets, pa.array(values * MS_PER_S, F64), mask=pa.array(null))
