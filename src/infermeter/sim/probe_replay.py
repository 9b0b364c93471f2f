"""The probe's scenes replayed on an engine model: long prompts sent together to an idle engine, and a newcomer sent
while one request decodes.  What the calibration's later fits (`budget_fit`, `arrival_fit`) hold each candidate
model against."""

from __future__ import annotations

import numpy as np

from infermeter.engine.config import EngineConfig
from infermeter.engine.probe_data import Interference, SentTogether
from infermeter.engine.probe_points import longest_gap
from infermeter.sim.simulator import simulate
from infermeter.workload.build import build_requests
from infermeter.workload.spec import Requests


def together_ttfts(engine: EngineConfig, group: SentTogether) -> np.ndarray:
    """The group's TTFTs, in order, when its prompts reach the idle engine at once."""
    reqs, _ = build_requests(len(group.ttfts_s), 0, None, group.prompt_tokens, 2)
    out = simulate(reqs, engine)
    return np.sort(out.ends.first - out.sent)


def replayable(scene: Interference) -> bool:
    """Whether an interference probe kept its scene (probes of earlier versions did not)."""
    return bool(scene.running_prompt and scene.running_output and scene.prompt_tokens and scene.delay_s is not None)


def interference(engine: EngineConfig, scene: Interference) -> tuple[float, float]:
    """An interference probe on the engine: the running request's longest gap while the newcomer was on its way and
    prefilling, and the newcomer's TTFT."""
    assert scene.running_prompt and scene.running_output and scene.prompt_tokens and scene.delay_s is not None
    reqs = Requests(
        request_class=np.array(["running", "newcomer"], dtype=object),
        input_tokens=np.array([scene.running_prompt, scene.prompt_tokens], dtype=np.int64),
        output_tokens=np.array([scene.running_output, 2], dtype=np.int64),
        prefix_id=np.full(2, -1, dtype=np.int64),
        prefix_tokens=np.zeros(2, dtype=np.int64),
        arrival_s=np.array([0.0, scene.delay_s]),
    )
    out = simulate(reqs, engine)
    assert out.emissions is not None
    times = out.emissions.token_times()
    running = times.values[times.offsets[0] : times.offsets[1]]
    first = float(times.values[times.offsets[1]])
    return longest_gap(running, float(out.sent[1]), first), first - float(out.sent[1])


def median_scene(scenes: list[Interference]) -> Interference | None:
    """The interference probes that kept their scene, as one: each measurement's median (the probes repeat one
    scene, so a host's stall in one of them does not move it); None when none kept it."""
    kept = [s for s in scenes if replayable(s) and s.stall_s and s.newcomer_ttft_s]
    if not kept:
        return None
    fields = ("offset_s", "step_s", "delay_s", "stall_s", "newcomer_ttft_s")
    medians = {f: float(np.median([getattr(s, f) for s in kept])) for f in fields}
    return kept[0].model_copy(update=medians)
