"""Live progress of a run on stderr (rich): sent, in flight, done, failed, TTFT p50."""

from __future__ import annotations

import asyncio

from infermeter.load.driver import LiveStats


class LiveDisplay:
    """Rich progress: sent, in flight, done, failed, live TTFT p50."""

    def __init__(self, stats: LiveStats, total: int, enabled: bool, label: str) -> None:
        self.stats, self.total, self.enabled, self.label = stats, total, enabled, label
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> LiveDisplay:
        if self.enabled:
            self._task = asyncio.create_task(self._loop())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _loop(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        cols = (
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[info]}"),
            TimeElapsedColumn(),
        )
        with Progress(*cols, console=Console(stderr=True), transient=True) as bar:
            task = bar.add_task(self.label, total=self.total, info="")
            while True:
                s = self.stats
                p50 = s.ttft_p50_ms()
                info = (
                    f"sent {s.sent}  in flight {s.in_flight}  failed {s.failed}  "
                    f"TTFT p50 {'-' if p50 is None else f'{p50:.0f} ms'}"
                    + ("  stopping (Ctrl-C again cancels in-flight)" if s.stopping else "")
                )
                bar.update(task, completed=s.done, info=info)
                await asyncio.sleep(0.25)
