"""Does a run know when its own client was the bottleneck (draft 4.2.5)?  The verdict from constructed figures,
then two runs against a server that streams at known times: a client saturated on purpose says so in summary.json,
run.json, its report and its compliance verdict; a client at 50 req/s does not."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
import uvloop

from infermeter.config.run import RunConfig
from infermeter.load import client_health
from infermeter.load.client_health import HealthProbe
from infermeter.records import RunWriter, read_run_info
from infermeter.report.console import full_report, minimum_report
from infermeter.run_info import CLIENT_BOUND, ClientHealth
from infermeter.suites.disclosures import common_requirements
from infermeter.suites.framework import verdict
from tests.cli import report_json
from tests.load.runs import measured

ROOT = Path(__file__).resolve().parents[2]


def probe(cpu: float, ticks_ms: list[float], sends_ms: list[float]) -> ClientHealth:
    p = HealthProbe(cpu_s=cpu, wall_s=1.0)
    p.tick_lag.extend(t / 1e3 for t in ticks_ms)
    p.send_lag.extend(s / 1e3 for s in sends_ms)
    return p.health()


def test_the_verdict_names_each_threshold_crossed():
    quiet = probe(0.3, [0.1, 0.2, 5.0], [0.1] * 99 + [40.0])  # one stall and one late send are not falling behind
    assert not quiet.bound and quiet.reasons == [] and quiet.warning() is None
    assert quiet.cpu_fraction == 0.3 and quiet.tick_lag_ms_p50 == pytest.approx(0.2)
    assert quiet.late_sends == pytest.approx(0.01) and quiet.send_lag_ms_p50 == pytest.approx(0.1)
    busy = probe(0.95, [0.1] * 3, [0.1] * 10)
    assert busy.bound and len(busy.reasons) == 1 and "busy 95%" in busy.reasons[0]
    lagging = probe(0.5, [3.0, 2.5, 0.1], [])
    assert lagging.bound and "ticker ran 2.5 ms late" in lagging.reasons[0] and lagging.late_sends is None
    behind = probe(0.5, [0.1], [0.1] * 90 + [6.0] * 4 + [20.0, 30.0, 40.0, 50.0, 60.0, 70.0])
    assert behind.bound and "10.0% of sends" in behind.reasons[0]
    assert behind.behind_at_end_ms == pytest.approx(25.0)  # the median of the last tenth: 6, 6, 6, 6, 20 .. 70
    assert behind.warning() is not None and behind.warning().startswith(CLIENT_BOUND)  # type: ignore[union-attr]


def test_the_warning_says_who_else_had_the_clients_cpu():
    reasons = ["its 1 ms ticker ran 3.0 ms late at the median (threshold 2)"]
    waited = ClientHealth(bound=True, reasons=reasons, cpu_fraction=0.5, cpu_wait_ms=812.4, steal_ms=0.0)
    assert waited.warning() == f"{CLIENT_BOUND} ({reasons[0]}; its CPU was taken by other tasks for 812 ms)"
    both = waited.model_copy(update={"steal_ms": 30.0})
    assert both.warning().endswith("by other tasks for 812 ms and by the hypervisor for 30 ms)")  # type: ignore[union-attr]
    little = waited.model_copy(update={"cpu_wait_ms": 4.0, "steal_ms": None})  # under one steal tick: not worth it
    assert little.warning() == f"{CLIENT_BOUND} ({reasons[0]})"
    assert waited.model_copy(update={"bound": False, "reasons": []}).warning() is None


STAT = """cpu  2028676 757 150520 3347767 4073 0 35862 1001 0 0
cpu0 1252919 342 51882 1467220 283 0 10179 429 0 0
cpu1 775757 414 98638 1880547 3789 0 25682 571 0 0
cpu12 1 1 1 1 1 1 1 7 0 0
intr 1234 5 6
ctxt 99
"""


def test_steal_is_read_from_the_cpus_own_lines():
    assert client_health.steal_from(STAT, {0}) == 429
    assert client_health.steal_from(STAT, {0, 1}) == 1000  # not the all-CPU line, not cpu12 for cpu1
    assert client_health.steal_from(STAT, {12, 5}) == 7


@pytest.mark.skipif(client_health.runqueue_wait_s() is None, reason="no schedstat (Linux only)")
def test_watched_counts_the_time_another_task_held_the_loops_cpu():
    """The loop's thread spins 0.4 s alone on one CPU, then 0.4 s with a busy process on the same CPU: the fair
    scheduler gives each about half, so the thread waits about half the second spin and hardly in the first (its
    CPU time, the other figure schedstat keeps, would be the other way round)."""
    cpu = max(os.sched_getaffinity(0))  # the suite's busy-loop check pins its loop to CPU 0
    before = os.sched_getaffinity(0)

    async def spin() -> ClientHealth:
        async with client_health.watched() as probe:
            until = time.perf_counter() + 0.4
            while time.perf_counter() < until:
                pass
        return probe.health()

    hog = "import time\nprint(flush=True)\nend = time.time() + 30\nwhile time.time() < end: pass"  # pinned as we are
    os.sched_setaffinity(0, {cpu})
    try:
        alone = uvloop.run(spin())
        proc = subprocess.Popen([sys.executable, "-c", hog], stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None and proc.stdout.readline() == "\n"
            shared = uvloop.run(spin())
        finally:
            proc.kill()
            proc.wait()
    finally:
        os.sched_setaffinity(0, before)
    assert alone.cpu_wait_ms is not None and shared.cpu_wait_ms is not None
    # a task already busy on that CPU makes these 1/2 and 2/3 of the spin: still more waiting with the hog
    assert shared.cpu_wait_ms > 100 and shared.cpu_wait_ms > alone.cpu_wait_ms, (alone, shared)
    assert shared.steal_ms is not None and shared.steal_ms >= 0


@pytest.fixture()
def server(tmp_path):
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'src'}"}
    cmd = [sys.executable, "-m", "tests.timed_server", "--truth", str(tmp_path / "truth.npz"), "--tokens", "4"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("listening on "), line
    yield f"http://127.0.0.1:{int(line.split()[-1])}"
    proc.send_signal(signal.SIGTERM)
    proc.wait(30)


def run(url: str, rate: float, n: int, out: Path):
    cfg = RunConfig.model_validate({
        "target": {"url": url},
        "workload": {"input_tokens": 8, "output_tokens": 4, "tokenizer": "cl100k_base"},
        "load": {"requests": n, "rate": rate, "arrival": "constant", "warmup": 0},
        "monitors": {"scrape_interval": 0, "telemetry_interval": 0},
    }).resolved()  # fmt: skip
    result = uvloop.run(measured(cfg, out, url))
    assert result.stopped is None
    return result


def test_a_client_saturated_on_purpose_says_its_figures_are_upper_bounds(server, tmp_path, monkeypatch):
    """Every record costs the client 6 ms of CPU on its event loop at 400 req/s: it cannot keep up."""
    append = RunWriter.append

    def slow_append(self, rec):  # type: ignore[no-untyped-def]
        until = time.thread_time() + 0.006
        while time.thread_time() < until:
            pass
        append(self, rec)

    monkeypatch.setattr(RunWriter, "append", slow_append)
    result = run(server, 400.0, 300, tmp_path / "run")
    health = result.summary.client_health
    assert health is not None and health.bound, health
    # it falls behind its schedule; how busy its loop looks depends on how much of a core the host gave it
    assert health.late_sends is not None and health.late_sends > client_health.LATE_SHARE, health
    assert any("of sends started more than 5 ms" in r for r in health.reasons), health.reasons
    if client_health.runqueue_wait_s() is not None:  # Linux: who else had its CPU is measured (0 here: no one)
        assert health.cpu_wait_ms is not None and health.steal_ms is not None, health
    saved = orjson.loads((tmp_path / "run" / "summary.json").read_bytes())["client_health"]
    assert saved["bound"] is True
    info = read_run_info(tmp_path / "run")
    assert info.client_health == health
    text = full_report(result.summary, info)
    assert text.startswith(CLIENT_BOUND) and text.count(CLIENT_BOUND) == 1  # the banner, not again in the notes
    assert CLIENT_BOUND in minimum_report(result.summary, info)  # what `infermeter run` ends with
    assert report_json(tmp_path / "run")["client_health"] == saved  # `report` recomputes; the verdict stays
    assert verdict(common_requirements([info], quick=False)) == "not compliant"
    unmet = [r for r in common_requirements([info], quick=False) if not r.met and r.section == "4.2.5"]
    assert len(unmet) == 1 and "client-bound in 1 of 1 runs" in unmet[0].reason


def test_a_client_at_50_requests_per_second_keeps_up(server, tmp_path):
    result = run(server, 50.0, 100, tmp_path / "run")
    health = result.summary.client_health
    assert health is not None and not health.bound, health.reasons
    assert health.cpu_fraction < client_health.CPU_BOUND and health.send_lag_ms_p50 is not None
    info = read_run_info(tmp_path / "run")
    assert CLIENT_BOUND not in full_report(result.summary, info)
    assert all(r.met for r in common_requirements([info], quick=False) if r.section == "4.2.5")
