"""The engine's time per request beyond its steps, from the turnarounds of a server serving one request at a time."""

from __future__ import annotations

import numpy as np

from infermeter.engine.decode_fit import DecodeFit
from infermeter.engine.latency import attention_pairs
from infermeter.engine.prefill_fit import PrefillFit, chunks
from infermeter.engine.probe_data import Turnaround

SHORT_TURN = 2.0  # turnarounds whose prompt is within this factor of the shortest carry the per-request cost


def short_turnarounds(points: list[Turnaround]) -> list[Turnaround]:
    """The turnarounds before the shortest prompts: the prefill subtracted from a turnaround is a prediction whose
    error grows with the prompt (a 10% drift of the host's speed is 85 ms of an 850 ms prefill, more than the
    per-request cost sought)."""
    shortest = min((x.prompt_tokens for x in points), default=0)
    return [x for x in points if x.prompt_tokens <= SHORT_TURN * shortest]


def per_request_cost(points: list[Turnaround], decode: DecodeFit, prefill: PrefillFit) -> float | None:
    """Engine time after a request completes: the median turnaround (before the shortest prompts) less the next
    request's prefill steps (the API's overhead overlaps the previous request, so it is not part of a turnaround)."""
    if not points:
        return None
    rest = []
    for x in short_turnarounds(points):
        steps, ctx = chunks(x.prompt_tokens, prefill.budget)
        rest.append(x.seconds - steps * decode.fixed - prefill.per_prefill_token * x.prompt_tokens
                    - prefill.per_prefill_pair * attention_pairs(x.prompt_tokens, 0)
                    - decode.per_context_token * ctx)  # fmt: skip
    return max(float(np.median(rest)), 0.0)
