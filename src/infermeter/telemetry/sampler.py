"""A 1 Hz (configurable) sampler of CPU utilization and memory (psutil), CPU package energy from RAPL where the
host exposes it, and, when an NVIDIA GPU is visible (nvidia-ml-py), GPU utilization, memory, temperature, power."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from infermeter.records import RunClock

RAPL_ROOT = Path("/sys/class/powercap")


@dataclass
class Rapl:
    """CPU package energy counters (intel-rapl:N, name package-N), with their wrap-around handled."""

    root: Path = RAPL_ROOT
    domains: list[tuple[Path, int]] = field(default_factory=list)  # (energy_uj file, max_energy_range_uj)
    reason: str = ""

    def __post_init__(self) -> None:
        if not self.root.is_dir():
            self.reason = f"{self.root} does not exist (no RAPL on this host or in this VM)"
            return
        for d in sorted(self.root.glob("intel-rapl:*")):
            name = (d / "name").read_text().strip() if (d / "name").is_file() else ""
            if name.startswith("package") and (d / "energy_uj").is_file():
                try:
                    (d / "energy_uj").read_text()
                    wrap = int((d / "max_energy_range_uj").read_text()) if (d / "max_energy_range_uj").is_file() else 0
                except (OSError, ValueError) as exc:
                    self.reason = f"RAPL counters unreadable: {exc}"
                    continue
                self.domains.append((d / "energy_uj", wrap))
        if not self.domains and not self.reason:
            self.reason = f"no readable RAPL package domain under {self.root}"

    @property
    def available(self) -> bool:
        return bool(self.domains)

    def read_uj(self) -> list[int]:
        return [int(p.read_text()) for p, _ in self.domains]


class Nvml:
    """NVIDIA GPUs through nvidia-ml-py; unavailable (with the reason) when there is no driver or GPU.  Where every
    GPU has the total-energy counter (nvmlDeviceGetTotalEnergyConsumption, mJ; Volta and later) each reading carries
    it, so energy needs no integration of sampled power."""

    def __init__(self) -> None:
        self.handles: list[Any] = []
        self.reason = ""
        self.energy_counter = False
        self.energy_reason = ""  # why the counter is not used
        self._energy_start: list[int] = []
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nv = pynvml
            self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
            if not self.handles:
                self.reason = "NVML sees no GPU"
        except Exception as exc:  # NVMLError subclasses vary by driver; any failure means no GPU telemetry
            self.reason = f"no NVIDIA GPU telemetry ({type(exc).__name__}: {exc})"
            return
        try:
            self._energy_start = self._energy_mj()
            self.energy_counter = bool(self.handles)
        except (pynvml.NVMLError, AttributeError) as exc:  # NVMLError_NotSupported before Volta; an old pynvml
            self.energy_reason = f"{type(exc).__name__}: {exc}"

    @property
    def available(self) -> bool:
        return bool(self.handles)

    def _energy_mj(self) -> list[int]:
        return [int(self._nv.nvmlDeviceGetTotalEnergyConsumption(h)) for h in self.handles]

    def read(self) -> dict[str, float]:
        nv = self._nv
        util = mem = power = 0.0
        temp = 0.0
        for h in self.handles:
            util += nv.nvmlDeviceGetUtilizationRates(h).gpu
            mem += nv.nvmlDeviceGetMemoryInfo(h).used / 1024**3
            power += nv.nvmlDeviceGetPowerUsage(h) / 1000.0
            temp = max(temp, float(nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)))
        n = len(self.handles)
        row = {"gpu_util_pct": util / n, "gpu_mem_gb": mem, "gpu_power_w": power, "gpu_temp_c": temp}
        if self.energy_counter:
            now = self._energy_mj()
            row["gpu_energy_j"] = sum(b - a for a, b in zip(self._energy_start, now, strict=True)) / 1000.0
        return row

    def energy_method(self, interval: float) -> str:
        """How GPU energy is measured: the counter, or power sampled and integrated (and why)."""
        if self.energy_counter:
            return "NVML total energy counter (nvmlDeviceGetTotalEnergyConsumption, mJ)"
        return (
            f"NVML power sampled every {interval:g} s, integrated by trapezoids (no total energy counter: "
            f"{self.energy_reason})"
        )


class TelemetrySampler:
    """Samples at `interval` seconds on the run clock until stopped; `table()` holds the series."""

    def __init__(self, clock: RunClock, interval: float = 1.0, rapl_root: Path = RAPL_ROOT) -> None:
        import psutil

        self._psutil = psutil
        self.clock = clock
        self.interval = interval
        self.rapl = Rapl(rapl_root)
        self.gpu = Nvml()
        self.rows: list[dict[str, float]] = []
        self._task: asyncio.Task[None] | None = None
        self._wraps = [w for _, w in self.rapl.domains]
        self._last_uj: list[int] | None = None
        self._total_uj = 0.0

    def sample(self) -> None:
        vm = self._psutil.virtual_memory()
        row = {
            "t": self.clock.now(),
            "cpu_util_pct": float(self._psutil.cpu_percent(interval=None)),
            "mem_used_gb": (vm.total - vm.available) / 1024**3,
        }
        if self.rapl.available:
            now = self.rapl.read_uj()
            if self._last_uj is not None:
                for i, (a, b) in enumerate(zip(self._last_uj, now, strict=True)):
                    self._total_uj += b - a if b >= a else b + self._wraps[i] - a  # counter wrapped
            self._last_uj = now
            row["cpu_energy_j"] = self._total_uj / 1e6
        if self.gpu.available:
            row.update(self.gpu.read())
        self.rows.append(row)

    async def start(self) -> None:
        self._psutil.cpu_percent(interval=None)  # primes the utilization counter
        self.sample()
        self._task = asyncio.create_task(self._loop())

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            self.sample()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self.sample()

    def table(self) -> pa.Table:
        keys = sorted({k for r in self.rows for k in r})
        return pa.table({k: pa.array([r.get(k) for r in self.rows], pa.float64()) for k in keys})

    def sources(self) -> dict[str, str]:
        return {
            "cpu": "psutil",
            "cpu_energy": "RAPL package counters" if self.rapl.available else f"unavailable: {self.rapl.reason}",
            "gpu": f"NVML, {len(self.gpu.handles)} GPU(s)" if self.gpu.available else f"unavailable: {self.gpu.reason}",
            **({"gpu_energy": self.gpu.energy_method(self.interval)} if self.gpu.available else {}),
        }
