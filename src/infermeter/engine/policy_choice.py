"""The scheduling policy that best explains a probe's isolated TTFTs: one prefill step per prompt, or chunked
prefill under one of CHUNK_BUDGETS, judged by the error on held-out prompt lengths."""

from __future__ import annotations

from infermeter.engine.decode_fit import DecodeFit
from infermeter.engine.prefill_fit import PrefillFit, fit_policy
from infermeter.engine.probe_data import PrefillPoint

CHUNK_BUDGETS = (128, 256, 512, 1024, 2048, 4096)  # chunked-prefill token budgets the policy fit tries
CHUNK_GAIN = 2 / 3  # chunking must cut the held-out error to this share of one prefill step's to be preferred


def choose_policy(points: list[PrefillPoint],
                  decode: DecodeFit) -> tuple[PrefillFit, list[PrefillFit], list[PrefillFit]]:  # fmt: skip
    """Every policy fitted; the chosen one predicts held-out prompt lengths best (relative error; in-sample where
    there are too few to hold one out), and chunking must cut that error to CHUNK_GAIN of one prefill step per
    prompt's (the simpler explanation) to be preferred.  Returns the chosen fit, each policy's kept fit, and every
    model tried."""
    longest = max(x.prompt_tokens for x in points)
    per_policy, tried = [], []
    for budget in [None, *(b for b in CHUNK_BUDGETS if b < longest)]:
        kept, models = fit_policy(points, decode, budget)
        per_policy.append(kept)
        tried += models
    best = min(per_policy, key=lambda f: f.error)
    if best.budget is not None and best.error >= CHUNK_GAIN * per_policy[0].error:
        best = per_policy[0]
    return best, per_policy, tried
