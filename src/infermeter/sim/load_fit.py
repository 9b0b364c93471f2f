"""What a loaded engine spends beyond its steps, fitted to the probe's closed loops and interference scenes.

Where an API server shares the engine's CPU (vLLM's API server, engine core and worker on one core), a request's
arrival (parsing it, tokenizing its prompt) and its end (its last replies, closing its stream) take time from the
steps running meanwhile.  From outside this shows only under load: a closed loop at saturation that lasts longer than
the engine's steps explain, and a request decoding beside a newcomer that stalls longer than the newcomer's prefill
explains.  The simulator replays each of them; at small costs every figure is linear in each cost, so the costs are a
least-squares fit of their relative errors (costs at least 0; the decode steps' scale, measured in lockstep batches,
free within SCALE_BOUNDS).  The models tried go from no cost to all of them; each replay is held out in turn and
predicted from the others; of the models with as many costs the best held out is weighed, and one of more costs
replaces the one kept where it cuts its held-out error to COST_GAIN of it.  The interference probes repeat one
scene: their median is replayed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from infermeter.engine.calibration import HELD_OUT_MAX, LOAD_FIT, FitQuality, ParameterFit
from infermeter.engine.config import EngineConfig
from infermeter.engine.least_squares import nonnegative_fit
from infermeter.engine.probe_data import ClosedLoop, Interference
from infermeter.sim import probe_replay as replay
from infermeter.sim.simulator import simulate
from infermeter.units import MS_PER_S
from infermeter.workload.build import build_requests

COST_GAIN = 0.9  # a model must cut the held-out error to this share of the simpler one kept to be kept instead
SCALE_BOUNDS = (0.5, 2.0)  # a decode scale outside these is a probe gone wrong, not an engine
DECODE_COSTS = ("fixed", "per_decode_seq", "per_context_token")  # what the decode scale multiplies
# the costs, in the order of a cost vector: (iteration_model field or "decode_scale", unit, in words)
COSTS = (
    ("decode_scale", "", "decode steps as long as under load"),
    ("per_arrival", "s", "per arrival during a step"),
    ("per_arrival_token", "s/token", "per prompt token of an arrival during a step"),
    ("per_request", "s", "per request completed"),
)
SCALE, ARRIVAL, ARRIVAL_TOKEN, REQUEST = range(len(COSTS))
# the models tried: the costs each fits, by name
MODELS: dict[str, tuple[int, ...]] = {
    "no cost beyond the engine's steps": (),
    "a cost per request": (REQUEST,),
    "a cost per prompt token of an arrival": (ARRIVAL_TOKEN,),
    "decode steps as long as under load": (SCALE,),
    "a cost per arrival and per request": (ARRIVAL, REQUEST),
    "a cost per prompt token of an arrival and per request": (ARRIVAL_TOKEN, REQUEST),
    "decode steps as under load, a cost per request": (SCALE, REQUEST),
    "decode steps as under load, a cost per prompt token of an arrival": (SCALE, ARRIVAL_TOKEN),
    "costs per arrival, per its prompt token and per request": (ARRIVAL, ARRIVAL_TOKEN, REQUEST),
    "decode steps as under load, costs per prompt token of an arrival and per request": (
        SCALE, ARRIVAL_TOKEN, REQUEST,
    ),
    "decode steps as under load, costs per arrival, per its prompt token and per request": (
        SCALE, ARRIVAL, ARRIVAL_TOKEN, REQUEST,
    ),
}  # fmt: skip


def applied(engine: EngineConfig, x: np.ndarray) -> EngineConfig:
    """The engine with cost vector `x` (x[SCALE]: the decode scale less 1) added to its own costs."""
    it = engine.iteration_model
    scale = 1.0 + float(x[SCALE])
    model = replace(
        it,
        fixed=it.fixed * scale,
        per_decode_seq=it.per_decode_seq * scale,
        per_context_token=it.per_context_token * scale,
        per_arrival=it.per_arrival + float(x[ARRIVAL]),
        per_arrival_token=it.per_arrival_token + float(x[ARRIVAL_TOKEN]),
        per_request=it.per_request + float(x[REQUEST]),
    )
    return engine.model_copy(update={"iteration_model": model})


def loop_errors(engine: EngineConfig, loop: ClosedLoop) -> np.ndarray:
    """(simulated - measured) / measured duration of a closed loop: from the first sending to the last token."""
    reqs, _ = build_requests(loop.requests, 0, None, loop.prompt_tokens, loop.output_tokens)
    duration = simulate(reqs, engine, concurrency=loop.concurrency).end_time
    return np.asarray([duration / loop.duration_s - 1.0])


def scene_errors(engine: EngineConfig, scene: Interference) -> np.ndarray:
    """(simulated - measured) / measured of the running request's longest gap and the newcomer's TTFT."""
    assert scene.stall_s and scene.newcomer_ttft_s
    stall, ttft = replay.interference(engine, scene)
    return np.asarray([stall / scene.stall_s - 1.0, ttft / scene.newcomer_ttft_s - 1.0])


@dataclass(frozen=True)
class Replays:
    """Every replay's relative errors without the costs, and how each cost moves them."""

    labels: list[str]
    base: list[np.ndarray]  # per replay: its errors
    slopes: list[np.ndarray]  # per replay: (error, cost)

    @classmethod
    def of(cls, engine: EngineConfig, loops: list[ClosedLoop], scenes: list[Interference]) -> Replays:
        items = [(f"closed loop {x.prompt_tokens}+{x.output_tokens} at {x.concurrency}", lambda e, x=x: loop_errors(
            e, x)) for x in loops] + [(f"newcomer of {s.prompt_tokens} tokens beside a decoding request",
                                       lambda e, s=s: scene_errors(e, s)) for s in scenes]  # fmt: skip
        step = float(np.median([x.duration_s / x.requests for x in loops])) if loops else 0.005
        deltas = np.asarray([0.1, step, step / 100, step])  # costs of the order a replay could hide
        labels, base, slopes = [], [], []
        for label, errors in items:
            b = errors(engine)
            columns = []
            for j, delta in enumerate(deltas):
                x = np.zeros(len(COSTS))
                x[j] = delta
                columns.append((errors(applied(engine, x)) - b) / delta)
            labels.append(label)
            base.append(b)
            slopes.append(np.column_stack(columns))
        return cls(labels, base, slopes)

    def fit(self, rows: list[int], free: tuple[int, ...]) -> np.ndarray:
        """The costs in `free` that fit the replays in `rows` best (those other than the scale at least 0)."""
        x = np.zeros(len(COSTS))
        if not free or not rows:
            return x
        order = sorted(free)  # the scale, where free, first: the one coefficient that may go below 0
        design = np.concatenate([self.slopes[i][:, order] for i in rows])
        target = -np.concatenate([self.base[i] for i in rows])
        fit, _ = nonnegative_fit(design, target, free=int(SCALE in free))
        x[order] = fit.coef
        x[SCALE] = float(np.clip(x[SCALE], SCALE_BOUNDS[0] - 1, SCALE_BOUNDS[1] - 1))
        return x

    def errors(self, i: int, x: np.ndarray) -> np.ndarray:
        return self.base[i] + self.slopes[i] @ x

    def held_out(self, free: tuple[int, ...]) -> np.ndarray:
        """Each replay's errors when the costs are fitted to the others."""
        n = len(self.base)
        return np.concatenate([self.errors(i, self.fit([j for j in range(n) if j != i], free)) for i in range(n)])


def _rms(errors: np.ndarray) -> float:
    return float(np.sqrt(np.mean(errors**2)))


def choose(held: dict[str, np.ndarray]) -> str:
    """The model kept: of each number of costs, the one with the lowest held-out error; a model of more costs only
    where it cuts the held-out error of the one kept to COST_GAIN of it."""
    best: dict[int, str] = {}
    for name, errors in held.items():
        k = len(MODELS[name])
        if k not in best or _rms(errors) < _rms(held[best[k]]):
            best[k] = name
    kept = best[min(best)]
    for k in sorted(best)[1:]:
        if _rms(held[best[k]]) < COST_GAIN * _rms(held[kept]):
            kept = best[k]
    return kept


def _describe(name: str, x: np.ndarray, free: tuple[int, ...]) -> str:
    parts = []
    for j in free:
        if j == SCALE:
            parts.append(f"decode steps x{1 + x[SCALE]:.3g}")
        elif j == ARRIVAL_TOKEN:
            parts.append(f"{x[j] * 1e6:.3g} us {COSTS[j][2]}")
        else:
            parts.append(f"{x[j] * MS_PER_S:.3g} ms {COSTS[j][2]}")
    return f"{name}: {', '.join(parts)}" if parts else name


def fit_load(engine: EngineConfig, loops: list[ClosedLoop], scenes: list[Interference]) -> EngineConfig:
    """The engine with the costs its closed loops and interference scenes show (the model that predicts held-out
    replays best), the fit's quality, and each replay's measured and predicted figures in its calibration."""
    cal = engine.calibration
    scene = replay.median_scene(scenes)
    scenes = [scene] if scene is not None else []
    if cal is None or len(loops) + len(scenes) < 2 or engine.latency_model().name != "iteration":
        return engine
    data = Replays.of(engine, loops, scenes)
    n = len(data.base)
    held = {name: data.held_out(free) for name, free in MODELS.items() if n > len(free)}
    kept = choose(held)
    free = MODELS[kept]
    x = data.fit(list(range(n)), free)
    fitted = applied(engine, x)
    after = [loop_errors(fitted, loop) for loop in loops] + [scene_errors(fitted, s) for s in scenes]
    before = np.concatenate(data.base)
    errors = held[kept]
    quality = FitQuality(
        fit=LOAD_FIT,
        model=_describe(kept, x, free),
        points=n,
        r2=1.0 - float(np.sum(np.concatenate(after) ** 2)) / max(float(np.sum(before**2)), 1e-300),
        held_out="each closed loop's duration and each newcomer's scene, from the costs fitted to the others",
        held_out_rms=_rms(errors),
        held_out_low=float(errors.min()),
        held_out_high=float(errors.max()),
        candidates={name: _rms(e) for name, e in held.items()},
    )
    parameters = []
    for p in cal.parameters:
        name = p.parameter.removeprefix("iteration_model.")
        if name in DECODE_COSTS and SCALE in free:
            scale = 1 + float(x[SCALE])
            p = p.model_copy(update={"value": p.value * scale, "fit": f"{p.fit}, x{scale:.3g} ({LOAD_FIT})"})
        parameters.append(p)
    parameters += [
        ParameterFit(parameter=f"iteration_model.{COSTS[j][0]}", value=float(x[j]), unit=COSTS[j][1], fit=LOAD_FIT,
                     points=n, held_out_rms=quality.held_out_rms)
        for j in free if j != SCALE
    ]  # fmt: skip
    notes = list(cal.notes)
    for loop, e in zip(loops, after, strict=False):
        rate = loop.requests / loop.duration_s
        notes.append(f"closed loop at {loop.concurrency} ({loop.prompt_tokens}+{loop.output_tokens} tokens, "
                     f"{loop.requests} requests): measured {rate:.3g} req/s, the engine predicts "
                     f"{rate / (1 + float(e[0])):.3g} ({-float(e[0]) / (1 + float(e[0])):+.1%})")  # fmt: skip
    for scene, e in zip(scenes, after[len(loops) :], strict=True):
        assert scene.stall_s and scene.newcomer_ttft_s
        notes.append(f"a {scene.prompt_tokens}-token newcomer beside a decoding request (medians): it stalled "
                     f"{scene.stall_s * MS_PER_S:.1f} ms (the engine: {float(e[0]):+.1%}), the newcomer's TTFT "
                     f"{scene.newcomer_ttft_s * MS_PER_S:.1f} ms ({float(e[1]):+.1%})")  # fmt: skip
    warnings = list(cal.warnings)
    if quality.held_out_rms is not None and quality.held_out_rms > HELD_OUT_MAX:
        warnings.append(
            f"poor fit: the {LOAD_FIT} model ({kept}) misses replays held out of it by {quality.held_out_rms:.0%} "
            f"(over {HELD_OUT_MAX:.0%}): its capacity, and loads near it, are unreliable"
        )
    calibration = cal.model_copy(
        update={"parameters": parameters, "fits": [*cal.fits, quality], "notes": notes, "warnings": warnings}
    )
    return fitted.model_copy(update={"calibration": calibration})
