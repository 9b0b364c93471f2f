"""Request-id ranges.  Prompt words are drawn from streams keyed by request id, so the measured run, its warm-up, the
warm-up probes and prefill profiling each take ids from their own range: none of them can send another's words
(a warm-up cannot cache a measured prompt; it sends the run's shared prefixes only, draft 4.5.1 item 4)."""

from __future__ import annotations

SPAN = 10**9  # ids per range; a run measures fewer requests than this
MEASURED = 0
WARMUP = 1 * SPAN
PROBE = 2 * SPAN
PREFILL = 3 * SPAN
RANGES = {"measured": MEASURED, "warm-up": WARMUP, "warm-up probe": PROBE, "prefill profile": PREFILL}


def request_id(base: int, index: int) -> int:
    """The id of the index-th request of the range starting at `base`."""
    if not 0 <= index < SPAN:
        raise ValueError(f"request index {index} is outside a range of {SPAN:,} ids")
    return base + index
