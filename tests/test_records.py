import dataclasses
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from infermeter.errors import UserError
from infermeter.records import (
    JOURNAL,
    LATER_FIELDS,
    RECORDS,
    SCHEMA,
    RequestRecord,
    RunInfo,
    RunWriter,
    read_records,
    read_run_info,
    table_to_records,
    write_records,
    write_run_info,
)


def test_round_trip_keeps_every_field(tmp_path, records):
    info = RunInfo(kind="test", itl_option="A", slo={"ttft": 0.2})
    table = write_records(tmp_path / "run", info, records)
    assert table.schema == SCHEMA
    back = table_to_records(table)
    assert back == records
    assert back[3].server_token_times == [0.58, 0.64, 0.69] and back[0].server_token_times is None
    got = read_run_info(tmp_path / "run")
    assert got.itl_option == "A" and got.slo == {"ttft": 0.2}
    raw = orjson.loads((tmp_path / "run" / "run.json").read_bytes())
    assert raw["started_at"].endswith("Z") and len(raw["started_at"]) == len("2026-01-01T00:00:00.000Z")
    assert not (tmp_path / "run" / JOURNAL).exists()
    assert pq.read_table(tmp_path / "run" / RECORDS).num_rows == 4


def test_server_reported_fields_round_trip_and_null_stays_null(tmp_path, records):
    records[1] = dataclasses.replace(records[1], cached_tokens=256, server_prefill_s=0.0385, server_decode_s=0.06125)
    records[3] = dataclasses.replace(records[3], cached_tokens=0)
    table = write_records(tmp_path / "run", RunInfo(kind="test"), records)
    assert table.column("cached_tokens").to_pylist() == [None, 256, None, 0]
    assert table.column("server_prefill_s").to_pylist() == [None, 0.0385, None, None]
    assert table_to_records(table) == records


def test_records_written_before_the_server_reported_fields_read_back_with_nulls():
    """tests/fixtures/runs/v1-live was written by main 41f1c1f, before LATER_FIELDS existed."""
    run = Path(__file__).parent / "fixtures" / "runs" / "v1-live"
    assert not set(LATER_FIELDS) & set(pq.read_schema(run / RECORDS).names)
    table = read_records(run)
    assert table.schema == SCHEMA and table.num_rows == 12
    for name in LATER_FIELDS:
        assert table.column(name).null_count == 12, name
    back = table_to_records(table)
    assert {(r.cached_tokens, r.server_prefill_s, r.server_decode_s) for r in back} == {(None, None, None)}
    assert back[0].server_token_times is not None  # the fields it had are still read


def test_an_unfinished_run_journaled_before_the_server_reported_fields_reads_back_with_nulls(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    write_run_info(run, RunInfo(kind="test"))  # and a journal as an earlier version wrote it, never sealed
    older = pa.schema([f for f in SCHEMA if f.name not in LATER_FIELDS])
    with pa.OSFile(str(run / JOURNAL), "wb") as sink, pa.ipc.new_stream(sink, older) as stream:
        stream.write_table(pa.Table.from_pylist([{"request_id": 7, "input_tokens": 64}], schema=older))
    table = read_records(run)
    assert table.schema == SCHEMA and table.column("request_id").to_pylist() == [7]
    assert [table.column(name).null_count for name in LATER_FIELDS] == [1] * len(LATER_FIELDS)


def test_refuses_to_overwrite_a_run(tmp_path, records):
    write_records(tmp_path / "run", RunInfo(kind="test"), records)
    with pytest.raises(UserError, match="already holds a run"):
        RunWriter(tmp_path / "run", RunInfo(kind="test"))


def test_killed_run_keeps_flushed_records(tmp_path):
    """A process killed mid-run loses at most its unflushed tail: earlier records are read from the journal."""
    run = tmp_path / "run"
    script = textwrap.dedent(f"""
        import os, signal
        from pathlib import Path
        from infermeter.records import RequestRecord, RunInfo, RunWriter
        w = RunWriter(Path({str(run)!r}), RunInfo(kind="test"), flush_every=10)
        for i in range(25):
            w.append(RequestRecord(request_id=i, token_times=[float(i)], output_tokens=1))
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", script], check=False)
    assert proc.returncode == -signal.SIGKILL
    assert not (run / RECORDS).exists()
    table = read_records(run)
    assert table.column("request_id").to_pylist() == list(range(20))


def test_torn_journal_tail_is_ignored(tmp_path):
    run = tmp_path / "run"
    w = RunWriter(run, RunInfo(kind="test"), flush_every=5)
    for i in range(10):
        w.append(RequestRecord(request_id=i))
    w._sink.flush()
    size = os.path.getsize(run / JOURNAL)
    with open(run / JOURNAL, "ab") as fh:
        fh.write(b"\xff\xff\xff\xff\x10\x00garbage")
    assert os.path.getsize(run / JOURNAL) > size
    assert read_records(run).num_rows == 10


def test_bad_run_dirs(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        read_records(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="no records"):
        read_records(tmp_path / "empty")
    with pytest.raises(UserError, match="not a run directory"):
        read_run_info(tmp_path / "empty")
    (tmp_path / "empty" / "run.json").write_text("{not json")
    with pytest.raises(UserError, match="not a valid run description"):
        read_run_info(tmp_path / "empty")


def test_records_are_dataclasses_with_contract_fields():
    r = RequestRecord(request_id=1)
    assert [f for f in r.__slots__] == SCHEMA.names
