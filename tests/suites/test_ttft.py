"""The ttft test (draft 5.1) against the embedded emulator: Table 1 is the run's summary, and TTFT splits into the
queue wait and the prefill the emulator exports as vLLM does; under a backlog the wait is most of it."""

from __future__ import annotations

from pathlib import Path

from infermeter.suites.lab import read_run
from tests.cli import suite_result


def _rows(result, caption: str) -> dict[str, list[str]]:
    table = next(t for t in result.analysis.tables if t.caption.startswith(caption))
    return {r[0]: r for r in table.rows}


def test_table_1_is_the_runs_summary_and_ttft_splits_into_queue_wait_and_prefill(tmp_path: Path) -> None:
    light = suite_result("ttft", tmp_path / "light", "--rate", "5", "--requests", "40")
    summary = read_run("ttft", "", Path(light.runs[0].run_dir), reused=True).summary
    t1 = _rows(light, "Table 1")
    assert t1["Requests"][1] == str(summary.ttft_ms.n) == "40"
    f = light.analysis.figures
    assert f["ttft_p50_ms"] == summary.ttft_ms.p50 and f["ttft_p99_ms"] == summary.ttft_ms.p99
    components = _rows(light, "TTFT components")
    assert set(components) == {"Queue wait", "Prefill"}
    server = summary.server_metrics
    assert server is not None and server.queue_time is not None and server.prefill_time is not None
    assert server.queue_time.count == server.prefill_time.count == 40  # the window holds the measured requests
    # 5 req/s on an idle engine: requests are scheduled at once, the first token is prefill
    assert f["queue_p50_ms"] < 0.5 * f["ttft_p50_ms"], f

    # 24 streams kept in flight through a 4-sequence batch: most of a request's TTFT is its wait for a slot
    small = tmp_path / "small.json"
    small.write_text('{"engine": {"scheduler": {"name": "continuous", "max_num_seqs": 4}}}')
    load = ("--concurrency", "24", "--requests", "60")
    busy = suite_result("ttft", tmp_path / "busy", *load, "--emulator-config", str(small))
    g = busy.analysis.figures
    assert g["queue_p50_ms"] > 0.5 * g["ttft_p50_ms"], g
    assert g["queue_p50_ms"] > 5 * f["queue_p50_ms"], (f, g)
