"""Requests given their images and audio as the driver takes them, the media made ahead on worker threads, as many
requests ahead as a bound in bytes allows: never all up front (a thousand requests with two images each would not fit
in memory), and never on the event loop's thread (a 512x512 PNG takes ~20 ms to encode; Pillow and numpy release the
GIL meanwhile, so the replies being read are not held up).  The measured run's are made before its clock starts
(`filled`), and a request whose media are not made when the driver takes it holds the event loop until they are:
`MediaWaits` counts those waits for run.json."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from infermeter.client.media import MediaItem
from infermeter.client.request import PreparedRequest
from infermeter.workload.media import MediaMaker, MediaTally

AHEAD_BYTES = 256 * 2**20  # media made and not yet taken, as sent (base64): the memory they may hold
AHEAD_MAX = 1024  # requests made ahead at most, however small their media (their prompts are taken ahead too)
AHEAD_FIRST = 16  # requests started before any request's size is known
WORKERS = os.cpu_count() or 1  # one a core: the event loop mostly waits on its sockets
FILL_POLL_S = 0.01  # how often `filled` looks whether the media under way are made


@dataclass
class MediaWaits:
    """The requests whose media were not made yet when the driver took them: how many, and the event loop's wait
    (sends and reads of replies held meanwhile); and how many requests' media were made before the clock started."""

    count: int = 0
    total_s: float = 0.0
    max_s: float = 0.0
    made_ahead: int = 0

    def add(self, waited: float) -> None:
        self.count += 1
        self.total_s += waited
        self.max_s = max(self.max_s, waited)


class MediaAhead:
    """Iterates `prompts`, each with its media from `maker` (`rows[request]`: a dataset row's own images); the first
    AHEAD_FIRST are started when it is made, then as many as AHEAD_BYTES holds of the largest request made so far.
    `tally` notes what each request handed out carried, `waits` each wait for media not yet made.  `close` stops
    making more (what is under way finishes on its own)."""

    def __init__(
        self,
        prompts: Iterable[PreparedRequest],
        maker: MediaMaker,
        id_base: int,
        row_images: Iterable[tuple[str, ...]] | None = None,
        tally: MediaTally | None = None,
        waits: MediaWaits | None = None,
    ) -> None:
        self._prompts = iter(prompts)
        self._maker, self._base, self._tally, self._waits = maker, id_base, tally, waits
        self._row_images = None if row_images is None else list(row_images)
        self._pool: ThreadPoolExecutor | None = ThreadPoolExecutor(WORKERS, thread_name_prefix="infermeter-media")
        self._pending: deque[tuple[PreparedRequest, Future[tuple[MediaItem, ...]]]] = deque()
        self._largest = 0  # the most bytes (base64) one request's media took so far
        self._lock = threading.Lock()
        self._top_up()

    def ahead(self) -> int:
        """How many requests may be made and not yet taken now."""
        if not self._largest:
            return AHEAD_FIRST
        return max(1, min(AHEAD_MAX, AHEAD_BYTES // self._largest))

    def made(self) -> int:
        """Requests whose media are made and not yet taken."""
        return sum(f.done() for _, f in self._pending)

    async def filled(self, stop: asyncio.Event | None = None) -> None:
        """Wait, without holding the event loop, until as many requests are made as the bounds allow (or all are, or
        one failed: its error surfaces when the driver takes it, or `stop` is set)."""
        while stop is None or not stop.is_set():
            self._top_up()
            made = [f for _, f in self._pending if f.done()]
            if len(made) == len(self._pending) or any(f.cancelled() or f.exception() is not None for f in made):
                return
            await asyncio.sleep(FILL_POLL_S)

    def _top_up(self) -> None:
        while len(self._pending) < self.ahead() and self._start_next():
            pass

    def _start_next(self) -> bool:
        req = next(self._prompts, None)
        if req is None or self._pool is None:
            return False
        row = req.request_id - self._base
        own = () if self._row_images is None else self._row_images[row]
        self._pending.append((req, self._pool.submit(self._make, req.request_id, row, own)))
        return True

    def _make(self, request_id: int, row: int, own: tuple[str, ...]) -> tuple[MediaItem, ...]:
        """On a worker thread: one request's media, its size noted for the bound."""
        items = self._maker.items(request_id, row, own)
        size = sum(len(m.data_b64) for m in items)
        with self._lock:
            self._largest = max(self._largest, size)
        return items

    def __iter__(self) -> Iterator[PreparedRequest]:
        return self

    def __next__(self) -> PreparedRequest:
        if not self._pending:
            self.close()
            raise StopIteration
        req, made = self._pending.popleft()
        self._top_up()
        if made.done() or self._waits is None:
            items = made.result()  # a UserError (an unreadable file) surfaces here, in the driver
        else:
            t0 = time.perf_counter()
            items = made.result()
            self._waits.add(time.perf_counter() - t0)
        if self._tally is not None:
            self._tally.add(req.request_id, items)
        return dataclasses.replace(req, media=items)

    def close(self) -> None:
        """Make nothing more; media not yet started are dropped."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        self._pending.clear()
