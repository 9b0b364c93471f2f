"""The server's GPUs through a DCGM exporter (--dcgm-url): energy over the measurement window from the total-energy
counter (or power integrated without it), per output token; absent, with a note, where neither moved inside the
window; an exporter that cannot be read is one warning line and the run goes on; its URL's secrets never shown."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import orjson
import pyarrow.parquet as pq
import pytest

from infermeter.config.sections import Monitors
from infermeter.load.monitors import start_monitors, stop_monitors
from infermeter.metrics import RecordColumns
from infermeter.metrics.throughput import measurement_window
from infermeter.records import RunClock
from infermeter.secrets import redact_url
from infermeter.telemetry.dcgm import DcgmMonitor, DcgmSeries, server_gpus
from tests.cli import infermeter
from tests.evidence import info, stream
from tests.telemetry.dcgm_exporter import STEP_MJ, dcgm_exporter, exposition

SECRET_URL = "http://u:pw123456@127.0.0.1:{port}/metrics?token=abcdef123456"


class SetClock(RunClock):
    """A run clock that reads whatever the test set it to."""

    def __init__(self) -> None:
        super().__init__()
        self.t = 0.0

    def now(self) -> float:
        return self.t


def with_secrets(url: str) -> str:
    """The stand-in exporter's URL with a user:password and a token in its query."""
    return SECRET_URL.format(port=url.rsplit(":", 1)[1].split("/")[0])


def assert_no_secret(text: str) -> None:
    assert "pw123456" not in text and "abcdef123456" not in text


def test_energy_is_the_counters_increase_inside_the_measurement_window_summed_over_gpus():
    series = DcgmSeries()
    for k, t in enumerate((0.0, 1.0, 2.5)):
        series.add(t, exposition("h100x2.txt", k))
    s = server_gpus(series, "http://gpu-node:9400/metrics", output_tokens=400, start=0.5, end=1.75)
    # GPU 0's counter reads 0, 50, 100 J at 0, 1, 2.5 s: 25 J at 0.5 s, 75 J at 1.75 s, so +50 J; GPU 1's 0, 30, 60 J:
    # 15 J to 45 J, +30 J (the whole span's +100 J and +60 J included the scrapes outside the window)
    assert s.energy_j == pytest.approx(80.0) and s.joules_per_output_token == pytest.approx(0.2)
    assert s.source == "DCGM exporter http://gpu-node:9400/metrics: total energy counter"
    assert s.window_s == pytest.approx(1.25) and s.power_w == pytest.approx(80.0 / 1.25) and s.scrapes == 3
    g0, g1 = s.gpus
    assert (g0.gpu, g1.gpu) == ("0", "1") and g0.energy_j == pytest.approx(50.0) and g1.energy_j == pytest.approx(30)
    assert g0.model == "NVIDIA H100 80GB HBM3" and g0.uuid is not None and g0.uuid.startswith("GPU-9c5a")
    assert g0.power_w_mean == 350.0 and g0.util_pct_mean == 87 and g1.sm_clock_mhz_mean == 1755
    assert g0.mem_used_mib_max == 74944 and g1.mem_free_mib_min == 5120


def test_power_is_integrated_over_the_window_where_the_exporter_has_no_energy_counter():
    series = DcgmSeries()
    for t, watts in ((0.0, 300.0), (2.0, 400.0), (4.0, 300.0)):
        series.add(t, exposition("h100x2_no_energy.txt", 0, power_w=watts))
    s = server_gpus(series, "http://h:9400/metrics", output_tokens=1500, start=1.0, end=3.0)
    # per GPU: 350 W at 1 s, 400 W at 2 s, 350 W at 3 s: (350 + 400) / 2 + (400 + 350) / 2 = 750 J
    assert s.energy_j == pytest.approx(1500.0) and s.gpus[0].energy_j == pytest.approx(750.0)
    assert s.joules_per_output_token == pytest.approx(1.0) and s.window_s == 2.0
    assert s.source == "DCGM exporter http://h:9400/metrics: power integrated" and s.notes == []


def test_a_counter_that_went_back_falls_back_to_power():
    series = DcgmSeries()
    series.add(0.0, exposition("h100x2.txt", 3, power_w=300.0))
    series.add(2.0, exposition("h100x2.txt", 0, power_w=500.0))  # the exporter's host rebooted
    s = server_gpus(series, "u", output_tokens=0, start=0.0, end=2.0)
    assert s.energy_j == pytest.approx(2 * 800.0) and s.joules_per_output_token is None  # (300 + 500) / 2 W x 2 s
    assert s.source.endswith("power integrated")


def test_a_counter_that_did_not_move_inside_the_window_falls_back_to_power():
    """dcgm-exporter refreshes its fields once per collection interval (30 s by default): a counter that moved only
    after the window says nothing of the window."""
    series = DcgmSeries()
    for t, k, watts in ((0.0, 0, 300.0), (1.0, 0, 500.0), (2.0, 0, 300.0), (3.0, 1, 300.0)):
        series.add(t, exposition("h100x2.txt", k, power_w=watts))
    s = server_gpus(series, "u", output_tokens=100, start=0.5, end=1.5)
    # 400 W at 0.5 s, 500 W at 1 s, 400 W at 1.5 s: 225 + 225 J per GPU
    assert s.energy_j == pytest.approx(2 * 450.0) and s.joules_per_output_token == pytest.approx(9.0)
    assert s.source.endswith("power integrated")


def test_neither_counter_nor_power_moving_inside_the_window_is_absent_with_a_note():
    series = DcgmSeries()
    for t in (0.0, 1.0, 2.0):
        series.add(t, exposition("h100x2.txt", 0))
    s = server_gpus(series, "u", output_tokens=100, start=0.5, end=1.5)
    assert s.energy_j is None and s.joules_per_output_token is None and s.power_w is None
    assert [g.energy_j for g in s.gpus] == [None, None]
    assert len(s.notes) == 1 and "dcgm-exporter -c" in s.notes[0] and "1 s measurement window" in s.notes[0]
    assert s.model_dump(mode="json")["energy_j"] is None  # absent, not 0.0


def test_scrapes_that_do_not_cover_the_window_give_no_energy():
    series = DcgmSeries()
    for k, t in enumerate((1.0, 2.0)):
        series.add(t, exposition("h100x2.txt", k))
    s = server_gpus(series, "u", output_tokens=100, start=0.5, end=1.5)
    assert s.energy_j is None and len(s.notes) == 1 and "do not cover" in s.notes[0]


def test_the_monitor_scrapes_a_live_exporter():
    async def scrape(url: str) -> DcgmMonitor:
        monitor = DcgmMonitor(url, RunClock(), interval=0.05)
        assert await monitor.start()
        await asyncio.sleep(0.2)
        await monitor.stop()
        return monitor

    with dcgm_exporter() as exporter:
        monitor = asyncio.run(scrape(exporter.url))
    times = monitor.data.scrape_times
    assert exporter.served >= 2 and len(times) == exporter.served  # the first scrape and the last, in stop()
    # the middle half of the first two scrapes' span: half of one step, 50 J + 30 J
    quarter = (times[1] - times[0]) / 4
    s = server_gpus(monitor.data, exporter.url, output_tokens=1000, start=times[0] + quarter, end=times[1] - quarter)
    assert s.energy_j == pytest.approx(40.0) and s.joules_per_output_token == pytest.approx(0.04)
    assert monitor.describe().startswith(f"DCGM exporter {exporter.url}: 2 GPU(s)")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("status", "body", "why"),
    [
        (404, None, "HTTP 404 Not Found"),
        (200, (Path(__file__).parent.parent / "fixtures" / "metrics" / "vllm_after.txt").read_text(), "not a DCGM"),
        (200, "<html>hello</html>", "not Prometheus text"),
    ],
)
def test_an_exporter_that_cannot_be_read_is_a_warning_and_a_note(tmp_path, capsys, status, body, why):
    run_info = info()
    with dcgm_exporter(status=status, body=body) as exporter:
        url = with_secrets(exporter.url)  # the options refuse a user:password (below); the monitors mask it anyway
        monitors = Monitors.model_construct(scrape_interval=0, telemetry_interval=0, dcgm_url=url)
        _, _, dcgm = asyncio.run(start_monitors(monitors, SimpleNamespace(), tmp_path, RunClock(), run_info))
    assert dcgm is None
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"warning: --dcgm-url {redact_url(url)}: ") and why in err[0]
    assert err[0].endswith("the run goes on without the server's GPU telemetry")
    assert run_info.telemetry is not None and why in run_info.telemetry.sources["dcgm"]
    assert any(why in n for n in run_info.notes)
    assert_no_secret(err[0] + (tmp_path / "run.json").read_text())


def test_a_refused_connection_is_a_warning(tmp_path, capsys):
    run_info = info()
    url = f"http://127.0.0.1:{_closed_port()}/metrics"
    monitors = Monitors(scrape_interval=0, telemetry_interval=0, dcgm_url=url)
    _, _, dcgm = asyncio.run(start_monitors(monitors, SimpleNamespace(), tmp_path, RunClock(), run_info))
    assert dcgm is None and "ClientConnectorError" in capsys.readouterr().err
    assert run_info.telemetry is not None and run_info.telemetry.sources["dcgm"].startswith("unavailable: Client")


def test_stopping_writes_the_series_and_the_energy_block_over_the_measurement_window(tmp_path):
    """Host telemetry off: the energy block holds the server's GPUs alone, over the records' window (not from the
    first scrape to the last), per output token of the ok requests."""
    # sent from 2.0 s, 10 a second; the last of 20 ends at 3.9 + 0.05 + 19 x 0.01 = 4.14 s; 400 output tokens
    cols = RecordColumns.from_records(stream(20, rate=10.0, output=20, start=2.0), "B")
    run_info = info()
    clock = SetClock()
    with dcgm_exporter() as exporter:
        monitors = Monitors(scrape_interval=0, telemetry_interval=0, dcgm_url=exporter.url)

        async def run() -> tuple[object, object]:
            _, sampler, dcgm = await start_monitors(monitors, SimpleNamespace(), tmp_path, clock, run_info)
            clock.t = 10.0  # the final scrape, in stop(), reads the counters one step on at 10 s
            return await stop_monitors(monitors, False, tmp_path, None, sampler, cols, run_info, dcgm)

        _, energy = asyncio.run(run())
    assert exporter.served == 2 and energy is not None and energy.server_gpus is not None
    # 80 J over 0..10 s, of which the window 2.0..4.14 s holds 2.14 / 10
    assert energy.server_gpus.window_s == pytest.approx(2.14) and energy.server_gpus.energy_j == pytest.approx(17.12)
    assert energy.server_gpus.joules_per_output_token == pytest.approx(17.12 / 400)
    table = pq.read_table(tmp_path / "dcgm.parquet")
    assert set(table.column("gpu").to_pylist()) == {"0", "1"} and table.num_rows > 0
    assert run_info.telemetry is not None and run_info.telemetry.sources["dcgm"].startswith("DCGM exporter")
    assert energy.model_dump(mode="json")["server_gpus"]["source"].endswith("total energy counter")


def test_infermeter_run_reports_the_servers_gpu_energy_per_token(tmp_path):
    """End to end: `infermeter run` against the embedded emulator with --dcgm-url at the stand-in exporter, its URL
    carrying a token that stays out of stderr, run.json and summary.json."""
    out = tmp_path / "r"
    with dcgm_exporter() as exporter:
        url = exporter.url + "?token=abcdef123456"  # the options refuse a user:password, with the key masked
        p = infermeter(
            "run", "--requests", "10", "--rate", "20", "--warmup", "off", "--no-progress", "--dcgm-url", url,
            "--out", out,
        )  # fmt: skip
    assert p.returncode == 0, p.stderr
    summary = orjson.loads((out / "summary.json").read_bytes())
    gpus = summary["energy"]["server_gpus"]
    records = pq.read_table(out / "records.parquet")
    tokens = sum(records.column("output_tokens").to_pylist())
    start, end = measurement_window(RecordColumns.from_table(records, "B"))
    scrapes = pq.read_table(out / "dcgm.parquet").to_pydict()
    energy = 0.0  # each GPU's counter read off at the window's edges, between the scrapes around them
    for gpu in STEP_MJ:
        t, mj = zip(
            *(
                (t, v)
                for t, g, f, v in zip(scrapes["t"], scrapes["gpu"], scrapes["field"], scrapes["value"], strict=True)
                if g == gpu and f == "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
            ),
            strict=True,
        )
        energy += float(np.interp(end, t, mj) - np.interp(start, t, mj)) / 1000
    assert summary["requests"]["ok"] == 10 and exporter.served >= 2
    assert 0 < energy < exporter.energy_j()  # the scrapes outside the window are not counted
    assert gpus["energy_j"] == pytest.approx(energy) and gpus["window_s"] == pytest.approx(end - start)
    assert gpus["joules_per_output_token"] == pytest.approx(energy / tokens)
    assert gpus["source"] == f"DCGM exporter {redact_url(url)}: total energy counter"
    run = orjson.loads((out / "run.json").read_bytes())
    assert run["telemetry"]["sources"]["dcgm"].startswith(f"DCGM exporter {redact_url(url)}: 2 GPU(s)")
    assert_no_secret(p.stdout + p.stderr + (out / "run.json").read_text() + (out / "summary.json").read_text())


def test_infermeter_run_goes_on_when_the_exporter_answers_404(tmp_path):
    out = tmp_path / "r"
    with dcgm_exporter(status=404) as exporter:
        p = infermeter(
            "run", "--requests", "10", "--rate", "20", "--warmup", "off", "--no-progress", "--dcgm-url", exporter.url,
            "--out", out,
        )  # fmt: skip
    assert p.returncode == 0, p.stderr
    warnings = [line for line in p.stderr.splitlines() if line.startswith("warning: --dcgm-url")]
    assert len(warnings) == 1 and "HTTP 404" in warnings[0]
    assert pq.read_table(out / "records.parquet").num_rows == 10
    summary = orjson.loads((out / "summary.json").read_bytes())
    assert summary["requests"]["ok"] == 10 and "server_gpus" not in summary.get("energy", {})
    run = orjson.loads((out / "run.json").read_bytes())
    assert run["telemetry"]["sources"]["dcgm"] == "unavailable: HTTP 404 Not Found"
