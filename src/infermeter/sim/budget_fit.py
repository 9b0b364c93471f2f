"""The prefill policy and token budget per step, from what isolated prompts cannot show alone.

Isolated prompts show a budget only where a prompt is longer than it (a chunked prompt's TTFT climbs in stairs), and
attention's P^2 can pass for such stairs.  Two more probes show it: long prompts sent together (a budget under their
sum prefills them steps apart: vLLM's V1 scheduler takes at most max_num_batched_tokens into a step, 2048 on its CPU
build; a larger one in one step), and a request decoding while a newcomer prefills (a prefill in one step stalls it
for the whole prompt, chunks of a small budget a chunk at a time).  The simulator replays each under each candidate
policy (chunks only where the newcomer's prefill was seen sharing a step with the running request's token); the
candidate kept is the one whose error over all of them (with the isolated TTFTs held out) is lowest, where it beats
the isolated prompts' own choice by a clear margin.
"""

from __future__ import annotations

import numpy as np

from infermeter.engine.calibration import PREFILL_FIT, TOGETHER_FIT, FitQuality
from infermeter.engine.config import EngineConfig
from infermeter.engine.probe_data import Interference, ProbeData, SentTogether
from infermeter.engine.probe_fit import fit_engine, policy_budgets
from infermeter.engine.probe_points import mixes_prefill
from infermeter.sim import probe_replay as replay

BUDGETS = (1024, 2048, 4096, 8192, 16384, 32768)  # budgets per step tried above the longest isolated prompt
BUDGET_GAIN = 2 / 3  # another policy must cut the error to this share of the isolated prompts' choice to be kept
BUDGET_FIELDS = {"chunked_prefill": "token_budget", "continuous": "max_batched_tokens"}  # the setting, by scheduler


def budget_of(engine: EngineConfig) -> int:
    return int(getattr(engine.scheduler, BUDGET_FIELDS[engine.scheduler.name]))


def with_budget(engine: EngineConfig, budget: int) -> EngineConfig:
    field = BUDGET_FIELDS[engine.scheduler.name]
    return engine.model_copy(update={"scheduler": engine.scheduler.model_copy(update={field: budget})})


def stall_errors(engine: EngineConfig, scenes: list[Interference]) -> np.ndarray:
    """(simulated - measured) / measured stall of each interference probe that kept its scene."""
    return np.asarray([replay.interference(engine, s)[0] / s.stall_s - 1 for s in scenes if s.stall_s])


def together_error(engine: EngineConfig, groups: list[SentTogether]) -> float:
    """RMS over every group's requests of (simulated - measured) / measured TTFT, in order."""
    errors = [replay.together_ttfts(engine, g) / np.asarray(g.ttfts_s) - 1 for g in groups]
    return float(np.sqrt(np.mean(np.concatenate(errors) ** 2)))


def isolated_error(engine: EngineConfig) -> float:
    """The isolated TTFTs' held-out error (in-sample where nothing was held out)."""
    cal = engine.calibration
    fit = next((f for f in cal.fits if f.fit == PREFILL_FIT), None) if cal is not None else None
    return (fit.held_out_rms or 0.0) if fit is not None else 0.0


def fit_policy_together(probe: ProbeData, chosen: EngineConfig) -> EngineConfig:
    """The engine whose prefill policy and budget explain both the isolated prompts and the groups sent together
    best; `chosen`, the isolated prompts' own choice, unless another cuts the error to BUDGET_GAIN of its error."""
    groups = probe.together
    if chosen.calibration is None or chosen.scheduler.name not in BUDGET_FIELDS or not probe.prefill:
        return chosen
    if not groups and not any(p.stall_s for p in probe.interference):
        return chosen
    longest = max(p.prompt_tokens for p in probe.prefill)
    candidates: list[tuple[str, EngineConfig]] = []
    separate = mixes_prefill(probe.interference) is False  # prefill steps of their own: no chunk mixes a decode
    for budget in policy_budgets(probe):
        if budget is not None and separate and chosen.scheduler.name != "chunked_prefill":
            continue
        engine = fit_engine(probe, policy=budget)
        if budget is not None:
            candidates.append((f"chunks of {budget}", engine))
            continue
        for b in sorted({b for b in BUDGETS if b >= longest} | {budget_of(engine)}):
            candidates.append((f"one step per prompt, budget {b}", with_budget(engine, b)))
    scenes = [p for p in probe.interference if p.stall_s and replay.replayable(p)]
    scores = {}
    for name, engine in candidates:
        errors = [isolated_error(engine)] + ([together_error(engine, groups)] if groups else [])
        if scenes:
            errors.append(float(np.sqrt(np.mean(stall_errors(engine, scenes) ** 2))))
        scores[name] = float(np.sqrt(np.mean(np.square(errors))))
    default = next(name for name, e in candidates if e.scheduler == chosen.scheduler)
    best = min(scores, key=lambda n: scores[n])
    kept = best if scores[best] < BUDGET_GAIN * scores[default] else default
    engine = next(e for name, e in candidates if name == kept)
    cal = engine.calibration
    assert cal is not None
    sizes = ", ".join(f"{len(g.ttfts_s)} x {g.prompt_tokens}" for g in groups)
    quality = FitQuality(
        fit=TOGETHER_FIT,
        model=kept,
        points=sum(len(g.ttfts_s) for g in groups),
        r2=1.0 - (scores[kept] / scores[default]) ** 2 if scores[default] > 0 else 1.0,
        candidates=scores,
    )
    evidence = (
        "isolated prompts"
        + (f", long prompts sent together ({sizes} tokens)" if groups else "")
        + (f" and the stall of a running request while a newcomer prefilled ({len(scenes)} probes)" if scenes else "")
    )
    found = (
        f"prefill: {kept}, from {evidence}: RMS error {scores[kept]:.1%} over them (the isolated prompts' own "
        f"choice, {default}: {scores[default]:.1%})"
    )
    calibration = cal.model_copy(update={"fits": [*cal.fits, quality], "notes": [*cal.notes, found]})
    return engine.model_copy(update={"calibration": calibration})
