import orjson
import pytest

from infermeter.errors import UserError
from infermeter.metrics import RecordColumns, Summary, summarize
from infermeter.metrics.fluidity import parse_deadlines
from infermeter.metrics.summary_model import SUMMARY_SCHEMA, parse_summary
from infermeter.records import read_run_info
from tests.contract import EARLIER_RUNS, STATS_KEYS, SUMMARY_KEYS, V1_RUNS, same_json

# blocks a v1 summary.json holds that the records cannot give back (cli's report keeps them from the file)
STORED = {"server_metrics", "energy", "sim", "itl_source", "fluidity_note"}
ENDPOINTS_ITL = {"itl_ms", "jitter_ms", "max_pause_ms"}  # a simulated run that recorded first and last tokens only


def test_summary_of_hand_records(records):
    s = summarize(RecordColumns.from_records(records), "B", {"ttft": 0.25, "tpot": 0.04})
    assert s.requests.model_dump(mode="json") == {
        "total": 4,
        "ok": 3,
        "failed": 1,
        "success_rate": 0.75,
        "by_status": {"ok": 3, "error": 1, "timeout": 0, "cancelled": 0},
        "failures_by_reason": {"connection lost mid-stream": 1},
        "errors": [{"error": "connection lost mid-stream: after 1 tokens", "count": 1}],
    }
    # window: first submission 0.5 to last token 2.2
    assert s.duration_s == pytest.approx(1.7)
    assert s.throughput.output_tok_s == pytest.approx(8 / 1.7)
    assert s.throughput.input_tok_s == pytest.approx(1900 / 1.7)
    assert s.throughput.req_s == pytest.approx(3 / 1.7)
    assert s.ttft_ms.n == 3 and s.ttft_ms.p50 == pytest.approx(100)
    assert s.itl_ms.n == 5 and s.itl_ms.max == pytest.approx(100)
    assert s.tpot_ms.n == 2 and s.tpot_ms.mean == pytest.approx(40)
    # request 0 (ttft .10, tpot .03) and the single-token request 1 (ttft .2) meet both; request 3's tpot .05 fails
    assert s.goodput.met == 2
    assert s.goodput.fraction == pytest.approx(0.5)
    assert s.goodput.req_s == pytest.approx(2 / 1.7)
    assert s.goodput.slo == pytest.approx({"ttft": 250.0, "tpot": 40.0})
    assert s.chunking.tokens_per_chunk_mean == pytest.approx(8 / 6)
    assert [b.bucket for b in s.ttft_by_input_tokens] == ["0-256", "256-512", "1024-2048"]
    assert s.fairness.classes["long"].model_dump() == {
        "count": 2,
        "ok": 1,
        "ttft_p50": pytest.approx(100),
        "ttft_p99": pytest.approx(100),
        "tpot_p50": pytest.approx(50),
        "tpot_p99": pytest.approx(50),
    }


def test_summary_has_the_contract_keys(records):
    s = summarize(RecordColumns.from_records(records)).model_dump(mode="json")
    assert set(s) >= SUMMARY_KEYS and s["schema_version"] == SUMMARY_SCHEMA == "infermeter.summary/2"
    assert set(s["ttft_ms"]) >= STATS_KEYS
    assert set(s["goodput"]) >= {"slo", "req_s", "fraction"}
    assert not set(s) & STORED  # blocks only some runs have are left out, not written as null
    assert s["fluidity"] is None  # ... while a block every run has stays, null when it does not apply


def test_summary_of_nothing_does_not_crash():
    s = summarize(RecordColumns.from_records([]))
    assert s.requests.total == 0 and s.throughput.req_s == 0.0
    # as before versions: no chunks, no tokens_per_chunk_max key
    assert set(s.model_dump(mode="json")["chunking"]) == {
        "chunks",
        "tokens_per_chunk_mean",
        "single_token_share",
        "server_times",
    }


@pytest.mark.parametrize("name", V1_RUNS)
def test_summary_serializes_to_the_keys_and_values_of_v1(name):
    """summarize() over a v1 run's records, dumped, is that run's summary.json (the key sets and every value) plus
    schema_version, but for the blocks the records cannot give back."""
    run = EARLIER_RUNS / name
    info = read_run_info(run)
    stored = orjson.loads((run / "summary.json").read_bytes())
    endpoints = info.token_times == "endpoints"
    deadlines = parse_deadlines(info.deadlines) if info.deadlines and not endpoints else None
    s = summarize(RecordColumns.of_run(run, info), info.itl_option, dict(info.slo), deadlines)
    got = s.model_dump(mode="json")
    assert got.pop("schema_version") == SUMMARY_SCHEMA
    assert set(got) == set(stored) - STORED
    recomputable = set(got) - (ENDPOINTS_ITL if endpoints else set())
    assert same_json({k: got[k] for k in recomputable}, {k: stored[k] for k in recomputable}) == []


@pytest.mark.parametrize("name", V1_RUNS)
def test_v1_summary_reads_and_writes_back_unchanged(name):
    """A summary.json without a version reads as a Summary and dumps to the same document, its version added."""
    doc = orjson.loads((EARLIER_RUNS / name / "summary.json").read_bytes())
    s = parse_summary(doc, name)
    assert isinstance(s, Summary) and s.ttft_ms.p50 == doc["ttft_ms"]["p50"]
    assert same_json(s.model_dump(mode="json"), {"schema_version": SUMMARY_SCHEMA, **doc}, rel=0) == []
    again = parse_summary(orjson.loads(orjson.dumps(s.model_dump(mode="json"))), name)
    assert again == s


def test_a_stray_key_or_a_future_version_is_refused_in_one_line():
    doc = orjson.loads((EARLIER_RUNS / "v1-live" / "summary.json").read_bytes())
    doc["energy"]["colour"] = "blue"
    with pytest.raises(UserError, match=r"^x/summary\.json is not a valid summary: unknown key 'energy\.colour'"):
        parse_summary(doc, "x/summary.json")
    with pytest.raises(UserError, match=r"schema_version 'infermeter\.summary/9'") as err:
        parse_summary({"schema_version": "infermeter.summary/9"}, "x/summary.json")
    assert "\n" not in str(err.value)
