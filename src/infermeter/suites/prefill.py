"""Profile prefill time against prompt length (seeds/001 section 4.1): isolated requests, minimum TTFT per
length, a quadratic fit to use as D_p(P) (+ scheduling slack) in later runs."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from infermeter.client.backend import open_backend
from infermeter.client.openai_sse import ClientConfig, PreparedRequest
from infermeter.metrics.prefill_curve import PrefillCurve, fit_quadratic
from infermeter.records import RunClock
from infermeter.workload.prompts import build_prompt

DEFAULT_LENGTHS = (128, 256, 512, 1024, 2048, 4096, 8192)


async def profile_prefill(
    config: ClientConfig,
    lengths: list[int],
    repeats: int = 3,
    decode_tokens: int = 4,
    on_point: Callable[[int, float | None], None] | None = None,
    backend: str = "openai",
) -> PrefillCurve:
    """One request at a time (no other load), `repeats` per length, each prompt unique so no prefix cache hits."""
    client = open_backend(backend, config, RunClock())
    xs, ys = [], []
    rid = 0
    try:
        for length in lengths:
            best: float | None = None
            for _ in range(repeats):
                rid += 1
                rec = await client.send(
                    PreparedRequest(rid, build_prompt(10**8 + rid, length, seed=7), length, decode_tokens),
                    client.clock.now(),
                )
                if rec.status == "ok" and rec.token_times:
                    ttft = rec.token_times[0] - rec.submitted_at
                    best = ttft if best is None else min(best, ttft)
            if on_point:
                on_point(length, best)
            if best is not None:
                xs.append(length)
                ys.append(best)
    finally:
        await client.close()
    return fit_quadratic(np.asarray(xs), np.asarray(ys), source=config.base_url)
