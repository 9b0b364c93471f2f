"""Monitors beside a run: the server's /metrics scraped, host telemetry with energy, and the server's GPUs through a
DCGM exporter (--dcgm-url), written as Parquet."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from infermeter.metrics import RecordColumns
from infermeter.metrics.summary_model import Energy, ServerMetrics
from infermeter.records import (
    RunClock,
    RunInfo,
    disk_trouble,
    write_run_info,
)
from infermeter.run_info import ServerMetricsSource, Telemetry

if TYPE_CHECKING:
    import ssl

    from infermeter.config.sections import Monitors
    from infermeter.load.target import RunTarget
    from infermeter.telemetry.dcgm import DcgmMonitor

DCGM_INTERVAL = 1.0  # seconds between DCGM scrapes when host telemetry is off (--telemetry-interval 0)


def _tls(url: str, target: RunTarget) -> ssl.SSLContext | None:
    """The run's SSL context (--ca-bundle, --insecure, --client-cert) for an https URL; None for http."""
    return target.client.tls.context() if url.startswith("https:") else None


async def start_monitors(
    monitors: Monitors, target: RunTarget, out: Path, clock: RunClock, info: RunInfo
) -> tuple[Any, Any, DcgmMonitor | None]:
    """Server /metrics scraping, host telemetry and the DCGM exporter for the measured part of the run (not the
    warm-up); an exporter that cannot be read is one warning line on stderr and the run goes on without it."""
    from infermeter.client.server_metrics import MetricsScraper
    from infermeter.telemetry.sampler import TelemetrySampler

    scraper = sampler = None
    if monitors.scrape_interval > 0:
        url = target.metrics_url or target.url
        scraper = MetricsScraper(url, clock, monitors.scrape_interval, _tls(url, target))
        if not await scraper.start():
            info.notes.append(f"no server metrics: {scraper.data.error} (scraping skipped)")
            info.server_metrics = ServerMetricsSource(url=scraper.display, available=False, reason=scraper.data.error)
            scraper = None
        else:
            info.server_metrics = ServerMetricsSource(
                url=scraper.display, available=True, interval_s=monitors.scrape_interval, dialect=scraper.data.dialect
            )
    sources: dict[str, str] = {}
    if monitors.telemetry_interval > 0:
        sampler = TelemetrySampler(clock, monitors.telemetry_interval)
        await sampler.start()
        sources = sampler.sources()
    interval = monitors.telemetry_interval if monitors.telemetry_interval > 0 else DCGM_INTERVAL
    dcgm = await _start_dcgm(monitors.dcgm_url, interval, target, clock, info, sources)
    if sampler is not None or monitors.dcgm_url is not None:
        info.telemetry = Telemetry(interval_s=interval, sources=sources)
    with contextlib.suppress(OSError):  # a failing disk is the writer's to report
        write_run_info(out, info)
    return scraper, sampler, dcgm


async def _start_dcgm(
    url: str | None, interval: float, target: RunTarget, clock: RunClock, info: RunInfo, sources: dict[str, str]
) -> DcgmMonitor | None:
    """The DCGM exporter's monitor at `url`, scraping every `interval` seconds, started; None (a warning, a note and
    the reason in `sources`, the URL's secrets masked) when it cannot be read."""
    from infermeter.telemetry.dcgm import DcgmMonitor

    if url is None:
        return None
    dcgm = DcgmMonitor(url, clock, interval, _tls(url, target))
    if await dcgm.start():
        sources["dcgm"] = dcgm.describe()
        return dcgm
    why = f"--dcgm-url {dcgm.display}: {dcgm.reason}; the run goes on without the server's GPU telemetry"
    print(f"warning: {why}", file=sys.stderr, flush=True)
    info.notes.append(why)
    sources["dcgm"] = f"unavailable: {dcgm.reason}"
    return None


def serving_gpus(monitors: Monitors, emulated: bool) -> int | None:
    """The GPUs the server's throughput is shared by: --gpus as declared, else the embedded emulator's one modelled
    GPU; None for a server that declared none (the GPUs NVML sees here are the load generator's, not the server's)."""
    if monitors.gpus is not None:
        return monitors.gpus
    return 1 if emulated else None


async def stop_monitors(
    monitors: Monitors,
    emulated: bool,
    out: Path,
    scraper: Any,
    sampler: Any,
    cols: RecordColumns,
    info: RunInfo,
    dcgm: DcgmMonitor | None = None,
) -> tuple[ServerMetrics | None, Energy | None]:
    """Stop the monitors, save their series as Parquet in `out`, and summarize them (None where a monitor was off;
    `emulated`: the embedded emulator, whose one modelled GPU serves the tokens)."""
    import pyarrow.parquet as pq

    from infermeter.metrics.throughput import measurement_window
    from infermeter.telemetry.dcgm import server_gpus
    from infermeter.telemetry.energy import energy_block

    def save(table: Any, name: str) -> None:
        try:
            pq.write_table(table, out / name)
        except OSError as exc:
            info.notes.append(f"{name} was not written: {disk_trouble(exc)}")

    scraped = energy = None
    if scraper is not None:
        await scraper.stop()
        save(scraper.data.table(), "server_metrics.parquet")
        scraped = scraper.data.summary()
    start, end = measurement_window(cols)
    tokens = int(cols.output_tokens[cols.ok].sum())
    if sampler is not None:
        await sampler.stop()
        table = sampler.table()
        save(table, "telemetry.parquet")
        samples = {k: table.column(k).to_numpy(zero_copy_only=False) for k in table.column_names}
        energy = energy_block(
            samples,
            start,
            end,
            tokens,
            sampler.sources(),
            monitors.gpu_price,
            serving_gpus(monitors, emulated),
            measured_gpus=len(sampler.gpu.handles) or None,
        )
        util = samples.get("cpu_util_pct")
        if util is not None and len(util):
            energy.cpu_util_pct_mean = float(np.nanmean(util))
    if dcgm is not None:
        await dcgm.stop()
        save(dcgm.data.table(), "dcgm.parquet")
        if energy is None:  # host telemetry off: the block holds the server's GPUs alone
            off = "off (--telemetry-interval 0)"
            energy = energy_block(
                {}, start, end, tokens, {"cpu_energy": off, "gpu": off}, monitors.gpu_price,
                serving_gpus(monitors, emulated),
            )  # fmt: skip
        energy.server_gpus = server_gpus(dcgm.data, dcgm.display, tokens, start, end)
    return scraped, energy
