"""The record contract (DESIGN.md): one request's RequestRecord, its Arrow schema, the run directory's file names,
the ledger's entry and the vocabulary of a failed request's `error` ("<reason>: <detail>", so that summaries count
failures by reason)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

import numpy as np
import pyarrow as pa

RUN_JSON = "run.json"
RECORDS = "records.parquet"
JOURNAL = "records.journal.arrows"
LEDGER = "sent.ledger"
SUMMARY = "summary.json"
RUN_FILES = (RUN_JSON, RECORDS, JOURNAL, LEDGER, SUMMARY)  # a run directory's own files: nothing may write over them

Status = Literal["ok", "error", "timeout", "cancelled"]
STATUSES: tuple[str, ...] = get_args(Status)
NOT_RECORDED = "outcome not recorded"  # sent (the ledger says so) but the process ended before its record was written


def failure(reason: str, detail: str = "") -> str:
    """A record's error text: a reason from a short vocabulary, then what a person needs to know."""
    return f"{reason}: {detail}" if detail else reason


def failure_reason(error: str) -> str:
    """The reason part of a record's error text (what summaries count failures by)."""
    return error.split(": ", 1)[0] if error else ""


@dataclass(slots=True)
class RequestRecord:
    """One request as measured: all times are seconds on the run's monotonic clock, relative to its start."""

    request_id: int
    request_class: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    max_tokens: int = 0
    scheduled_at: float = 0.0
    submitted_at: float = 0.0
    token_times: list[float] = field(default_factory=list)
    chunk_times: list[float] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    server_token_times: list[float] | None = None
    status: Status = "ok"
    error: str = ""
    ref_input_tokens: int | None = None  # the built prompt's length under run.json's declared tokenizer
    ref_output_tokens: int | None = None  # the received text's length under it
    # what the server reported about this request's own timing; None where it did not say
    cached_tokens: int | None = None  # prompt tokens it served from its prefix cache
    server_prefill_s: float | None = None  # its time processing the prompt (the uncached part)
    server_decode_s: float | None = None  # its time generating the output tokens
    finish_reason: str | None = None  # why the server ended the reply ("length", "stop", "content_filter", ...)
    no_done: bool | None = None  # True: the reply was complete but its stream ended without data: [DONE]
    # where the request came from and how it waited; None where it does not apply
    session_id: int | None = None  # a multi-turn session's index in the run (--multi-turn)
    turn: int | None = None  # the turn's index in its session, from 0
    model: str | None = None  # the model or adapter this request named (--model-mix); None: the run's one model
    slot_wait_s: float | None = None  # seconds it waited for a free slot under --max-concurrency
    # an endpoint that answers in one body, not a token stream (embeddings, rerank); None for streamed replies
    completed_at: float | None = None  # when the reply's last byte arrived: its latency ends there
    inputs: int | None = None  # the texts the request carried: embedding inputs, or documents to rerank


SCHEMA = pa.schema(
    [
        ("request_id", pa.int64()),
        ("request_class", pa.string()),
        ("input_tokens", pa.int32()),
        ("output_tokens", pa.int32()),
        ("max_tokens", pa.int32()),
        ("scheduled_at", pa.float64()),
        ("submitted_at", pa.float64()),
        ("token_times", pa.list_(pa.float64())),
        ("chunk_times", pa.list_(pa.float64())),
        ("chunk_tokens", pa.list_(pa.int32())),
        ("server_token_times", pa.list_(pa.float64())),
        ("status", pa.string()),
        ("error", pa.string()),
        ("ref_input_tokens", pa.int32()),
        ("ref_output_tokens", pa.int32()),
        ("cached_tokens", pa.int32()),
        ("server_prefill_s", pa.float64()),
        ("server_decode_s", pa.float64()),
        ("finish_reason", pa.string()),
        ("no_done", pa.bool_()),
        ("session_id", pa.int64()),
        ("turn", pa.int32()),
        ("model", pa.string()),
        ("slot_wait_s", pa.float64()),
        ("completed_at", pa.float64()),
        ("inputs", pa.int32()),
    ]
)


# Nullable record fields added after the first schema: records written before them read back with nulls.
LATER_FIELDS: tuple[str, ...] = (
    "ref_input_tokens",
    "ref_output_tokens",
    "cached_tokens",
    "server_prefill_s",
    "server_decode_s",
    "finish_reason",
    "no_done",
    "session_id",
    "turn",
    "model",
    "slot_wait_s",
    "completed_at",
    "inputs",
)


EVERY_FIELD = RequestRecord(  # a record with a value in every column
    request_id=0,
    request_class="x",
    input_tokens=1,
    output_tokens=1,
    max_tokens=1,
    token_times=[0.0],
    chunk_times=[0.0],
    chunk_tokens=[1],
    server_token_times=[0.0],
    error="x",
    ref_input_tokens=1,
    ref_output_tokens=1,
    cached_tokens=0,
    server_prefill_s=0.0,
    server_decode_s=0.0,
    finish_reason="length",
    no_done=True,
    session_id=0,
    turn=0,
    model="x",
    slot_wait_s=0.0,
    completed_at=0.0,
    inputs=1,
)


def records_to_table(records: list[RequestRecord]) -> pa.Table:
    """Arrow table of records in the contract's schema."""
    columns = {name: [getattr(r, name) for r in records] for name in SCHEMA.names}
    return pa.Table.from_pydict(columns, schema=SCHEMA)


def table_to_records(table: pa.Table) -> list[RequestRecord]:
    """Records back from an Arrow table (for tests and small runs; metrics work on columns directly)."""
    return [RequestRecord(**row) for row in table.select(SCHEMA.names).to_pylist()]


LEDGER_DTYPE = np.dtype(
    [("request_id", "<i8"), ("scheduled_at", "<f8"), ("input_tokens", "<i4"), ("max_tokens", "<i4")]
)
