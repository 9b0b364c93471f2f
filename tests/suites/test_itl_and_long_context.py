"""The ITL test (5.4) and the long-context test (5.9) against the embedded emulator."""

from __future__ import annotations

from pathlib import Path

import pytest

from infermeter.records import read_run_info
from tests.cli import exit_code, suite_result


def test_itl_runs_four_levels_with_table_6_jitter_and_a_modality_verdict(tmp_path: Path) -> None:
    result = suite_result("itl", tmp_path / "itl")
    f = result.analysis.figures
    captions = [t.caption for t in result.analysis.tables]
    assert sum(c.startswith("Table 6: ITL Results") for c in captions) == 4
    assert all(f[f"modality_{p}"] in ("unimodal", "multimodal") for p in (25, 50, 75, 90))
    assert all(isinstance(f[f"itl_p50_ms_{p}"], float) for p in (25, 50, 75, 90))
    jitter = result.analysis.tables[-1]
    assert [r[0] for r in jitter.rows] == ["25%", "50%", "75%", "90%"] and jitter.headers[4] == "Jitter P50"
    fifty = next(r for r in result.requirements if r.section == "5.4.2" and "50 output" in r.text)
    assert fifty.met  # Synthetic-Uniform's outputs (64-256 tokens, EOS ignored): --quick never shortens them
    # the levels are shares of the emulator's capacity measured on this workload, not a constant
    assert result.runs[0].key == "probe-capacity" and "closed-loop probe" in result.analysis.findings[0]
    assert f["saturation_req_s"] == float(result.analysis.findings[0].split()[1])
    assert [r.level for r in result.runs[1:]] == ["25%", "50%", "75%", "90%"]
    assert all(f[f"tail_{p}"] in ("exponential", "heavy-tailed", "light-tailed", "too few samples") for p in (25, 90))
    assert jitter.headers[-1] == "Tail"


def test_itl_refuses_outputs_shorter_than_50_tokens_before_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = exit_code(["test", "itl", "--workload", "synthetic-skewed", "--out", str(tmp_path / "x"), "--no-progress"])
    assert code == 2
    assert ">= 50" in capsys.readouterr().err
    assert not (tmp_path / "x" / "runs").exists()


def test_long_context_ttft_grows_faster_than_the_length(tmp_path: Path) -> None:
    # replies of 64 tokens, not the draft's 256: TTFT is what grows with the length; each decode step of an
    # 8K context is slow in the emulator (40 ms), and four times fewer of them save a minute of real clock
    result = suite_result("long-context", tmp_path / "lc", "--output-tokens", "64")
    f = result.analysis.figures
    assert isinstance(f["k"], float) and f["k"] > 1.1
    # four lengths leave the F-test one degree of freedom: the quadratic fits better, significantly or not
    assert isinstance(f["quadratic_r2"], float) and isinstance(f["linear_r2"], float)
    assert f["quadratic_r2"] > f["linear_r2"]
    table = result.analysis.tables[0]
    assert table.caption == "Table 12: Long Context Scaling" and [r[0] for r in table.rows] == [
        "1024",
        "2048",
        "4096",
        "8192",
    ]
    per_1k = [float(r[4]) for r in table.rows]
    assert per_1k[-1] > 1.3 * per_1k[0]  # ms per 1K tokens rises with the length: super-linear
    workload = next(r for r in result.requirements if "Long Context workload" in r.text)
    assert workload.met and workload.level == "MUST"  # every length sent A.5.1's document + question
    for r in result.runs:  # each run warmed up with short prompts first (5.9.3)
        info = read_run_info(Path(r.run_dir))
        n = int(r.key.split("-")[1])
        assert info.warmup.done and info.warmup.max_input_tokens is not None and info.warmup.max_input_tokens < n
    assert sorted({read_run_info(Path(r.run_dir)).load.concurrency for r in result.runs}) == [1, 2, 3, 4]
    assert all(r[5].endswith(")") and "(c=" in r[5] for r in table.rows)  # the best of concurrency 1-4
    chart = result.analysis.charts[0]
    _, mean, linear, quadratic = chart.traces
    assert mean.x == [1024.0, 2048.0, 4096.0, 8192.0]
    assert mean.y == [f[f"ttft_mean_ms_{n}.0"] for n in (1024, 2048, 4096, 8192)]
    assert quadratic.dash is (f["best_fit"] != "quadratic") and linear.dash is (f["best_fit"] != "linear")
    assert quadratic.y[-1] == pytest.approx(mean.y[-1], rel=0.15)  # the fit passes near the longest length's TTFT
