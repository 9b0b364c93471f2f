import dataclasses
import errno
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
from pydantic import ValidationError

from infermeter.errors import UserError
from infermeter.records import (
    JOURNAL,
    LATER_FIELDS,
    RECORDS,
    SCHEMA,
    SEND_HOLD,
    RequestRecord,
    RunInfo,
    RunWriter,
    read_records,
    read_run_info,
    records_to_table,
    table_to_records,
    write_records,
    write_run_info,
)
from infermeter.records.reader import read_journal
from infermeter.run_info import (
    RUN_SCHEMA,
    Arrivals,
    Client,
    Load,
    PromptMismatch,
    PromptVerification,
    ServerMetricsSource,
    Sut,
    Telemetry,
    Timeouts,
    Tokenizer,
    Warmup,
    WorkloadDeclaration,
    parse_run_info,
)
from tests.contract import EARLIER_RUNS, V1_RUNS


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


def _contained(old, new, where=""):
    """Where `old` is not carried over into `new` (new may add keys, as nulls or defaults)."""
    if isinstance(old, dict):
        if not isinstance(new, dict):
            return [f"{where}: {new!r}"]
        return [d for k, v in old.items() for d in (_contained(v, new[k], f"{where}.{k}") if k in new else [k])]
    return [] if old == new else [f"{where}: {old!r} became {new!r}"]


def test_run_json_round_trip_with_every_block(tmp_path, records):
    info = RunInfo(
        kind="emulated",
        sut=Sut(model="m", url="http://127.0.0.1:1", hardware="h", boundary="Model Engine", faults=[{"kind": "stall"}]),
        workload=WorkloadDeclaration(name="w", seed=3, spec={"name": "w"}, arrivals=Arrivals(kind="poisson", rate=2)),
        load=Load(description="open-loop poisson at 2 req/s", requests=4, arrivals=Arrivals(kind="poisson", rate=2)),
        tokenizer=Tokenizer(name="cl100k_base", counting_method="B", vocab_size=100277),
        warmup=Warmup(done=True, requests=100, probes_after_s=[0.1, 0.1, 0.1]),
        client=Client(backend="openai", timeouts_s=Timeouts(connect=1, first_token=2, total=3), extra_body={"a": 1}),
        deadlines="ttft=300ms,tbt=25ms",
        started_at_clock=0.5,
        server_metrics=ServerMetricsSource(url="http://127.0.0.1:1/metrics", available=True, interval_s=1.0),
        telemetry=Telemetry(interval_s=1.0, sources={"cpu": "psutil"}),
        prompt_verification=PromptVerification(
            endpoint="/tokenize", checked=2, mismatches=1, examples=[PromptMismatch(request_id=1, built=9, server=10)]
        ),
        config={"scenario": "anything the config package validates"},
    )
    write_records(tmp_path / "run", info, records)
    raw = orjson.loads((tmp_path / "run" / "run.json").read_bytes())
    assert raw["schema_version"] == "infermeter.run/2" and raw["client"]["timeouts_s"]["first_token"] == 2.0
    assert read_run_info(tmp_path / "run") == info
    # a value assigned after construction is checked like one read from run.json
    with pytest.raises(ValidationError):
        info.warmup = {"done": True, "colour": "blue"}


@pytest.mark.parametrize("name", V1_RUNS)
def test_v1_run_json_reads_upgraded(name):
    """A run.json of infermeter.run/1 reads as the current version, every value it held carried over."""
    path = EARLIER_RUNS / name / "run.json"
    old = orjson.loads(path.read_bytes())
    info = read_run_info(EARLIER_RUNS / name)
    assert old["schema_version"] == "infermeter.run/1" and info.schema_version == RUN_SCHEMA == "infermeter.run/2"
    new = info.model_dump(mode="json")
    if name == "v1-sim":  # the engine's configuration now sits apart from the figures derived from it
        engine = old.pop("engine")
        assert new["engine"]["latency_model"] == engine.pop("latency_model") == "batch"
        assert new["engine"]["kv_capacity"] == engine.pop("kv_capacity") == 42666
        assert new["engine"]["config"] == engine and info.token_times == "endpoints"
        new.pop("engine")
    else:
        assert info.client is not None and info.client.timeouts_s is not None
        assert info.client.timeouts_s.first_token == 120.0 and info.started_at_clock == pytest.approx(0.5704, abs=1e-4)
        assert info.server_metrics is not None and info.server_metrics.available and info.token_times is None
    assert _contained({k: v for k, v in old.items() if k != "schema_version"}, new) == []
    assert parse_run_info(info.model_dump(mode="json"), "again") == info  # the upgraded document is a current one


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda d: d["sut"].update(colour="blue"), r"unknown key 'sut\.colour' \(not part of infermeter\.run/2\)"),
        (lambda d: d.update(colour="blue"), r"unknown key 'colour'"),
        (lambda d: d["warmup"].update(requests="many"), r"warmup\.requests: Input should be a valid integer"),
        (lambda d: d.update(schema_version="infermeter.run/3"), r"has schema_version 'infermeter\.run/3', which"),
        (lambda d: d.update(schema_version=[1]), r"has schema_version \[1\], which infermeter .* cannot read"),
    ],
)
def test_a_stray_key_or_an_unknown_version_is_refused_in_one_line(tmp_path, change, message):
    doc = orjson.loads((EARLIER_RUNS / "v1-live" / "run.json").read_bytes())
    change(doc)
    (tmp_path / "run.json").write_bytes(orjson.dumps(doc))
    with pytest.raises(UserError, match=message) as err:
        read_run_info(tmp_path)
    assert str(err.value).startswith(str(tmp_path / "run.json")) and "\n" not in str(err.value)


def test_a_writer_told_of_sends_flushes_right_after_a_send(tmp_path):
    """A flush holds the event loop for its conversion: a writer that is told of sends does it just after one (the
    most room before the next send), and from `append` only once SEND_HOLD flushes' worth of records wait."""

    def journaled() -> int:
        w._sink.flush()
        return read_journal(run / JOURNAL).num_rows

    run = tmp_path / "run"
    w = RunWriter(run, RunInfo(kind="test"), flush_every=4, flush_interval_s=3600)
    for i in range(4):
        w.sent(i, 0.0, 1, 1)
        w.append(RequestRecord(request_id=i))
    assert journaled() == 0  # four wait: appending did not flush them
    w.sent(4, 0.0, 1, 1)
    assert journaled() == 4  # the send did
    for i in range(4, 4 + 4 * SEND_HOLD - 1):
        w.append(RequestRecord(request_id=i))
    assert journaled() == 4
    w.append(RequestRecord(request_id=99))
    assert journaled() == 4 + 4 * SEND_HOLD  # no send came: the hold is bounded
    w.close()


def test_a_flush_after_a_send_journals_at_most_flush_every_records(tmp_path):
    """A burst of replies is journaled over the next sends, the oldest first, so no single flush holds the loop
    for more than `flush_every` records' conversion."""
    run = tmp_path / "run"
    w = RunWriter(run, RunInfo(kind="test"), flush_every=4, flush_interval_s=3600)
    w.sent(0, 0.0, 1, 1)
    for i in range(10):
        w.append(RequestRecord(request_id=i))
    journal = []
    for k in range(3):
        w.sent(k + 1, 0.0, 1, 1)
        w._sink.flush()
        journal.append(read_journal(run / JOURNAL).column("request_id").to_pylist())
    assert journal == [[0, 1, 2, 3], list(range(8)), list(range(8))]  # 2 left: fewer than a flush's worth
    assert w.close().column("request_id").to_pylist() == list(range(10))


def test_records_waiting_when_the_disk_fails_are_kept(tmp_path):
    """A write that fails (here the ledger's, on a full disk) leaves the records already waiting for a flush in
    memory with the later ones: the writer returns every record, in order; a columnar batch after the failure is
    refused (its caller keeps it) rather than journaled behind a failed write."""
    run = tmp_path / "run"
    failures = []
    w = RunWriter(run, RunInfo(kind="test"), flush_every=4, flush_interval_s=3600, on_failure=failures.append)
    for i in range(6):
        w.append(RequestRecord(request_id=i))  # 4 journaled, 2 waiting
    full = os.open("/dev/full", os.O_WRONLY)
    os.dup2(full, w._ledger)
    os.close(full)
    w.sent(6, 0.0, 1, 1)
    w.append(RequestRecord(request_id=6))
    assert len(failures) == 1 and w.failure is not None
    with pytest.raises(UserError, match="disk is full"):  # a batch is not journaled behind a failed write
        w.extend(records_to_table([RequestRecord(request_id=7)]))
    assert w.close().column("request_id").to_pylist() == list(range(7))  # in the order they finished


def test_a_journal_write_that_fails_mid_run_keeps_every_record_in_order(tmp_path):
    """The journal's write failing in a flush after a send: that flush's records, those still waiting and the later
    ones all come back, in the order they finished."""

    class FullDisk:
        def write_table(self, table: pa.Table) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

        def close(self) -> None:
            pass

    run = tmp_path / "run"
    failures = []
    w = RunWriter(run, RunInfo(kind="test"), flush_every=4, flush_interval_s=3600, on_failure=failures.append)
    w.sent(0, 0.0, 1, 1)
    for i in range(10):
        w.append(RequestRecord(request_id=i))
    w._stream = FullDisk()
    w.sent(1, 0.0, 1, 1)  # its flush of 0-3 fails
    w.append(RequestRecord(request_id=10))
    assert failures == [w.failure] and "disk is full" in w.failure
    assert w.close().column("request_id").to_pylist() == list(range(11))
