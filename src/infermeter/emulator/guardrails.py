"""The emulator's output guardrail: a filter that inspects a stream's events one at a time (the IETF draft, 5.10)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass


@dataclass
class OutputFilter:
    """One stream's output filter: each event leaves `delay_s` after the later of its emission and the previous
    event's release, so a filter slower than decoding slows the whole stream (E2E grows, as in the draft's
    Table 13), and a faster one only delays each event.  Release times follow the engine's clock, not the event
    loop's, so a late wake-up does not accumulate."""

    delay_s: float
    released: float = 0.0

    async def hold(self, emitted: float) -> None:
        """Wait until the event emitted at `emitted` (perf_counter seconds) has passed the filter."""
        if not self.delay_s:
            return
        self.released = max(emitted, self.released) + self.delay_s
        if (wait := self.released - time.perf_counter()) > 0:
            await asyncio.sleep(wait)
