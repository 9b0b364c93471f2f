"""The fault suite, part 3: long jobs killed with SIGKILL resume where they stopped and give the same answer as an
uninterrupted run: `sim-sweep` (rows appended as experiments finish) and the capacity search (a run per probe)."""

import csv
import signal
import subprocess
import sys
import textwrap
import time

import orjson
import psutil
import pytest

from infermeter.errors import ExitCode
from infermeter.records import JOURNAL, RunInfo, write_records
from infermeter.sim.experiments import STEP1_CSV
from infermeter.suites.lab import completed
from tests.cli import infermeter

SWEEP = ["sim-sweep", "--requests", "20000", "--gpus", "1,2,4", "--bins", "1,2,4,8", "--step", "1", "--rate", "30"]


def rows(path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return [{k: v for k, v in r.items() if k != "wall_s"} for r in csv.DictReader(fh)]


def kill_when(proc: subprocess.Popen[bytes], ready, timeout_s: float = 120) -> None:
    """SIGKILL the process as soon as `ready()` holds (bounded in time)."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        assert proc.poll() is None, "the job ended before it could be killed"
        assert time.monotonic() < deadline, "the job never got far enough to be killed"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)


def test_sim_sweep_resumes_after_a_kill_with_the_same_rows(tmp_path):
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    assert infermeter(*SWEEP, "--out", whole).returncode == 0
    proc = subprocess.Popen([sys.executable, "-m", "infermeter", *SWEEP, "--out", str(killed)], stderr=subprocess.PIPE)
    csv_path = killed / STEP1_CSV
    kill_when(proc, lambda: csv_path.is_file() and csv_path.read_bytes().count(b"\n") >= 4)  # header + 3 rows
    done_before = len(rows(csv_path))
    assert 3 <= done_before < 12
    p = infermeter(*SWEEP, "--out", killed)
    assert p.returncode == 0, p.stderr
    assert rows(csv_path) == rows(whole / STEP1_CSV)  # the same 12 rows, each once, in the same order


def test_sim_sweep_refuses_to_resume_with_other_settings(tmp_path):
    small = ["sim-sweep", "--requests", "1000", "--gpus", "1", "--bins", "1", "--step", "1", "--out", tmp_path]
    assert infermeter(*small, "--levels", "high").returncode == 0
    p = infermeter(*small, "--levels", "low")
    assert p.returncode == ExitCode.USAGE and "other settings (rate)" in p.stderr, p.stderr


PROBE_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from infermeter.records import RequestRecord, RunInfo, RunWriter
    from infermeter.suites.capacity import search
    from infermeter.metrics.slo import parse_capacity_slo

    def probe(rate, run_dir):
        # a server whose TTFT is 20 ms below 7.3 req/s and 2 s above; records trickle in as in a real run
        ttft = 0.02 if rate <= 7.3 else 2.0
        with RunWriter(run_dir, RunInfo(kind="test"), flush_interval_s=0.0) as writer:
            for i in range(80):
                t = i / rate
                writer.sent(i, t, 10, 2)
                writer.append(RequestRecord(request_id=i, submitted_at=t, output_tokens=2, max_tokens=2,
                                            token_times=[t + ttft, t + ttft + 0.01]))
                time.sleep(0.01)

    res = search(probe, [parse_capacity_slo("ttft:p99<=100ms")], Path(sys.argv[1]), start_rate=1, tolerance=0.02,
                 max_probes=20)
    print(res.capacity_req_s, [p.rate for p in res.probes])
    """
)


def test_capacity_search_resumes_after_a_kill_with_the_same_answer(tmp_path):
    """Killed in the middle of a probe's run: the finished probes are reused, the torn one is measured again."""
    script = tmp_path / "search.py"
    script.write_text(PROBE_SCRIPT)
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    subprocess.run([sys.executable, str(script), str(whole)], check=True, capture_output=True, timeout=120)
    proc = subprocess.Popen([sys.executable, str(script), str(killed)], stdout=subprocess.PIPE)

    def mid_probe() -> bool:  # three probes finished and the fourth writing its records (it takes ~0.8 s)
        saved = killed / "capacity.json"
        probes = orjson.loads(saved.read_bytes())["probes"] if saved.is_file() else []
        journals = [d / JOURNAL for d in killed.glob("probe-rate-*") if not completed(d)]
        return len(probes) >= 3 and any(j.is_file() and j.stat().st_size > 0 for j in journals)

    kill_when(proc, mid_probe)
    torn = [d for d in killed.glob("probe-rate-*") if not completed(d)]
    assert len(torn) == 1 and (torn[0] / JOURNAL).is_file()
    resumed = subprocess.run([sys.executable, str(script), str(killed)], capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    a, b = (orjson.loads((d / "capacity.json").read_bytes()) for d in (whole, killed))
    assert a["capacity_req_s"] == b["capacity_req_s"] and a["bracket"] == b["bracket"]
    assert [p["rate"] for p in a["probes"]] == [p["rate"] for p in b["probes"]]
    assert [p["reused"] for p in b["probes"]][:3] == [True, True, True] and not b["probes"][3]["reused"]


@pytest.mark.parametrize("stopped, reusable", [(None, True), ("interrupted", False), ("the disk is full", False)])
def test_only_a_probe_that_ran_to_its_end_is_reused(tmp_path, stopped, reusable):
    from infermeter.records import RequestRecord

    write_records(tmp_path, RunInfo(kind="test", stopped=stopped), [RequestRecord(request_id=0)])
    assert completed(tmp_path) is reusable


def test_a_suite_killed_mid_run_resumes_with_its_finished_runs_and_the_same_tables(tmp_path):
    """`infermeter test grid` killed while its third run writes records: the restart reuses the two finished runs,
    measures the third again, and a further start reuses all three and prints the same tables."""
    from infermeter.suite_result import SuiteResult

    out = tmp_path / "grid"
    cmd = [sys.executable, "-m", "infermeter", "test", "grid", "--pp", "64", "--tg", "16", "--concurrency", "1,2,4"]
    cmd += ["--repeat", "1", "--warmup", "2", "--out", str(out), "--no-progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    third = out / "runs" / "pp64-tg16-c4-r1"
    children: list[psutil.Process] = []

    def writing_third() -> bool:
        children[:] = psutil.Process(proc.pid).children(recursive=True)
        return (third / JOURNAL).is_file() or (third / "sent.ledger").is_file()

    kill_when(proc, writing_third)
    assert children, "the embedded emulator was not running"
    _, alive = psutil.wait_procs(children, timeout=15)
    assert not alive, "the embedded emulator outlived the killed suite"
    assert not (out / "suite.json").exists() and not completed(third)
    finished = [d.name for d in (out / "runs").iterdir() if completed(d)]
    assert sorted(finished) == ["pp64-tg16-c1-r1", "pp64-tg16-c2-r1"]

    resumed = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming" in resumed.stderr
    first = SuiteResult.model_validate_json((out / "suite.json").read_text())
    assert [(r.key, r.reused) for r in first.runs] == [
        ("pp64-tg16-c1-r1", True),
        ("pp64-tg16-c2-r1", True),
        ("pp64-tg16-c4-r1", False),
    ]
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    second = SuiteResult.model_validate_json((out / "suite.json").read_text())
    assert all(r.reused for r in second.runs)
    assert second.analysis.tables == first.analysis.tables
    assert (
        "4. Detailed Results" in again.stdout
        and again.stdout.split("4. Detailed Results")[1].split("5. Methodology")[0]
        == resumed.stdout.split("4. Detailed Results")[1].split("5. Methodology")[0]
    )
