"""`infermeter run` end to end against the emulator: open and closed loop, warm-up, bounds, cold start.
(Signals, a killed server and a full disk are in tests/faults.)"""

import numpy as np
import orjson
import pytest

from infermeter.emulator import EmulatorConfig, running_emulator
from infermeter.metrics import RecordColumns
from infermeter.records import read_records, read_run_info
from tests.cli import infermeter
from tests.timing import Noise, measured


@pytest.fixture(scope="module")
def fast_emulator():
    with running_emulator(EmulatorConfig(speed=4)) as url:
        yield url


def run_cli(*args, timeout=240):
    return infermeter("run", "--no-progress", *args, timeout=timeout)


def test_open_loop_run_with_the_drafts_warmup(fast_emulator, tmp_path):
    out = tmp_path / "run"

    def measure():
        out.mkdir(exist_ok=True)
        for f in out.iterdir():
            f.unlink()
        return run_cli("--url", fast_emulator, "--rate", "50", "--requests", "60", "--slo", "ttft=200ms", "--out", out)

    def check(p, noise: Noise) -> None:
        assert p.returncode == 0, p.stderr
        cols = _cols(out)
        lag_ms = (cols.submitted_at - cols.scheduled_at) * 1e3
        assert np.all(lag_ms >= 0), "sent before its time"
        # the systematic lag only: the tail of a 60-request run is the host's, and benchmarks/pacing.py measures it
        assert np.median(lag_ms) < 2, f"send lag p50 {np.median(lag_ms):.2f} ms"

    p = measured(measure, check)
    assert "=== LLM Benchmark Report (Minimum) ===" in p.stdout and f"run directory: {out}" in p.stdout
    info = read_run_info(out)
    warm = info.warmup
    # draft 4.5.1: at least 100 requests and 10,000 output tokens, queue drained, probes until stable
    assert warm.done and warm.requests >= 100 and warm.output_tokens >= 10_000 and warm.queue_drained
    assert warm.probe_before_s > 0 and len(warm.probes_after_s) >= 3
    assert info.itl_option == "C" and info.workload.name == "synthetic-uniform" and info.workload.seed == 42
    cols = _cols(out)
    assert cols.n == 60 and cols.ok.all()  # the warm-up is not in the records
    summary = orjson.loads((out / "summary.json").read_bytes())
    assert summary["goodput"]["slo"] == {"ttft": 200.0}


def _cols(out) -> RecordColumns:
    return RecordColumns.of_run(out)


def test_closed_loop_keeps_concurrency_and_barrier(fast_emulator, tmp_path):
    out = tmp_path / "run"
    p = run_cli(
        "--url",
        fast_emulator,
        "--concurrency",
        "4",
        "--barrier",
        "--requests",
        "24",
        "--warmup",
        "off",
        "--input-tokens",
        "64",
        "--output-tokens",
        "32",
        "--out",
        str(out),
    )
    assert p.returncode == 0, p.stderr
    cols = RecordColumns.of_run(out)
    assert cols.n == 24 and cols.ok.all()
    ends = cols.tokens.last()
    # never more than 4 requests in flight at once
    events = sorted([(t, 1) for t in cols.scheduled_at] + [(t, -1) for t in ends])
    assert max(np.cumsum([d for _, d in events])) <= 4
    first4 = np.sort(cols.scheduled_at)[:4]
    assert first4.max() - first4.min() < 0.005  # released together: one event-loop turn, not a timing tail
    warmup = read_run_info(out).warmup
    assert not warmup.done and warmup.cold_start


def test_a_run_without_warm_up_is_labelled_a_cold_start(fast_emulator, tmp_path):
    """Draft 4.5.3: skipping the warm-up measures a cold start, and the report must say so clearly."""
    out = tmp_path / "run"
    p = run_cli("--url", fast_emulator, "--rate", "20", "-n", "5", "--warmup", "off", "--out", out)
    assert p.returncode == 0, p.stderr
    assert "- Cold Start: yes, measured without warm-up (draft 4.5.3)" in p.stdout
    assert "Warm-up: none: COLD START measured (draft 4.5.3)" in p.stdout
    assert "COLD START" in infermeter("report", out).stdout


def test_duration_bounds_an_open_loop_run(fast_emulator, tmp_path):
    out = tmp_path / "run"
    p = run_cli(
        "--url",
        fast_emulator,
        "--rate",
        "20",
        "--arrival",
        "constant",
        "--duration",
        "1.0",
        "--warmup",
        "off",
        "--input-tokens",
        "16",
        "--output-tokens",
        "8",
        "--out",
        str(out),
    )
    assert p.returncode == 0, p.stderr
    n = read_records(out).num_rows
    assert 19 <= n <= 22  # sends at 0, 0.05, ..., 1.0 s


def test_bad_load_options_are_one_line_errors(tmp_path):
    p = run_cli("--url", "http://127.0.0.1:9", "--out", str(tmp_path / "x"))
    assert p.returncode == 2 and "give a load" in p.stderr and "Traceback" not in p.stderr
    p = run_cli("--url", "http://127.0.0.1:9", "--rate", "1", "--concurrency", "2")
    assert p.returncode == 2 and "not both" in p.stderr
    p = run_cli("--url", "http://127.0.0.1:9", "--rate", "1", "--warmup", "off", "--out", str(tmp_path / "y"))
    assert p.returncode == 2 and "nothing answers at http://127.0.0.1:9 (connection refused)" in p.stderr
    assert not (tmp_path / "y").exists()  # nothing was created for a run that could not start


def test_a_trace_is_replayed_at_its_own_arrival_times(fast_emulator, tmp_path):
    """A BurstGPT trace's lengths and timestamps (compressed 10x) become the run's requests and send times."""
    trace = tmp_path / "trace.csv"
    rows = ["Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"]
    rows += [f"{0.5 * k:.1f},ChatGPT,{8 + k},4,{12 + k},Conversation log" for k in range(12)]
    trace.write_text("\n".join(rows) + "\n")
    out = tmp_path / "run"
    p = run_cli("--url", fast_emulator, "--trace", trace, "--rps-scale", "10", "--warmup", "off", "--out", out)
    assert p.returncode == 0, p.stderr
    records = read_records(out).to_pylist()
    assert sorted(r["input_tokens"] for r in records) == [8 + k for k in range(12)]  # the emulator's own count
    planned = np.sort([r["scheduled_at"] for r in records])
    np.testing.assert_allclose(np.diff(planned), 0.05, atol=1e-9)  # 0.5 s apart in the trace, 10x faster
    assert "replay of trace.csv" in (read_run_info(out).load.description or "")
