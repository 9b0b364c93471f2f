"""Live progress of a run on stderr (rich): sent, in flight, done, failed, TTFT p50; a line per worker when the
load comes from several."""

from __future__ import annotations

import asyncio

from infermeter.load.driver import LiveStats


def describe(s: LiveStats) -> str:
    p50 = s.ttft_p50_ms()
    return (
        f"sent {s.sent}  in flight {s.in_flight}  failed {s.failed}  "
        f"TTFT p50 {'-' if p50 is None else f'{p50:.0f} ms'}"
        + ("  stopping (Ctrl-C again cancels in-flight)" if s.stopping else "")
    )


class LiveDisplay:
    """Rich progress: sent, in flight, done, failed, live TTFT p50; `workers` (address -> its figures and its share
    of the requests, filled as they join) each get a line of their own."""

    def __init__(
        self,
        stats: LiveStats,
        total: int,
        enabled: bool,
        label: str,
        workers: dict[str, tuple[LiveStats, int]] | None = None,
    ) -> None:
        self.stats, self.total, self.enabled, self.label = stats, total, enabled, label
        self.workers = workers if workers is not None else {}
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
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

        cols = (
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[info]}"),
            TimeElapsedColumn(),
        )
        with Progress(*cols, console=Console(stderr=True), transient=True) as bar:
            task = bar.add_task(self.label, total=self.total, info="")
            lines: dict[str, TaskID] = {}
            while True:
                bar.update(task, completed=self.stats.done, info=describe(self.stats))
                for address, (s, share) in list(self.workers.items()):
                    if address not in lines:
                        lines[address] = bar.add_task(f"  {address}", total=share, info="")
                    bar.update(lines[address], completed=s.done, info=describe(s))
                await asyncio.sleep(0.25)
