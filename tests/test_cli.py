"""The CLI end to end: `report` on a run written by a test, `workload` output, one-line errors."""

import csv
import re

import orjson
import pytest

from infermeter.records import RunInfo, write_records
from tests.cli import infermeter, report_json
from tests.contract import STATS_KEYS, SUMMARY_KEYS


@pytest.fixture
def run_dir(tmp_path, records):
    info = RunInfo(
        kind="test",
        sut={"model": "hand-made", "hardware": "none"},
        workload={"name": "hand", "seed": 0},
        load={"description": "open-loop, 4 requests"},
        slo={"ttft": 0.25},
    )
    write_records(tmp_path / "run", info, records)
    return tmp_path / "run"


def test_report_prints_the_drafts_tables(run_dir):
    p = infermeter("report", str(run_dir))
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "Table 1: TTFT Results" in out and "Table 6: ITL Results" in out
    assert "=== LLM Benchmark Report (Minimum) ===" in out and "=== End Report ===" in out
    assert re.search(r"\| TTFT P50 +\| 100 ms +\|", out)
    assert re.search(r"\| TTFT Min +\| 100 ms +\|", out)
    assert re.search(r"\| ITL Samples +\| 5 +\|", out)
    assert re.search(r"\| P99/P50 Ratio +\| 3.28 +\|", out)
    assert "- Model: hand-made" in out
    assert "Table 8: Per-Class Results" in out


def test_report_json_is_the_summary_contract(run_dir):
    s = report_json(run_dir)
    assert set(s) >= SUMMARY_KEYS and set(s["ttft_ms"]) >= STATS_KEYS
    assert set(s["requests"]) >= {"total", "ok", "failed", "success_rate"}
    assert set(s["throughput"]) == {"output_tok_s", "input_tok_s", "req_s"}
    assert s["goodput"]["slo"] == {"ttft": 250.0}
    assert s["ttft_ms"]["p50"] == pytest.approx(100.0)
    a = report_json(run_dir, "--itl-option", "A")
    assert a["itl_ms"]["n"] == 3 and a["itl_option"] == "A"


def test_workload_writes_requests(tmp_path):
    def draw(out):
        args = ["synthetic-skewed", "--requests", "50", "--seed", "3", "--rate", "5", "--arrival", "gamma"]
        return infermeter("workload", *args, "--burstiness", "0.5", "--out", str(out))

    out, again = tmp_path / "w.csv", tmp_path / "w2.csv"
    p = draw(out)
    assert p.returncode == 0, p.stderr
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 50 and float(rows[0]["arrival_s"]) == 0.0 and float(rows[-1]["arrival_s"]) > 0
    draw(again)
    assert out.read_text() == again.read_text()
    j = tmp_path / "w.json"
    assert infermeter("workload", "conversation", "-n", "5", "--out", str(j)).returncode == 0
    doc = orjson.loads(j.read_bytes())
    assert doc["workload"]["seed"] == 42 and len(doc["requests"]) == 5
    assert any("ShareGPT" in n for n in doc["workload"]["notes"])


@pytest.mark.parametrize(
    "args, message",
    [
        (["report", "/nonexistent/run"], "is not a run directory"),
        (["workload", "nope"], "unknown workload 'nope'"),
        (["workload", "synthetic-uniform", "--out", "x.txt"], "use a file ending in"),
        (["workload", "synthetic-uniform", "--rate", "1", "--arrival", "poisson", "--burstiness", "0.5"], "burstiness"),
        (["sim", "--bins", "8", "-n", "10"], "--bins sets multi-bin dynamic batching's bins"),
        (["sim", "--scheduler", "fifo", "-n", "10"], "--scheduler"),
    ],
)
def test_bad_input_is_one_line_no_traceback(args, message, tmp_path):
    p = infermeter(*args, cwd=tmp_path)
    assert p.returncode == 2
    assert message in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_run_without_url_benchmarks_the_embedded_emulator(tmp_path):
    """README's first command: no options at all, the emulator started and stopped, the report printed."""
    p = infermeter("run", "--no-progress", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "=== LLM Benchmark Report (Minimum) ===" in p.stdout and "- Request Count: 300" in p.stdout
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert (run_dir / "records.parquet").is_file() and (run_dir / "summary.json").is_file()


def test_usage_errors_point_at_the_commands_own_help(tmp_path):
    """A bad value names the option and the command's help (it used to say "see infermeter infermeter --help"), and
    `capacity --api bogus` is refused before any probe (it used to start probing as chat)."""
    p = infermeter("capacity", "--slo", "ttft:p99<=1s", "--api", "bogus", "--out", tmp_path / "cap", cwd=tmp_path)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
    choices = "completions, chat, responses, embeddings, rerank, tgi, sglang, triton"
    assert f"Invalid value for '--api': must be one of {choices}, got bogus" in p.stderr, p.stderr
    assert p.stderr.rstrip().endswith("(see infermeter capacity --help)") and not (tmp_path / "cap").exists()
