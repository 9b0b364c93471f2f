import pytest

from infermeter.metrics import RecordColumns, summarize
from tests.contract import STATS_KEYS, SUMMARY_KEYS


def test_summary_of_hand_records(records):
    s = summarize(RecordColumns.from_records(records), "B", {"ttft": 0.25, "tpot": 0.04})
    assert s["requests"] == {
        "total": 4,
        "ok": 3,
        "failed": 1,
        "success_rate": 0.75,
        "by_status": {"ok": 3, "error": 1, "timeout": 0, "cancelled": 0},
        "failures_by_reason": {"connection lost mid-stream": 1},
        "errors": [{"error": "connection lost mid-stream: after 1 tokens", "count": 1}],
    }
    # window: first submission 0.5 to last token 2.2
    assert s["duration_s"] == pytest.approx(1.7)
    assert s["throughput"]["output_tok_s"] == pytest.approx(8 / 1.7)
    assert s["throughput"]["input_tok_s"] == pytest.approx(1900 / 1.7)
    assert s["throughput"]["req_s"] == pytest.approx(3 / 1.7)
    assert s["ttft_ms"]["n"] == 3 and s["ttft_ms"]["p50"] == pytest.approx(100)
    assert s["itl_ms"]["n"] == 5 and s["itl_ms"]["max"] == pytest.approx(100)
    assert s["tpot_ms"]["n"] == 2 and s["tpot_ms"]["mean"] == pytest.approx(40)
    # request 0 (ttft .10, tpot .03) and the single-token request 1 (ttft .2) meet both; request 3's tpot .05 fails
    assert s["goodput"]["met"] == 2
    assert s["goodput"]["fraction"] == pytest.approx(0.5)
    assert s["goodput"]["req_s"] == pytest.approx(2 / 1.7)
    assert s["goodput"]["slo"] == pytest.approx({"ttft": 250.0, "tpot": 40.0})
    assert s["chunking"]["tokens_per_chunk_mean"] == pytest.approx(8 / 6)
    assert [b["bucket"] for b in s["ttft_by_input_tokens"]] == ["0-256", "256-512", "1024-2048"]
    assert s["fairness"]["classes"]["long"] == {
        "count": 2,
        "ok": 1,
        "ttft_p50": pytest.approx(100),
        "ttft_p99": pytest.approx(100),
        "tpot_p50": pytest.approx(50),
        "tpot_p99": pytest.approx(50),
    }


def test_summary_has_the_contract_keys(records):
    s = summarize(RecordColumns.from_records(records))
    assert set(s) >= SUMMARY_KEYS
    assert set(s["ttft_ms"]) >= STATS_KEYS
    assert set(s["goodput"]) >= {"slo", "req_s", "fraction"}


def test_summary_of_nothing_does_not_crash():
    s = summarize(RecordColumns.from_records([]))
    assert s["requests"]["total"] == 0 and s["throughput"]["req_s"] == 0.0
