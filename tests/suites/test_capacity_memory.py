"""The concurrent capacity search (5.5) and memory pressure (5.8) against the embedded emulator."""

from __future__ import annotations

from pathlib import Path

from tests.cli import suite_result


def test_capacity_converges_between_a_passing_and_a_failing_concurrency(tmp_path: Path) -> None:
    result = suite_result("capacity", tmp_path / "cap")
    f = result.analysis.figures
    best, failed = f["max_concurrency"], f["first_failure"]
    assert isinstance(best, int) and isinstance(failed, int)
    assert failed == best + 1  # the search converged to adjacent levels
    rows = {int(r[0]): r[-1] for r in result.analysis.tables[0].rows}
    assert rows[best] == "Pass" and rows[failed].startswith("Fail: TTFT P99")
    assert all(v.startswith("Fail") for c, v in rows.items() if c > best)
    assert isinstance(f["tokens_in_flight"], float) and f["tokens_in_flight"] > best * 256 * 0.5  # prompts held


def test_memory_pressure_preempts_only_when_oversubscribed(tmp_path: Path) -> None:
    result = suite_result("memory-pressure", tmp_path / "mem")
    f = result.analysis.figures
    assert f["base_concurrency"] == 7  # the emulator's KV holds 7 requests of 2048 + 256 tokens
    assert f["preemptions_100"] == 0
    assert isinstance(f["preemptions_150"], float) and f["preemptions_150"] > 0
    # the emulator's per-request counters: which requests were hit, whether they finished, what they discarded
    assert f["preempted_share_100"] == 0 and f["recovery_100"] is None
    assert isinstance(f["preempted_share_150"], float) and 0 < f["preempted_share_150"] <= 1
    assert f["recovery_150"] == 1.0  # recompute preemption loses time, never the request
    # a victim is preempted while it prefills or decodes: it drops at least part of its 2048-token prompt's KV
    assert isinstance(f["tokens_lost_150"], float) and 0 < f["tokens_lost_150"] <= 2048 + 256
    assert next(r for r in result.requirements if r.text.startswith("preemption rate")).met
    assert result.analysis.tables[0].caption == "Table 11: Memory Pressure Degradation"
