"""The engine configuration a black-box probe implies, every fit in order: the step model (`engine.probe_fit`), the
prefill policy and token budget that isolated prompts, prompts sent together and a running request's stall show
(`budget_fit`), then what a loaded engine spends beyond its steps (`load_fit`)."""

from __future__ import annotations

from infermeter.engine.calibration import LOAD_FIT, TOGETHER_FIT
from infermeter.engine.config import EngineConfig
from infermeter.engine.probe_data import ProbeData
from infermeter.engine.probe_fit import fit_engine
from infermeter.sim.budget_fit import BUDGET_FIELDS, fit_policy_together
from infermeter.sim.load_fit import fit_load


def engine_from_probe(probe: ProbeData) -> EngineConfig:
    """The engine configuration that explains the probe (see the module's docstring), with what it could not see."""
    engine = fit_policy_together(probe, fit_engine(probe))
    engine = fit_load(engine, probe.closed_loops, probe.interference)
    cal = engine.calibration
    assert cal is not None
    return engine.model_copy(update={"calibration": cal.model_copy(update={"unseen": unseen(probe, engine)})})


def unseen(probe: ProbeData, engine: EngineConfig) -> list[str]:
    """What the probe could not see from outside, and what the model assumes instead."""
    cal = engine.calibration
    assert cal is not None
    fits = {f.fit for f in cal.fits}
    out = []
    if engine.scheduler.name in BUDGET_FIELDS and TOGETHER_FIT not in fits:
        budget = getattr(engine.scheduler, BUDGET_FIELDS[engine.scheduler.name])
        longest = max((p.prompt_tokens for p in probe.prefill), default=0)
        if budget > longest:
            out.append(f"the token budget per step: no probe put more than {longest} prompt tokens in a step "
                       f"(no long prompts were sent together); {budget} assumed")  # fmt: skip
    if LOAD_FIT not in fits and probe.largest_batch > 1:
        out.append("costs outside the engine's steps (an API server's work per request and per streamed token): "
                   "no closed loop at saturation was measured; none assumed beyond the steps")  # fmt: skip
    out += [
        "where costs outside the steps are spent (the API server, a detokenizer, the engine's own scheduling) and "
        "whether the engine overlaps that work with its steps (vLLM's async scheduling): one and the same from "
        "outside; the model charges it to the engine's timeline as measured under load",
        "how the server preempts when its KV cache runs out, and its block size: the probe never fills the cache; "
        f"the model recomputes the latest admitted request, in blocks of {engine.block_size} tokens",
        "prefix caching's effect on prefill: "
        + ("measured present, " if "present" in cal.prefix_cache else "")
        + "not modelled (predictions prefill every prompt whole)",
    ]
    return out
