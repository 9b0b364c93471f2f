"""The rows of `infermeter export`: every per-request metric of a small hand-built run, against values computed by
hand, nulls where a metric does not apply, and the same figures the run's summary aggregates."""

from __future__ import annotations

import dataclasses
import math
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from infermeter.errors import UserError
from infermeter.exports.request_rows import COLUMNS, LIST_COLUMNS, RunSource, export_rows, request_rows, schema
from infermeter.metrics import RecordColumns, summarize
from infermeter.metrics.fluidity import parse_deadlines
from infermeter.records import (
    JOURNAL,
    LEDGER,
    LEDGER_DTYPE,
    RECORDS,
    SCHEMA,
    RequestRecord,
    RunInfo,
    read_run_info,
    write_records,
)
from infermeter.run_info import Load, Tokenizer
from tests.cli import exit_code

# r0: four tokens in three chunks (the last chunk carries two); r1: failed before any token; r2: one token;
# r3: an embeddings reply in one body; r4: timed out after its first token
RECORDS_BY_HAND = [
    RequestRecord(
        request_id=0,
        request_class="short",
        input_tokens=100,
        output_tokens=4,
        max_tokens=4,
        scheduled_at=0.9,
        submitted_at=1.0,
        token_times=[1.1, 1.13, 1.19, 1.19],
        chunk_times=[1.1, 1.13, 1.19],
        chunk_tokens=[1, 1, 2],
        finish_reason="length",
    ),
    RequestRecord(
        request_id=1,
        input_tokens=50,
        max_tokens=8,
        scheduled_at=2.0,
        submitted_at=2.0,
        status="error",
        error="http 500: Internal Server Error",
    ),
    RequestRecord(
        request_id=2,
        input_tokens=20,
        output_tokens=1,
        max_tokens=1,
        scheduled_at=3.0,
        submitted_at=3.0,
        token_times=[3.25],
        chunk_times=[3.25],
        chunk_tokens=[1],
        cached_tokens=16,
    ),
    RequestRecord(request_id=3, input_tokens=40, scheduled_at=4.0, submitted_at=4.0, completed_at=4.05, inputs=8),
    RequestRecord(
        request_id=4,
        input_tokens=30,
        output_tokens=1,
        max_tokens=8,
        scheduled_at=5.0,
        submitted_at=5.0,
        token_times=[5.1],
        chunk_times=[5.1],
        chunk_tokens=[1],
        status="timeout",
        error="timeout: no token for 30 s",
    ),
]


def run(tmp_path: Path, name: str = "run", **info: object) -> Path:
    out = tmp_path / name
    write_records(out, RunInfo(kind="test", **info), RECORDS_BY_HAND)
    return out


def column(rows: pa.Table, name: str) -> list[object]:
    return rows.column(name).to_pylist()


def close(got: list[object], want: list[float | None]) -> bool:
    """Equal lists, floats to 1e-9 and None (null) only where None is wanted."""
    return len(got) == len(want) and all(
        (g is None) if w is None else (isinstance(g, float) and math.isclose(g, w, abs_tol=1e-9))
        for g, w in zip(got, want, strict=True)
    )


def test_latency_metrics_of_known_token_times(tmp_path):
    rows = request_rows(run(tmp_path, itl_option="B")).table
    assert rows.schema == schema(lists=False)
    assert close(column(rows, "ttft_ms"), [100.0, None, 250.0, None, None])
    assert close(column(rows, "e2e_ms"), [190.0, None, 250.0, 50.0, None])  # the one-body reply ends at its last byte
    assert close(column(rows, "tpot_ms"), [30.0, None, None, None, None])  # (190 - 100) / 3; one token: none
    assert close(column(rows, "normalized_latency_ms"), [47.5, None, 250.0, None, None])
    assert close(column(rows, "output_tok_s"), [4 / 0.19, None, 4.0, None, None])
    # option B: gaps 30, 60 and 0 ms (the last chunk's two tokens share its time)
    assert column(rows, "itl_count") == [3, None, 0, None, None]
    assert close(column(rows, "itl_mean_ms"), [30.0, None, None, None, None])
    assert close(column(rows, "max_pause_ms"), [60.0, None, None, None, None])
    assert close(
        column(rows, "jitter_ms"), [1000 * math.sqrt((0.0**2 + 0.03**2 + 0.03**2) / 3), None, None, None, None]
    )


def test_itl_follows_the_option_run_json_declares(tmp_path):
    rows = request_rows(run(tmp_path, itl_option="A"), lists=True).table
    # option A: the gaps between content chunks, 30 and 60 ms
    assert column(rows, "itl_count") == [2, None, 0, None, None]
    assert close(column(rows, "itl_mean_ms"), [45.0, None, None, None, None])
    assert close(column(rows, "jitter_ms"), [15.0, None, None, None, None])
    assert close(column(rows, "max_pause_ms"), [60.0, None, None, None, None])
    assert close(column(rows, "ttft_ms"), [100.0, None, 250.0, None, None])
    itl = column(rows, "itl_ms")
    assert close(itl[0], [30.0, 60.0]) and itl[1:] == [None, [], None, None]


def test_option_c_takes_the_servers_token_times(tmp_path):
    out = tmp_path / "run"
    streamed = RequestRecord(
        request_id=0,
        output_tokens=3,
        submitted_at=1.0,
        token_times=[1.1, 1.2, 1.4],
        chunk_times=[1.1, 1.2, 1.4],
        chunk_tokens=[1, 1, 1],
        server_token_times=[1.05, 1.2, 1.3],
    )
    write_records(out, RunInfo(kind="test", itl_option="C"), [streamed, RECORDS_BY_HAND[2]])
    rows = request_rows(out, lists=True).table
    itl = column(rows, "itl_ms")
    assert close(itl[0], [150.0, 100.0]) and itl[1] == []  # r2 had none: its own (none)
    assert close(column(rows, "token_times_ms")[0], [100.0, 200.0, 400.0])  # as received
    server = column(rows, "server_token_times_ms")
    assert close(server[0], [50.0, 200.0, 300.0]) and server[1] is None
    assert close(column(rows, "ttft_ms"), [100.0, 250.0])  # TTFT is the client's, under every option
    assert close(column(rows, "max_pause_ms"), [150.0, None])


def test_record_fields_outcomes_and_times(tmp_path):
    rows = request_rows(run(tmp_path)).table
    assert column(rows, "request_id") == [0, 1, 2, 3, 4]
    assert column(rows, "status") == ["ok", "error", "ok", "ok", "timeout"]
    assert column(rows, "ok") == [True, False, True, True, False]
    assert column(rows, "error_reason") == [None, "http 500", None, None, "timeout"]
    assert column(rows, "error") == [None, "http 500: Internal Server Error", None, None, "timeout: no token for 30 s"]
    assert column(rows, "request_class") == ["short", "", "", "", ""]
    assert column(rows, "finish_reason") == ["length", None, None, None, None]
    assert column(rows, "cached_tokens") == [None, None, 16, None, None]
    assert column(rows, "inputs") == [None, None, None, 8, None]
    assert column(rows, "output_tokens") == [4, 0, 1, 0, 1]
    assert column(rows, "scheduled_at_s") == [0.9, 2.0, 3.0, 4.0, 5.0]
    assert column(rows, "submitted_at_s") == [1.0, 2.0, 3.0, 4.0, 5.0]
    # when the first token came is recorded even for the request that then timed out; its TTFT is not a metric
    assert close(column(rows, "first_token_at_s"), [1.1, None, 3.25, None, 5.1])
    assert close(column(rows, "completed_at_s"), [1.19, None, 3.25, 4.05, 5.1])
    assert column(rows, "ramp_up") == [False] * 5
    assert column(rows, "meets_slo") == [None] * 5 and column(rows, "fluidity") == [None] * 5  # none declared


def test_token_times_are_relative_to_submission(tmp_path):
    rows = request_rows(run(tmp_path), lists=True).table
    assert rows.schema == schema(lists=True)
    times = column(rows, "token_times_ms")
    assert close(times[0], [100.0, 130.0, 190.0, 190.0])
    assert times[1] == [] and close(times[2], [250.0]) and times[3] == []
    assert close(times[4], [100.0])  # what the timed-out request did receive
    itl = column(rows, "itl_ms")
    assert close(itl[0], [30.0, 60.0, 0.0]) and itl[1:] == [None, [], None, None]


def test_slo_and_fluidity_as_run_json_declares_them(tmp_path):
    rows = request_rows(run(tmp_path, slo={"ttft": 0.2}, deadlines="ttft=150ms,tbt=15ms")).table
    assert column(rows, "meets_slo") == [True, False, False, False, False]  # one-body: no first token, no TTFT
    # r0 T = 100, 30, 60, 0 ms against D_p 150, D_d 15: slack 50, then 35, then 60 - 35 - 15 = 10 ms late: one
    # missed deadline of four; r2's first token 250 ms misses floor((250 - 150) / 15) + 1 = 7 deadlines
    assert close(column(rows, "fluidity"), [0.75, None, 0.0, None, None])


def test_counting_b_exports_the_counts_the_metrics_divide_by(tmp_path):
    """run.json declares counting B: the server said 4 output tokens, the reference tokenizer counted 7 (and 120
    prompt tokens for 100); TPOT, normalized latency and output tok/s use 7, and the rows say both counts."""
    out = tmp_path / "run"
    counted = dataclasses.replace(RECORDS_BY_HAND[0], ref_output_tokens=7, ref_input_tokens=120)
    write_records(out, RunInfo(kind="test", tokenizer=Tokenizer(counting_method="B")), [counted, *RECORDS_BY_HAND[1:]])
    rows = request_rows(out).table
    assert column(rows, "output_tokens")[0] == 4 and column(rows, "counted_output_tokens")[0] == 7
    assert column(rows, "input_tokens")[0] == 100 and column(rows, "counted_input_tokens")[0] == 120
    assert close(column(rows, "tpot_ms")[:1], [90.0 / 6])  # (190 - 100) ms over 7 - 1 tokens
    assert close(column(rows, "normalized_latency_ms")[:1], [190.0 / 7])
    assert close(column(rows, "output_tok_s")[:1], [7 / 0.19])
    # without a reference count (r1-r4) the server's is the count, as the metrics take it
    assert column(rows, "counted_output_tokens")[1:] == column(rows, "output_tokens")[1:]
    plain = request_rows(run(tmp_path, "a")).table  # counting A: the counted values are the recorded ones
    assert column(plain, "counted_output_tokens") == column(plain, "output_tokens")


def test_the_rows_fluidity_is_the_summarys_per_request_index(tmp_path):
    """The export and the summary's fluidity block count each request in one function: the rows' fluidity has the
    block's statistics, with a first-token deadline and without one (decode deadlines only)."""
    out = tmp_path / "sim"
    assert exit_code(["sim", "--requests", "80", "--rate", "20", "--token-times", "full", "--out", str(out)]) == 0
    for deadlines in ("ttft=20ms,tbt=6ms", "tbt=5ms"):  # decode steps take about 6.5 ms
        info = read_run_info(out).model_copy(update={"deadlines": deadlines})
        rows = np.array(column(request_rows_of(out, info), "fluidity"), dtype=float)
        block = summarize(RecordColumns.of_run(out, info), "B", None, parse_deadlines(deadlines)).fluidity
        assert block is not None and block.index.n == np.isfinite(rows).sum() > 70
        assert block.index.mean == pytest.approx(np.nanmean(rows), rel=1e-12) and block.index.min < 1.0


def request_rows_of(out: Path, info: RunInfo) -> pa.Table:
    """The run's rows as if run.json said `info` (written to a copy of the run)."""
    from infermeter.records import write_run_info

    copy = out.parent / f"{out.name}-copy"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(out, copy)
    write_run_info(copy, info)
    return request_rows(copy).table


def test_the_rows_hold_what_the_summary_aggregates(tmp_path):
    """A simulated run of 120 requests: each metric's mean over the rows is the summary's."""
    out = tmp_path / "sim"
    code = exit_code(["sim", "--requests", "120", "--token-times", "full", "--out", str(out)])
    assert code == 0
    rows = request_rows(out).table
    summary = summarize(RecordColumns.of_run(out), "B")
    assert rows.num_rows == 120 and summary.ttft_ms.n > 100 and summary.itl_ms.n > 1000  # not an empty comparison
    for name, stats in (("ttft_ms", summary.ttft_ms), ("tpot_ms", summary.tpot_ms), ("e2e_ms", summary.e2e_ms)):
        values = np.array(column(rows, name), dtype=float)
        assert stats.n == np.isfinite(values).sum() and stats.mean == pytest.approx(np.nanmean(values), rel=1e-12)
    count = np.array(column(rows, "itl_count"), dtype=float)
    mean = np.array(column(rows, "itl_mean_ms"), dtype=float)
    assert summary.itl_ms.n == np.nansum(count)
    assert summary.itl_ms.mean == pytest.approx(np.nansum(np.nan_to_num(mean) * count) / np.nansum(count), rel=1e-9)
    assert summary.max_pause_ms.p50 == pytest.approx(np.nanpercentile(column(rows, "max_pause_ms"), 50), rel=1e-12)
    assert summary.jitter_ms.mean == pytest.approx(np.nanmean(np.array(column(rows, "jitter_ms"), float)), rel=1e-12)


def test_the_ramp_ups_requests_are_rows_flagged(tmp_path):
    rows = request_rows(run(tmp_path, load=Load(ramp_up_s=1.5))).table
    # scheduled from 0.9 s: those before 2.4 s were sent while the load rose
    assert column(rows, "ramp_up") == [True, True, False, False, False]
    assert close(column(rows, "ttft_ms"), [100.0, None, 250.0, None, None])  # every row keeps its metrics


def test_a_simulation_that_kept_each_streams_ends_has_no_itl(tmp_path):
    rows = request_rows(run(tmp_path, token_times="endpoints", slo={"itl": 0.1}, deadlines="tbt=20ms"), lists=True)
    table = rows.table
    for name in ("itl_count", "itl_mean_ms", "max_pause_ms", "jitter_ms", "fluidity", "meets_slo", "itl_ms"):
        assert column(table, name) == [None] * 5, name
    assert close(column(table, "tpot_ms"), [30.0, None, None, None, None])  # the ends are enough for TPOT
    assert any("first and last token only" in note for note in rows.notes)


def test_a_run_that_never_closed_exports_what_was_recorded(tmp_path):
    out = run(tmp_path)
    table = pa.Table.from_pylist([r for r in _records_table().to_pylist() if r["request_id"] < 3], schema=SCHEMA)
    (out / RECORDS).unlink()
    with pa.OSFile(str(out / JOURNAL), "wb") as sink, pa.ipc.new_stream(sink, SCHEMA) as stream:
        stream.write_table(table)
    ledger = np.zeros(4, dtype=LEDGER_DTYPE)
    ledger["request_id"] = [0, 1, 2, 9]  # request 9 was sent; the process died before its record was written
    ledger["scheduled_at"] = [0.9, 2.0, 3.0, 6.0]
    (out / LEDGER).write_bytes(ledger.tobytes())
    rows = request_rows(out)
    assert column(rows.table, "request_id") == [0, 1, 2, 9]
    assert column(rows.table, "status")[3] == "cancelled" and column(rows.table, "ttft_ms")[3] is None
    assert column(rows.table, "error_reason")[3] == "outcome not recorded"
    assert close(column(rows.table, "ttft_ms")[:3], [100.0, None, 250.0])
    assert any("never closed" in note for note in rows.notes)


def _records_table() -> pa.Table:
    from infermeter.records import records_to_table

    return records_to_table(RECORDS_BY_HAND)


def test_several_runs_each_row_saying_whose(tmp_path):
    a, b = run(tmp_path, "a"), run(tmp_path, "b", itl_option="A")
    rows = export_rows([RunSource(a, "first"), RunSource(b, "second")], lists=False).table
    assert rows.schema == schema(lists=False, several=True) and rows.column_names[0] == "run"
    assert column(rows, "run") == ["first"] * 5 + ["second"] * 5
    assert column(rows, "itl_count") == [3, None, 0, None, None, 2, None, 0, None, None]
    alone = export_rows([RunSource(a)], lists=False).table
    assert "run" not in alone.column_names and alone.num_rows == 5


def test_damaged_records_are_a_one_line_error(tmp_path):
    out = run(tmp_path)
    (out / RECORDS).write_bytes(b"not parquet")
    with pytest.raises(UserError, match="damaged"):
        request_rows(out)
    shutil.rmtree(out)
    with pytest.raises(UserError, match=r"not a run directory|does not exist"):
        request_rows(out)


def test_every_column_is_declared_once_with_its_meaning():
    names = [c.name for c in (*COLUMNS, *LIST_COLUMNS)]
    assert len(names) == len(set(names)) and all(c.meaning for c in (*COLUMNS, *LIST_COLUMNS))
    floats = [c.name for c in (*COLUMNS, *LIST_COLUMNS) if c.type in (pa.float64(), pa.list_(pa.float64()))]
    assert [n for n in floats if not n.endswith(("_ms", "_s"))] == ["fluidity"]  # a unit in every other name
