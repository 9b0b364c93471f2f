"""`report` reads every earlier version of the run directory (tests/fixtures/runs), recomputing from the records
with today's code, and a run written today validates against the current contracts."""

import re
import shutil

import numpy as np
import orjson
import pytest

from infermeter.metrics import RecordColumns, summarize
from infermeter.metrics.summary_model import SUMMARY_SCHEMA, parse_summary
from infermeter.records import read_run_info
from infermeter.report.tables import fmt_ms
from tests.cli import infermeter, report_json
from tests.contract import EARLIER_RUNS, V1_RUNS, same_json

NEW_SERVER_METRICS = (
    "preempted_requests",
    "preempted_finished",
    "preempted_tokens",
    "batch_utilization",
    "queue_time",
    "prefill_time",
)


def fixture_summary(name: str) -> dict:
    return orjson.loads((EARLIER_RUNS / name / "summary.json").read_bytes())


def key_sets(doc: object, where: str = "") -> dict[str, frozenset[str]]:
    """Every object's key set in a JSON document, by path; a list's items as one ("[]": how many there are is the
    data's, e.g. the input-length buckets a workload's draw reaches)."""
    out: dict[str, frozenset[str]] = {}
    if isinstance(doc, dict):
        out[where] = frozenset(doc)
        for k, v in doc.items():
            out.update(key_sets(v, f"{where}.{k}"))
    elif isinstance(doc, list):
        for v in doc:
            for path, keys in key_sets(v, f"{where}[]").items():
                out[path] = out.get(path, frozenset()) | keys
    return out


@pytest.mark.parametrize("name", V1_RUNS)
def test_report_of_a_v1_run_prints_its_figures(name):
    stored = fixture_summary(name)
    p = infermeter("report", EARLIER_RUNS / name)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    shown = (("TTFT P50", "ttft_ms", "p50"), ("TTFT P99", "ttft_ms", "p99"), ("ITL P99", "itl_ms", "p99"))
    for label, block, stat in shown:
        assert re.search(rf"\| {label} +\| {re.escape(fmt_ms(stored[block][stat]))} +\|", out), (label, out)
    assert f"- Request Count: {stored['requests']['total']}" in out
    assert re.search(rf"\| Output throughput +\| {stored['throughput']['output_tok_s']:.1f} tok/s +\|", out)
    if name == "v1-live":
        assert "Fluidity (Metron)" in out and "Server metrics and energy" in out
        assert "- Model: infermeter-emulator" in out
        assert "Warm-up: done, 2 requests, 16 output tokens" in out
    else:
        assert "Simulated engine (utilization, batches, queueing, SLA)" in out
        assert "| Peak KV usage " in out and "- Model: engine model: batch latency, scheduler multi_bin_dynamic" in out


@pytest.mark.parametrize("name", V1_RUNS)
def test_report_json_of_a_v1_run_is_its_summary(name):
    """Recomputed from the records (plus the blocks only summary.json holds), the report is the run's summary.json,
    every key and every value, with today's schema_version."""
    got = report_json(EARLIER_RUNS / name)
    assert same_json(got, {"schema_version": SUMMARY_SCHEMA, **fixture_summary(name)}) == []


def test_report_recomputes_a_v1_run_with_todays_code():
    """Options that change the computation change the figures as today's summarize() computes them from the
    records: another ITL option (the run declared C, server times) and another SLO."""
    run = EARLIER_RUNS / "v1-live"
    got = report_json(run, "--itl-option", "B", "--slo", "ttft=9ms")
    cols = RecordColumns.of_run(run)
    info = read_run_info(run)
    assert info.deadlines is not None
    expect = summarize(cols, "B", {"ttft": 0.009}).model_dump(mode="json")
    for key in ("itl_ms", "jitter_ms", "max_pause_ms", "goodput", "ttft_ms", "requests"):
        assert same_json(got[key], expect[key]) == [], key
    stored = fixture_summary("v1-live")
    assert got["itl_option"] == "B" != stored["itl_option"] and got["itl_ms"]["p50"] != stored["itl_ms"]["p50"]
    ttft = (cols.tokens.first() - cols.submitted_at)[cols.ok]
    assert got["goodput"]["met"] == int(np.sum(ttft <= 0.009)) < stored["goodput"]["met"]
    assert got["fluidity"]["tbt_deadline_ms"] == 100.0  # run.json's deadlines still apply


def test_a_stray_key_in_run_json_is_refused_in_one_line(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(EARLIER_RUNS / "v1-live", run)
    doc = orjson.loads((run / "run.json").read_bytes())
    doc["telemetry"]["colour"] = "blue"
    (run / "run.json").write_bytes(orjson.dumps(doc))
    p = infermeter("report", run)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert f"{run / 'run.json'} is not a valid run description: unknown key 'telemetry.colour'" in p.stderr


def test_a_new_sim_run_writes_the_current_contracts_with_the_keys_of_v1(tmp_path):
    """The fixture's own command today: run.json is infermeter.run/2 and reads back; summary.json validates and has
    exactly the v1 keys (every block, every nesting) plus schema_version."""
    out = tmp_path / "sim"
    args = ["--requests", "200", "--rate", "20", "--scheduler", "multi_bin_dynamic", "--slo", "ttft=500ms"]
    p = infermeter("sim", *args, "--deadlines", "ttft=1s,tbt=100ms", "--token-times", "endpoints", "--out", out)
    assert p.returncode == 0, p.stderr
    raw = orjson.loads((out / "run.json").read_bytes())
    assert raw["schema_version"] == "infermeter.run/2" and read_run_info(out).model_dump(mode="json") == raw
    doc = orjson.loads((out / "summary.json").read_bytes())
    assert parse_summary(doc, "summary.json").model_dump(mode="json") == doc
    assert doc.pop("schema_version") == SUMMARY_SCHEMA
    # multi-bin dynamic batching's section 9.4 figures came later: a batch's decode step is beta h(b), above beta
    added = {k: doc["sim"].pop(k) for k in ("decode_step_time_ms", "seconds_per_generated_token")}
    assert 5.742 <= added["decode_step_time_ms"] < 5.742 * 1.316 and 0 < added["seconds_per_generated_token"] < 1
    assert key_sets(doc) == key_sets(fixture_summary("v1-sim"))


def test_a_new_live_run_writes_the_current_contracts_with_the_keys_of_v1(tmp_path):
    """As above for a run against the embedded emulator (the host's energy sources may differ from the fixture's:
    the energy block is compared at its top level only)."""
    out = tmp_path / "live"
    load = ["--requests", "12", "--rate", "20", "--input-tokens", "16", "--output-tokens", "8", "--warmup", "2"]
    slo = ["--slo", "ttft=500ms,tpot=100ms", "--deadlines", "ttft=500ms,tbt=100ms", "--gpu-price", "2.5"]
    p = infermeter("run", *load, *slo, "--seed", "3", "--no-progress", "--out", out)
    assert p.returncode == 0, p.stderr
    raw = orjson.loads((out / "run.json").read_bytes())
    assert raw["schema_version"] == "infermeter.run/2" and read_run_info(out).model_dump(mode="json") == raw
    doc = orjson.loads((out / "summary.json").read_bytes())
    assert parse_summary(doc, "summary.json").model_dump(mode="json") == doc
    assert doc.pop("schema_version") == SUMMARY_SCHEMA
    v1 = fixture_summary("v1-live")
    # v2 adds one block: what the server reported about its own timing (the emulator reports its prefix cache)
    assert doc.pop("server_timing")["cached_tokens_reported"] == 12
    # and server metrics v1 did not scrape: preemption outcomes (5.8.4), batch utilization (5.2), TTFT's components
    added = {k: doc["server_metrics"].pop(k) for k in NEW_SERVER_METRICS}
    # and, later, the engine whose names were read, the decode phase and the server's own token counters
    assert doc["server_metrics"].pop("dialect") == "vllm"
    for k in ("decode_time", "prompt_tokens", "generation_tokens"):
        doc["server_metrics"].pop(k, None)
    assert [added[k]["delta"] for k in ("preempted_requests", "preempted_finished", "preempted_tokens")] == [0, 0, 0]
    # and whether the client kept up (draft 4.2.5), as run.json has it
    health = doc.pop("client_health")
    assert health == raw["client_health"] and health["bound"] is False and 0 < health["cpu_fraction"] < 1
    anchor = raw["clock_anchor"]  # the run clock's 0 in nanoseconds, on both clocks
    assert anchor["wall_ns"] > 1.7e18 and anchor["monotonic_ns"] > 0 and 0 <= anchor["uncertainty_ns"] < 1e7
    assert 0 <= added["batch_utilization"] <= 1
    assert added["queue_time"]["metric"] == "vllm:request_queue_time_seconds" and added["queue_time"]["count"] >= 1
    assert added["prefill_time"]["count"] == added["queue_time"]["count"]
    assert set(doc["energy"]) >= set(v1["energy"]) - {"cpu_util_pct_mean"}
    doc["energy"] = v1["energy"] = {}
    assert key_sets(doc) == key_sets(v1)
