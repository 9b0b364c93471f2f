"""The draft's load sweeps against the embedded emulator (a small, fast engine, so it saturates at a rate the client
drives easily): the throughput search finds saturation without an SLO on the workload asked for, a tight SLO lowers
the sustainable load, and the tradeoff sweep shows a knee."""

from __future__ import annotations

from pathlib import Path

import pytest

from infermeter.records import read_run_info
from infermeter.report.suite import suite_report
from infermeter.suites.execute import load_result
from tests.cli import suite_result


def test_throughput_finds_saturation_without_an_slo_and_less_load_under_a_tight_one(tmp_path: Path) -> None:
    free = suite_result("throughput", tmp_path / "free", "--workload", "synthetic-uniform")
    f = free.analysis.figures
    infos = [read_run_info(Path(r.run_dir)) for r in free.runs]  # --quick shortens the levels, never the workload
    assert {i.workload.name for i in infos} == {"synthetic-uniform"}
    assert "- Workloads: synthetic-uniform (seed 42)" in suite_report(free, infos)
    assert [r.level for r in free.runs] == [f"probe {k}" for k in range(1, len(free.runs) + 1)]
    assert isinstance(f["sustainable_load"], float) and isinstance(f["saturated_at"], float)
    assert f["sustainable_load"] < f["saturated_at"]
    assert "queue grows" in str(f["saturation_reasons"]) or "completions" in str(f["saturation_reasons"])
    assert [t.caption for t in free.analysis.tables][1:] == [
        "Table 3: Throughput Summary",
        "Table 4: Latency at Maximum Throughput",
    ]
    assert free.verdict == "not compliant"  # --quick
    table3 = dict(free.analysis.tables[1].rows)  # the emulator exports its batch size: utilization is known
    assert table3["Batch Utilization"].endswith("%") and 0 < float(table3["Batch Utilization"][:-1]) <= 100
    assert table3["Max Output Throughput"] == f"{f['max_output_tok_s']:.0f} tok/s"  # the steady window's
    assert table3["Throughput Stability"] == f"{100 * f['throughput_cv']:.1f}% CV"
    steady = next(r for r in free.requirements if r.section == "5.2.3.2")
    assert "steady window" in steady.reason and "throughput varies" in steady.reason
    search = free.analysis.charts[0]  # the search steps: every probe, passed or failed, in the order run
    passed, failed = (t for t in search.traces if t.name in ("passed", "failed"))
    assert search.id == "throughput-search" and passed.points() + failed.points() == len(free.analysis.tables[0].rows)
    assert max(passed.y) == f["sustainable_load"] and min(failed.y) == f["saturated_at"]  # type: ignore[type-var]
    tight = suite_result("throughput", tmp_path / "tight", "--ttft-slo", "40")
    g = tight.analysis.figures
    assert isinstance(g["sustainable_load"], float) and g["sustainable_load"] < f["sustainable_load"]


def test_tradeoff_sweeps_twelve_levels_and_finds_the_knee(tradeoff_suite: Path) -> None:
    result = load_result(tradeoff_suite)  # `test tradeoff --quick --capacity 20`
    f = result.analysis.figures
    assert f["levels"] == 12 and len(result.analysis.tables[0].rows) == 12
    assert isinstance(f["knee_index"], int) and f["knee_index"] >= 3  # low load is flat, then latency turns up
    assert isinstance(f["last_e2e_p99_ms"], float) and isinstance(f["min_e2e_p99_ms"], float)
    assert f["last_e2e_p99_ms"] > 2 * f["min_e2e_p99_ms"]
    assert any(line.startswith("Knee point: ") and "req/s" in line for line in result.analysis.findings)
    assert result.runs[0].key == "level-10pct"  # --capacity given: no preliminary search
    assert [r.level for r in result.runs] == [f"{p}%" for p in range(10, 130, 10)]  # named alike in every suite
    curve = result.analysis.charts[0]  # TTFT and TPOT percentiles against achieved throughput, a point per level
    assert curve.id == "tradeoff-curve" and curve.panels == ["TTFT (ms)", "TPOT (ms)"]
    assert [t.name for t in curve.traces] == [f"{m} P{p}" for m in ("TTFT", "TPOT") for p in (50, 95, 99)]
    achieved = curve.traces[0].x
    rows = result.analysis.tables[0].rows  # Table 5 rounds: achieved tok/s to units, latencies to 0.1 ms (1 ms >= 100)
    assert achieved == [pytest.approx(float(r[1]), abs=0.5) for r in rows]
    assert curve.traces[2].y == [pytest.approx(float(r[3]), abs=0.5) for r in rows]  # TTFT P99
    knee = next(m for m in curve.marks if m.label.startswith("knee"))
    assert knee.x == achieved[f["knee_index"]]  # type: ignore[index]
