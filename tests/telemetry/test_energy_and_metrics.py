"""Energy by trapezoids, RAPL counters (with wrap-around), cost per token, and /metrics scraping."""

import asyncio

import numpy as np
import pytest

from infermeter.client.server_metrics import MetricsSeries
from infermeter.records import RunClock
from infermeter.telemetry.energy import energy_block, power_from_energy, trapezoid_window
from infermeter.telemetry.sampler import Rapl, TelemetrySampler


def test_trapezoid_over_a_window_with_interpolated_edges():
    t = np.array([0.0, 1.0, 2.0, 3.0])
    p = np.array([100.0, 200.0, 200.0, 100.0])
    # [0.5, 2.5]: 150 at 0.5 -> 200 at 1 (87.5 J), 200 J from 1 to 2, 200 -> 150 at 2.5 (87.5 J)
    assert trapezoid_window(t, p, 0.5, 2.5) == pytest.approx(375.0)
    assert trapezoid_window(t, p, -1.0, 2.0) is None  # the samples do not cover the window


def test_energy_block_joules_per_token_and_cost():
    samples = {
        "t": np.array([0.0, 1.0, 2.0]),
        "gpu_power_w": np.array([300.0, 300.0, 300.0]),
        "cpu_energy_j": np.array([0.0, 50.0, 100.0]),
    }
    e = energy_block(samples, 0.0, 2.0, 1000, {"gpu": "NVML", "cpu_energy": "RAPL"}, gpu_price_per_hour=3.6, gpus=2)
    assert e.gpu_energy_j == pytest.approx(600.0) and e.cpu_energy_j == pytest.approx(100.0)
    assert e.joules_per_output_token == pytest.approx(0.7)
    # 2 GPUs x 2 s = 4 GPU-seconds at $3.6/h = $0.004 for 1000 tokens: $4 per million
    assert e.gpu_seconds == 4.0 and e.cost_per_million_output_tokens == pytest.approx(4.0)
    none = energy_block(
        {"t": np.array([0.0, 1.0])}, 0.0, 1.0, 10, {"cpu_energy": "unavailable: no RAPL", "gpu": "unavailable: no GPU"}
    )
    assert none.energy_j is None and "CPU energy unavailable: no RAPL" in none.notes
    # a source the host lacks, and a cost without a price, leave their keys out of summary.json (not null)
    assert set(none.model_dump(mode="json")) == {"window_s", "sources", "energy_j", "joules_per_output_token", "notes"}


@pytest.mark.parametrize("price", [None, 2.0])
def test_the_gpu_count_alone_gives_tokens_per_gpu_second(price):
    """--gpus 2 halves the per-GPU figure whether or not a price is given (a price once was needed for any of it)."""
    t = {"t": np.array([0.0, 1.0, 2.0, 3.0, 4.0])}
    e = energy_block(t, 0.0, 4.0, 2000, {"gpu": "unavailable: no GPU"}, gpu_price_per_hour=price, gpus=2)
    assert e.gpus == 2 and e.gpu_seconds == 8.0
    assert e.output_tok_per_gpu_s == pytest.approx(2000 / 4.0 / 2)  # half the 500 tok/s throughput
    assert (e.cost is None) == (price is None)
    alone = energy_block(t, 0.0, 4.0, 2000, {"gpu": "unavailable: no GPU"})  # no count given: no per-GPU figure
    assert alone.gpus is None and alone.output_tok_per_gpu_s is None


def test_rapl_counters_with_wraparound(tmp_path):
    d = tmp_path / "intel-rapl:0"
    d.mkdir()
    (d / "name").write_text("package-0\n")
    (d / "max_energy_range_uj").write_text("1000000\n")
    (d / "energy_uj").write_text("900000\n")
    sampler = TelemetrySampler(RunClock(), rapl_root=tmp_path)
    assert sampler.rapl.available and "RAPL" in sampler.sources()["cpu_energy"]
    sampler.sample()
    (d / "energy_uj").write_text("100000\n")  # wrapped: 100,000 uJ to the top, 100,000 past zero
    sampler.sample()
    assert sampler.rows[-1]["cpu_energy_j"] == pytest.approx(0.2)
    assert not Rapl(tmp_path / "nope").available


def test_power_from_cumulative_energy():
    np.testing.assert_allclose(
        power_from_energy(np.array([0.0, 2.0, 3.0]), np.array([0.0, 100.0, 130.0])), [50.0, 50.0, 30.0]
    )


def test_metrics_series_summary_from_vllm_text():
    m = MetricsSeries()
    for t, waiting, hits in ((0.0, 0, 0), (1.0, 4, 30), (2.0, 2, 60)):
        m.add(
            t,
            f"""# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{model_name="m"}} {waiting}
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{model_name="m"}} 8
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{{model_name="m"}} {hits * 2}
# TYPE vllm:prefix_cache_hits counter
vllm:prefix_cache_hits_total{{model_name="m"}} {hits}
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{{le="0.1",model_name="m"}} 3
""",
        )
    s = m.summary()
    assert s.waiting is not None and s.waiting.mean == pytest.approx(2.0) and s.waiting.max == 4
    assert s.running is not None and s.running.p50 == 8 and s.prefix_cache_hit_rate == pytest.approx(0.5)
    assert "kv_usage" not in s.model_dump(mode="json")  # a role the server does not expose is left out
    assert not any(n.endswith("_bucket") for n in m.name)


def test_a_run_against_the_emulator_stores_and_summarizes_metrics(tmp_path):
    from infermeter.emulator import EmulatorConfig, running_emulator
    from infermeter.records import read_run_info
    from tests.load.runs import configured, measured

    with running_emulator(EmulatorConfig(speed=2)) as url:
        cfg = configured(
            url,
            workload={"workload": "code-completion"},
            load={"requests": 60, "rate": 20, "warmup": 0},
            monitors={"scrape_interval": 0.2, "telemetry_interval": 0.2, "gpus": 2},
        )
        summary = asyncio.run(measured(cfg, tmp_path / "r", url)).summary
    assert (tmp_path / "r" / "server_metrics.parquet").is_file() and (tmp_path / "r" / "telemetry.parquet").is_file()
    m = summary.server_metrics
    assert m is not None and m.running is not None and m.kv_usage is not None
    assert m.scrapes >= 5 and m.running.max >= 1 and m.kv_usage.max > 0
    assert m.prefix_cache_hit_rate is not None and 0 < m.prefix_cache_hit_rate < 1  # code-completion shares prefixes
    e = summary.energy
    assert e is not None and e.sources["cpu"] == "psutil"
    assert "cpu_energy_j" in e.model_fields_set or any("CPU energy" in n for n in e.notes)
    assert e.gpus == 2 and e.output_tok_per_gpu_s == pytest.approx(summary.throughput.output_tok_s / 2)  # no price
    source = read_run_info(tmp_path / "r").server_metrics
    assert source is not None and source.available is True


class _FakeSampler:
    """A telemetry sampler that saw four GPUs on the load generator's machine (NVML) and their power."""

    def __init__(self):
        from types import SimpleNamespace

        self.gpu = SimpleNamespace(handles=[0, 1, 2, 3])

    async def stop(self):
        return None

    def table(self):
        import pyarrow as pa

        t = [float(k) for k in range(20)]
        return pa.table({"t": t, "gpu_power_w": [400.0] * len(t)})

    def sources(self):
        return {"gpu": "NVML: 4 GPUs", "cpu": "psutil"}


def _stopped(tmp_path, emulated=False, **given):
    from infermeter.config.sections import Monitors
    from infermeter.load.monitors import stop_monitors
    from infermeter.metrics import RecordColumns
    from infermeter.records import RunInfo
    from tests.evidence import info, stream

    cols = RecordColumns.from_records(stream(50, rate=10.0, output=20), "B")
    run_info: RunInfo = info()
    _, energy = asyncio.run(stop_monitors(Monitors(**given), emulated, tmp_path, None, _FakeSampler(), cols, run_info))
    return energy


def test_tokens_per_gpu_second_come_from_the_declared_gpus_not_the_load_generators(tmp_path):
    """A remote server without --gpus: the 4 GPUs NVML sees here count for energy only (a mutant dividing by them
    gives a per-GPU figure for a server whose GPUs were never counted)."""
    e = _stopped(tmp_path)
    assert e.gpu_energy_j is not None and e.gpu_energy_j > 0  # the NVML GPUs' energy is kept
    assert e.gpus is None and e.output_tok_per_gpu_s is None
    assert any("give --gpus" in n and "4 GPU(s)" in n for n in e.notes)
    declared = _stopped(tmp_path, gpus=2)
    assert declared.gpus == 2 and declared.output_tok_per_gpu_s is not None
    emulated = _stopped(tmp_path, emulated=True)  # the embedded emulator models one GPU
    assert emulated.gpus == 1 and emulated.output_tok_per_gpu_s is not None


def test_a_metrics_url_that_does_not_answer_is_shown_with_its_token_masked(tmp_path):
    """--metrics-url's key-like query parameters stay out of run.json's server_metrics block and its notes."""
    from types import SimpleNamespace

    from infermeter.config.sections import Monitors
    from infermeter.load.monitors import start_monitors
    from tests.evidence import info
    from tests.telemetry.dcgm_exporter import dcgm_exporter

    run_info = info()
    with dcgm_exporter(status=404) as exporter:  # answers 404 on /metrics
        base = exporter.url.removesuffix("/metrics") + "/?token=abcdef123456"
        target = SimpleNamespace(metrics_url=base, url=base)
        monitors = Monitors(scrape_interval=0.5, telemetry_interval=0)
        scraper, _, _ = asyncio.run(start_monitors(monitors, target, tmp_path, RunClock(), run_info))
    source = run_info.server_metrics
    assert scraper is None and source is not None and source.available is False
    assert source.url == exporter.url + "?token=[REDACTED]" and source.reason.startswith("HTTP 404 from ")
    shown = (tmp_path / "run.json").read_text() + "".join(run_info.notes)
    assert "HTTP 404" in shown and "abcdef123456" not in shown
