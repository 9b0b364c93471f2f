"""Monitors beside a run: the server's /metrics scraped and host telemetry with energy, written as Parquet."""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from infermeter.load.options import RunOptions
from infermeter.metrics import RecordColumns
from infermeter.metrics.summary_model import Energy, ServerMetrics
from infermeter.records import (
    RunClock,
    RunInfo,
    disk_trouble,
    write_run_info,
)
from infermeter.run_info import ServerMetricsSource, Telemetry


async def start_monitors(opts: RunOptions, clock: RunClock, info: RunInfo) -> tuple[Any, Any]:
    """Server /metrics scraping and host telemetry for the measured part of the run (not the warm-up)."""
    from infermeter.client.server_metrics import MetricsScraper
    from infermeter.telemetry.sampler import TelemetrySampler

    scraper = sampler = None
    if opts.scrape_interval > 0:
        scraper = MetricsScraper(opts.metrics_url or opts.url, clock, opts.scrape_interval)
        if not await scraper.start():
            info.notes.append(f"no server metrics: {scraper.data.error} (scraping skipped)")
            info.server_metrics = ServerMetricsSource(url=scraper.url, available=False, reason=scraper.data.error)
            scraper = None
        else:
            info.server_metrics = ServerMetricsSource(url=scraper.url, available=True, interval_s=opts.scrape_interval)
    if opts.telemetry_interval > 0:
        sampler = TelemetrySampler(clock, opts.telemetry_interval)
        await sampler.start()
        info.telemetry = Telemetry(interval_s=opts.telemetry_interval, sources=sampler.sources())
    with contextlib.suppress(OSError):  # a failing disk is the writer's to report
        write_run_info(opts.out, info)
    return scraper, sampler


def serving_gpus(opts: RunOptions) -> int | None:
    """The GPUs the server's throughput is shared by: --gpus as declared, else the embedded emulator's one modelled
    GPU; None for a server that declared none (the GPUs NVML sees here are the load generator's, not the server's)."""
    if opts.gpus is not None:
        return opts.gpus
    return 1 if opts.sut.get("emulated") else None


async def stop_monitors(
    opts: RunOptions, scraper: Any, sampler: Any, cols: RecordColumns, info: RunInfo
) -> tuple[ServerMetrics | None, Energy | None]:
    """Stop both monitors, save their series as Parquet, and summarize them (None where a monitor was off)."""
    import pyarrow.parquet as pq

    from infermeter.metrics.throughput import measurement_window
    from infermeter.telemetry.energy import energy_block

    def save(table: Any, name: str) -> None:
        try:
            pq.write_table(table, opts.out / name)
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
            opts.gpu_price_per_hour,
            serving_gpus(opts),
            measured_gpus=len(sampler.gpu.handles) or None,
        )
        util = samples.get("cpu_util_pct")
        if util is not None and len(util):
            energy.cpu_util_pct_mean = float(np.nanmean(util))
    return scraped, energy
