"""Profile prefill time against prompt length (seeds/001 section 4.1): isolated requests, minimum TTFT per
length, a quadratic fit to use as D_p(P) (+ scheduling slack) in later runs.

Prompts are built to exact length under the tokenizer a run would choose (load/counting.py), and TTFT is fitted
against the count a run's deadlines are evaluated on: the server's usage count under the IETF draft's option A,
the reference count under option B.  The curve file records which.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from infermeter.client.apis import templated
from infermeter.client.backend import open_backend
from infermeter.client.request import ClientConfig, PreparedRequest
from infermeter.load.counting import choose_counting, declared_tokenizer
from infermeter.metrics.prefill_curve import PrefillCurve, fit_quadratic
from infermeter.records import RunClock
from infermeter.workload import ids
from infermeter.workload.prompts import ExactPrompter


async def profile_prefill(
    config: ClientConfig,
    lengths: list[int],
    repeats: int = 3,
    decode_tokens: int = 4,
    on_point: Callable[[int, float | None], None] | None = None,
    backend: str = "openai",
    tokenizer: str | None = None,
    declared: str | None = None,
) -> PrefillCurve:
    """One request at a time (no other load), `repeats` per length, each prompt unique so no prefix cache hits.
    `tokenizer` as a run's --tokenizer: None takes the one the server declares (`declared`, as the embedded
    emulator's settings say, else its /v1/models over HTTP), else the shipped cl100k_base."""
    if declared is None:
        declared = await declared_tokenizer(
            config.base_url if backend == "openai" else None, config.model, config.headers()
        )
    counting = choose_counting(tokenizer, declared)
    prompter = ExactPrompter(counting.tokenizer, chat=templated(config.api), seed=7)
    client = open_backend(backend, config, RunClock())
    xs, ys = [], []
    k = 0
    try:
        for length in lengths:
            best: tuple[float, int] | None = None  # (min TTFT, the prompt's count as the deadlines count it)
            for _ in range(repeats):
                rid = ids.request_id(ids.PREFILL, k)
                k += 1
                req = PreparedRequest(rid, prompter.build(length, rid), length, decode_tokens, ref_input_tokens=length)
                rec = await client.send(req, client.clock.now())
                if rec.status == "ok" and rec.token_times:
                    ttft = rec.token_times[0] - rec.submitted_at
                    count = rec.input_tokens if counting.method == "A" else length
                    best = (ttft, count) if best is None or ttft < best[0] else best
            if on_point:
                on_point(length, best[0] if best else None)
            if best is not None:
                xs.append(best[1])
                ys.append(best[0])
    finally:
        await client.close()
    return fit_quadratic(
        np.asarray(xs),
        np.asarray(ys),
        source=config.base_url,
        counting_method=counting.method,
        tokenizer=counting.tokenizer.name,
    )
