"""Monitors beside a run: the server's /metrics scraped and host telemetry with energy, written as Parquet."""

from __future__ import annotations

import contextlib
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
    from infermeter.config.sections import Monitors
    from infermeter.load.target import RunTarget


async def start_monitors(
    monitors: Monitors, target: RunTarget, out: Path, clock: RunClock, info: RunInfo
) -> tuple[Any, Any]:
    """Server /metrics scraping and host telemetry for the measured part of the run (not the warm-up)."""
    from infermeter.client.server_metrics import MetricsScraper
    from infermeter.telemetry.sampler import TelemetrySampler

    scraper = sampler = None
    if monitors.scrape_interval > 0:
        scraper = MetricsScraper(target.metrics_url or target.url, clock, monitors.scrape_interval)
        if not await scraper.start():
            info.notes.append(f"no server metrics: {scraper.data.error} (scraping skipped)")
            info.server_metrics = ServerMetricsSource(url=scraper.url, available=False, reason=scraper.data.error)
            scraper = None
        else:
            interval = monitors.scrape_interval
            info.server_metrics = ServerMetricsSource(url=scraper.url, available=True, interval_s=interval)
    if monitors.telemetry_interval > 0:
        sampler = TelemetrySampler(clock, monitors.telemetry_interval)
        await sampler.start()
        info.telemetry = Telemetry(interval_s=monitors.telemetry_interval, sources=sampler.sources())
    with contextlib.suppress(OSError):  # a failing disk is the writer's to report
        write_run_info(out, info)
    return scraper, sampler


def serving_gpus(monitors: Monitors, emulated: bool) -> int | None:
    """The GPUs the server's throughput is shared by: --gpus as declared, else the embedded emulator's one modelled
    GPU; None for a server that declared none (the GPUs NVML sees here are the load generator's, not the server's)."""
    if monitors.gpus is not None:
        return monitors.gpus
    return 1 if emulated else None


async def stop_monitors(
    monitors: Monitors, emulated: bool, out: Path, scraper: Any, sampler: Any, cols: RecordColumns, info: RunInfo
) -> tuple[ServerMetrics | None, Energy | None]:
    """Stop both monitors, save their series as Parquet in `out`, and summarize them (None where a monitor was off;
    `emulated`: the embedded emulator, whose one modelled GPU serves the tokens)."""
    import pyarrow.parquet as pq

    from infermeter.metrics.throughput import measurement_window
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
    if sampler is not None:
        await sampler.stop()
        table = sampler.table()
        save(table, "telemetry.parquet")
        start, end = measurement_window(cols)
        samples = {k: table.column(k).to_numpy(zero_copy_only=False) for k in table.column_names}
        tokens = int(cols.output_tokens[cols.ok].sum())
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
    return scraped, energy
