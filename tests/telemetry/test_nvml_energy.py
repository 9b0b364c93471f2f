"""Local GPUs: NVML's total-energy counter where the GPU has it (no sampling error), sampled power otherwise; tested
with a stand-in pynvml whose counter the test moves."""

from __future__ import annotations

import sys
from types import ModuleType, SimpleNamespace

import numpy as np
import pytest

from infermeter.records import RunClock
from infermeter.telemetry.energy import counter_window, energy_block
from infermeter.telemetry.sampler import TelemetrySampler


class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):  # pynvml's own name
    pass


def fake_pynvml(power_mw: list[int], energy_mj: list[int] | None) -> ModuleType:
    """A pynvml with len(power_mw) GPUs; `energy_mj` is each GPU's counter (None: NotSupported), moved by the test."""
    nv = ModuleType("pynvml")

    def energy(h: int) -> int:
        if energy_mj is None:
            raise NVMLError_NotSupported("Not Supported")
        return energy_mj[h]

    nv.NVMLError = NVMLError  # type: ignore[attr-defined]
    nv.NVMLError_NotSupported = NVMLError_NotSupported  # type: ignore[attr-defined]
    nv.NVML_TEMPERATURE_GPU = 0  # type: ignore[attr-defined]
    nv.nvmlInit = lambda: None  # type: ignore[attr-defined]
    nv.nvmlDeviceGetCount = lambda: len(power_mw)  # type: ignore[attr-defined]
    nv.nvmlDeviceGetHandleByIndex = lambda i: i  # type: ignore[attr-defined]
    nv.nvmlDeviceGetUtilizationRates = lambda h: SimpleNamespace(gpu=50)  # type: ignore[attr-defined]
    nv.nvmlDeviceGetMemoryInfo = lambda h: SimpleNamespace(used=2 * 1024**3)  # type: ignore[attr-defined]
    nv.nvmlDeviceGetPowerUsage = lambda h: power_mw[h]  # type: ignore[attr-defined]
    nv.nvmlDeviceGetTemperature = lambda h, sensor: 60  # type: ignore[attr-defined]
    nv.nvmlDeviceGetTotalEnergyConsumption = energy  # type: ignore[attr-defined]
    return nv


class Clock(RunClock):
    """A run clock the test sets."""

    def __init__(self) -> None:
        super().__init__()
        self.t = 0.0

    def now(self) -> float:
        return self.t


def test_the_energy_counter_gives_the_windows_energy(monkeypatch):
    counters = [1_000_000, 5_000_000]
    power = [100_000, 100_000]  # 100 W each: what sampling would integrate, not what the counter says
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(power, counters))
    clock = Clock()
    sampler = TelemetrySampler(clock, interval=1.0)
    assert sampler.gpu.energy_counter and "nvmlDeviceGetTotalEnergyConsumption" in sampler.sources()["gpu_energy"]
    for t, add in ((0.0, 0), (1.0, 300_000), (2.0, 300_000)):  # 300 J per second per GPU
        clock.t = t
        counters[0] += add
        counters[1] += add
        sampler.sample()
    table = sampler.table()
    samples = {k: table.column(k).to_numpy() for k in table.column_names}
    np.testing.assert_allclose(samples["gpu_energy_j"], [0.0, 600.0, 1200.0])
    e = energy_block(samples, 0.0, 2.0, 1200, sampler.sources())
    assert e.gpu_energy_j == pytest.approx(1200.0)  # 2 GPUs x 300 W x 2 s, not the 400 J of the power readings
    assert e.gpu_power_w == pytest.approx(600.0) and e.joules_per_output_token == pytest.approx(1.0)


def test_without_the_counter_power_is_sampled(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml([250_000], None))
    clock = Clock()
    sampler = TelemetrySampler(clock, interval=0.5)
    assert not sampler.gpu.energy_counter
    method = sampler.sources()["gpu_energy"]
    assert method.startswith("NVML power sampled every 0.5 s") and "NVMLError_NotSupported" in method
    for t in (0.0, 1.0, 2.0):
        clock.t = t
        sampler.sample()
    table = sampler.table()
    samples = {k: table.column(k).to_numpy() for k in table.column_names}
    assert "gpu_energy_j" not in samples
    assert energy_block(samples, 0.0, 2.0, 100, sampler.sources()).gpu_energy_j == pytest.approx(500.0)


def test_the_counter_is_read_off_at_the_window_edges():
    t = np.array([0.0, 1.0, 3.0])
    e = np.array([0.0, 100.0, 300.0])
    assert counter_window(t, e, 0.5, 2.0) == pytest.approx(150.0)  # 50 J at 0.5 s, 200 J at 2 s
    assert counter_window(t, e, -1.0, 2.0) is None  # the readings do not cover the window
