"""Metrics count tokens by the run's declared option (IETF draft: A the server's counts, B the reference ones)."""

from pathlib import Path

import numpy as np
import pytest

from infermeter.metrics import RecordColumns, counting_of, summarize
from infermeter.metrics.fluidity import parse_deadlines
from infermeter.metrics.prefill_curve import PrefillCurve
from infermeter.records import RequestRecord, read_records, read_run_info

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "runs" / "v1-live"


def records() -> list[RequestRecord]:
    """Ten tokens 0.1 s apart from t = 0.1 s.  The server says 100 in / 10 out; the reference tokenizer counts
    120 / 8 for the first request, and has no count at all for the second (a record from before it existed)."""
    times = [0.1 * k for k in range(1, 11)]
    return [
        RequestRecord(
            0, input_tokens=100, output_tokens=10, token_times=times, ref_input_tokens=120, ref_output_tokens=8
        ),
        RequestRecord(1, input_tokens=100, output_tokens=10, token_times=times),
    ]


def test_option_b_uses_the_reference_counts_and_the_servers_where_there_are_none():
    b, a = RecordColumns.from_records(records(), "B"), RecordColumns.from_records(records(), "A")
    assert b.input_tokens.tolist() == [120, 100] and b.output_tokens.tolist() == [8, 10]
    assert a.input_tokens.tolist() == [100, 100] and a.output_tokens.tolist() == [10, 10]
    assert b.server_input_tokens.tolist() == a.server_input_tokens.tolist() == [100, 100]
    assert b.ref_input_tokens.tolist() == [120, -1] and b.ref_output_tokens.tolist() == [8, -1]


def test_summary_metrics_follow_the_option():
    """E2E 1.0 s, TTFT 0.1 s.  A: TPOT 0.9 / 9 = 100 ms for both; B: 0.9 / 7 for the first.  The window is 1 s, so
    throughput is the sum of the counts: A 20 out / 200 in, B 18 out / 220 in."""
    a = summarize(RecordColumns.from_records(records(), "A")).model_dump(mode="json")
    b = summarize(RecordColumns.from_records(records(), "B")).model_dump(mode="json")
    assert a["tpot_ms"]["max"] == pytest.approx(100.0)
    assert b["tpot_ms"]["max"] == pytest.approx(900 / 7) and b["tpot_ms"]["min"] == pytest.approx(100.0)
    assert (a["throughput"]["output_tok_s"], a["throughput"]["input_tok_s"]) == pytest.approx((20.0, 200.0))
    assert (b["throughput"]["output_tok_s"], b["throughput"]["input_tok_s"]) == pytest.approx((18.0, 220.0))
    assert b["input_tokens"]["max"] == 120 and a["input_tokens"]["max"] == 100
    assert b["normalized_latency_ms"]["max"] == pytest.approx(1000 / 8)


def test_a_prefill_deadline_is_evaluated_on_the_count_the_metrics_use(tmp_path):
    """A curve TTFT(P) = 1 ms per token: 500 reference tokens give a 500 ms first-token deadline, the server's 700
    give 700 ms.  A first token at 550 ms misses under option B (50 ms late: one deadline missed, then the next
    token meets its own) and meets under option A."""
    curve = tmp_path / "curve.json"
    PrefillCurve(0.0, 0.001, 0.0, 1.0, counting_method="B", tokenizer="cl100k_base").save(curve)
    rec = RequestRecord(0, input_tokens=700, output_tokens=2, token_times=[0.55, 0.56], ref_input_tokens=500)
    deadlines = parse_deadlines(f"ttft=@{curve},tbt=100ms")
    b = summarize(RecordColumns.from_records([rec], "B"), "B", None, deadlines).model_dump(mode="json")["fluidity"]
    a = summarize(RecordColumns.from_records([rec], "A"), "B", None, deadlines).model_dump(mode="json")["fluidity"]
    assert b["service_miss_rate"] == pytest.approx(1 / 2)
    assert a["service_miss_rate"] == 0.0


def test_records_written_before_reference_counts_read_back_with_nulls():
    """v1-live was written at main 41f1c1f, before ref_input_tokens / ref_output_tokens; its run.json declares the
    server's counts (option A), so its metrics are what they were."""
    table = read_records(FIXTURE)
    assert table.column("ref_input_tokens").null_count == table.num_rows == 12
    assert table.column("ref_output_tokens").null_count == 12
    info = read_run_info(FIXTURE)
    assert counting_of(info.tokenizer) == "A"
    cols = RecordColumns.from_table(table, counting_of(info.tokenizer))
    assert np.array_equal(cols.input_tokens, table.column("input_tokens").to_numpy())
    assert np.array_equal(RecordColumns.from_table(table, "B").output_tokens, cols.output_tokens)  # the fallback
