"""The server's GPUs from a DCGM exporter's /metrics (--dcgm-url), scraped every telemetry interval during the run:
power, total energy, utilization, framebuffer memory and SM clock per GPU, and the energy per output token.

Energy covers the run's measurement window (the tokens' window), as the local NVML path does: the total-energy
counter's increase read off at the window's edges (mJ since boot: no sampling error); where the counter is absent or
did not move inside the window (dcgm-exporter refreshes its fields once per collection interval, 30 s by default),
the power readings are integrated by trapezoids; where power did not move either, the energy is absent with a note.
An exporter that cannot be read is a warning and a note, never a failure; its URL is shown with secrets masked.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Iterable
from dataclasses import dataclass, field

import aiohttp
import numpy as np
import pyarrow as pa
from prometheus_client.parser import text_string_to_metric_families

from infermeter.metrics.summary_model import GpuTelemetry, ServerGpus
from infermeter.records import RunClock
from infermeter.secrets import redact, redact_url
from infermeter.telemetry.energy import counter_window, trapezoid_window

POWER = "DCGM_FI_DEV_POWER_USAGE"  # W
ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"  # mJ since boot
UTIL = "DCGM_FI_DEV_GPU_UTIL"  # %
FB_USED = "DCGM_FI_DEV_FB_USED"  # MiB
FB_FREE = "DCGM_FI_DEV_FB_FREE"  # MiB
SM_CLOCK = "DCGM_FI_DEV_SM_CLOCK"  # MHz
FIELDS = frozenset({POWER, ENERGY, UTIL, FB_USED, FB_FREE, SM_CLOCK, "DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_GPU_TEMP"})
COUNTED = "total energy counter"
INTEGRATED = "power integrated"


@dataclass
class DcgmSeries:
    """Every scrape's DCGM fields per GPU, as long columns (t, gpu, field, value)."""

    t: list[float] = field(default_factory=list)
    gpu: list[str] = field(default_factory=list)
    name: list[str] = field(default_factory=list)
    value: list[float] = field(default_factory=list)
    scrape_times: list[float] = field(default_factory=list)
    identity: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)  # gpu -> (UUID, modelName)

    def add(self, t: float, text: str) -> int:
        """One scrape's text; the number of DCGM samples it held (ValueError: not Prometheus text)."""
        found = 0
        for family in text_string_to_metric_families(text):
            if family.name not in FIELDS:
                continue
            for s in family.samples:  # a counter's samples come named NAME_total from the parser
                if s.name not in (family.name, family.name + "_total") or "gpu" not in s.labels:
                    continue
                gpu = s.labels["gpu"]
                self.identity.setdefault(gpu, (s.labels.get("UUID"), s.labels.get("modelName")))
                self.t.append(t)
                self.gpu.append(gpu)
                self.name.append(family.name)
                self.value.append(float(s.value))
                found += 1
        if found:
            self.scrape_times.append(t)
        return found

    def table(self) -> pa.Table:
        return pa.table(
            {
                "t": pa.array(self.t, pa.float64()),
                "gpu": pa.array(self.gpu, pa.string()),
                "field": pa.array(self.name, pa.string()),
                "value": pa.array(self.value, pa.float64()),
            }
        )

    def values(self, gpu: str, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(times, values) of one GPU's field."""
        mask = (np.asarray(self.gpu, dtype=object) == gpu) & (np.asarray(self.name, dtype=object) == name)
        return np.asarray(self.t)[mask], np.asarray(self.value)[mask]

    def gpus(self) -> list[str]:
        return sorted(self.identity, key=lambda g: (len(g), g))


def _mean(v: np.ndarray) -> float | None:
    return float(v.mean()) if len(v) else None


def _around(t: np.ndarray, v: np.ndarray, start: float, end: float) -> tuple[np.ndarray, np.ndarray]:
    """The readings a window's edges are interpolated between: those inside [start, end] and the nearest on each
    side (every reading when the window is empty)."""
    if end <= start or not len(t):
        return t, v
    first = max(int(np.searchsorted(t, start, side="right")) - 1, 0)
    last = min(int(np.searchsorted(t, end, side="left")), len(t) - 1)
    return t[first : last + 1], v[first : last + 1]


def _moved(v: np.ndarray) -> bool:
    return len(v) >= 2 and float(np.max(v) - np.min(v)) > 0


def gpu_energy_j(series: DcgmSeries, gpu: str, start: float, end: float) -> tuple[float | None, str]:
    """A GPU's joules over the window and how they were read (COUNTED, INTEGRATED; "" for none): the counter where
    it moved inside the window, else power where it did, else None."""
    t, mj = series.values(gpu, ENERGY)
    if len(mj) >= 2 and np.all(np.diff(mj) >= 0):  # a counter that went back (a reset) cannot say
        joules = counter_window(t, mj / 1000.0, start, end)
        if joules is not None and joules > 0:
            return joules, COUNTED
    t, w = series.values(gpu, POWER)
    if _moved(_around(t, w, start, end)[1]):
        joules = trapezoid_window(t, w, start, end)
        if joules is not None:
            return joules, INTEGRATED
    return None, ""


def _why_absent(series: DcgmSeries, gpus: list[str], start: float, end: float) -> str:
    """The note for GPUs whose energy over the window cannot be read."""
    times = series.scrape_times
    if end <= start:
        return "no measurement window (no request succeeded): no server GPU energy"
    if not times or start < times[0] - 1e-9 or end > times[-1] + 1e-9:
        span = f"{times[0]:.3f}-{times[-1]:.3f} s" if times else "none"
        return f"the DCGM scrapes ({span}) do not cover the measurement window ({start:.3f}-{end:.3f} s): no energy"
    named = "GPU " + ", ".join(gpus)
    if not any(len(series.values(g, ENERGY)[1]) or len(series.values(g, POWER)[1]) for g in gpus):
        return f"{named}: the exporter exports neither {ENERGY} nor {POWER}: no energy"
    return (
        f"{named}: neither the total-energy counter nor the power reading changed inside the {end - start:.3g} s "
        "measurement window: dcgm-exporter refreshes its fields once per collection interval (dcgm-exporter -c, "
        "30000 ms by default); give it a shorter interval or measure for longer"
    )


def _gpu_row(series: DcgmSeries, gpu: str, joules: float | None, start: float, end: float) -> GpuTelemetry:
    """One GPU's figures from the readings around the window."""

    def seen(name: str) -> np.ndarray:
        return _around(*series.values(gpu, name), start, end)[1]

    uuid, model = series.identity[gpu]
    used, free = seen(FB_USED), seen(FB_FREE)
    return GpuTelemetry(
        gpu=gpu,
        uuid=uuid,
        model=model,
        energy_j=joules,
        power_w_mean=_mean(seen(POWER)),
        util_pct_mean=_mean(seen(UTIL)),
        mem_used_mib_max=float(used.max()) if len(used) else None,
        mem_free_mib_min=float(free.min()) if len(free) else None,
        sm_clock_mhz_mean=_mean(seen(SM_CLOCK)),
    )


def server_gpus(series: DcgmSeries, url: str, output_tokens: int, start: float, end: float) -> ServerGpus:
    """summary.json's energy.server_gpus block over the measurement window [start, end] (run clock): each GPU's
    figures, their energy together (absent unless every GPU's was read) and per output token.  `url`: as shown."""
    rows: list[GpuTelemetry] = []
    methods: set[str] = set()
    absent: list[str] = []
    total = 0.0
    for gpu in series.gpus():
        joules, method = gpu_energy_j(series, gpu, start, end)
        if joules is None:
            absent.append(gpu)
        else:
            total += joules
            methods.add(method)
        rows.append(_gpu_row(series, gpu, joules, start, end))
    window = max(end - start, 0.0)
    energy = total if rows and not absent else None
    method = " and ".join(m for m in (COUNTED, INTEGRATED) if m in methods) or "no energy"
    return ServerGpus(
        source=f"DCGM exporter {url}: {method}",
        window_s=window,
        scrapes=len(series.scrape_times),
        energy_j=energy,
        power_w=energy / window if energy is not None and window > 0 else None,
        joules_per_output_token=energy / output_tokens if energy is not None and output_tokens else None,
        gpus=rows,
        notes=[_why_absent(series, absent, start, end)] if absent else [],
    )


class DcgmMonitor:
    """Scrapes a DCGM exporter every `interval` seconds during the run (`tls`: the run's SSL context, for https);
    samples are stamped on the run's clock, the records' clock.  `display`: the URL as shown, secrets masked.

    Scrapes are kept as text and parsed when the run ends, so parsing never competes with the send loop."""

    def __init__(self, url: str, clock: RunClock, interval: float = 1.0, tls: ssl.SSLContext | None = None) -> None:
        self.url = url
        self.display = redact_url(url)
        self.clock = clock
        self.interval = interval
        self.tls = tls
        self.data = DcgmSeries()
        self.failures = 0
        self.reason = ""
        self.gpus = 0  # seen at the first scrape
        self._raw: list[tuple[float, str]] = []
        self._task: asyncio.Task[None] | None = None
        self._session: aiohttp.ClientSession | None = None

    async def _scrape(self) -> str | None:
        assert self._session is not None
        try:
            async with self._session.get(self.url, ssl=self.tls if self.tls is not None else True) as r:
                if r.status != 200:
                    self.failures += 1
                    self.reason = f"HTTP {r.status} {r.reason or ''}".strip()
                    return None
                return await r.text()
        except (aiohttp.ClientError, TimeoutError, ssl.SSLError) as exc:
            self.failures += 1
            why = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            self.reason = redact(why.replace(self.url, self.display))  # an error may quote the URL
            return None

    async def start(self) -> bool:
        """The first scrape; False (nothing running, `reason` set) when the URL does not answer DCGM fields."""
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5))
        t = self.clock.now()
        text = await self._scrape()
        if text is not None:
            first = DcgmSeries()
            try:
                if first.add(t, text):
                    self._raw.append((t, text))
                    self.gpus = len(first.identity)
                else:
                    self.reason = "it answers no DCGM_FI_DEV_* field per GPU (not a DCGM exporter)"
            except ValueError as exc:
                self.reason = f"not Prometheus text ({exc})"
        if not self._raw:
            await self._session.close()
            self._session = None
            return False
        self._task = asyncio.create_task(self._loop())
        return True

    async def _keep(self) -> None:
        t = self.clock.now()
        if (text := await self._scrape()) is not None:
            self._raw.append((t, text))

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            await self._keep()

    async def stop(self) -> None:
        """Stop scraping (a last scrape first, for the counter's end) and parse what was kept."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            await self._keep()
        if self._session is not None:
            await self._session.close()
            self._session = None
        self._parse(self._raw)
        self._raw.clear()

    def _parse(self, raw: Iterable[tuple[float, str]]) -> None:
        for t, text in raw:
            try:
                self.data.add(t, text)
            except ValueError:  # one bad answer among good ones
                self.failures += 1

    def describe(self) -> str:
        """run.json's Telemetry source line for the exporter."""
        return f"DCGM exporter {self.display}: {self.gpus} GPU(s), every {self.interval:g} s"
