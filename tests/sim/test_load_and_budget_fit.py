"""The calibration's fits that replay probes on the simulator: an arrival's cost to a busy engine (closed form), the
costs a loaded engine shows recovered from closed loops and an interference scene that an engine with known costs
produced, and the token budget per step that prompts sent together and a running request's stall show."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from infermeter.engine.calibration import LOAD_FIT, TOGETHER_FIT, Calibration
from infermeter.engine.config import EngineConfig
from infermeter.engine.latency import IterationModel
from infermeter.engine.probe_data import ClosedLoop, Interference, SentTogether
from infermeter.engine.probe_fit import fit_engine
from infermeter.sim import probe_replay, simulate
from infermeter.sim.budget_fit import fit_policy_together
from infermeter.sim.load_fit import fit_load, loop_errors
from infermeter.workload.build import build_requests
from infermeter.workload.spec import Requests
from tests.engine.test_probe_fit import probe

STEPS = IterationModel(fixed=0.005, per_prefill_token=40e-6, per_decode_seq=0.3e-3, per_context_token=0.6e-6,
                       per_prefill_pair=30e-9)  # fmt: skip


def engine(model: IterationModel = STEPS, budget: int = 2048, seqs: int = 8, overhead: float = 0.006) -> EngineConfig:
    return EngineConfig(
        scheduler={"name": "chunked_prefill", "max_num_seqs": seqs, "token_budget": budget},
        iteration_model=model,
        latency="iteration",
        api_overhead=overhead,
        calibration=Calibration(source="test"),
    )


def two(prompts: tuple[int, int], outputs: tuple[int, int], arrivals: tuple[float, float]) -> Requests:
    return Requests(
        request_class=np.asarray(["", ""], dtype=object),
        input_tokens=np.asarray(prompts),
        output_tokens=np.asarray(outputs),
        prefix_id=np.asarray([-1, -1]),
        prefix_tokens=np.zeros(2, dtype=np.int64),
        arrival_s=np.asarray(arrivals),
    )


def test_an_arrival_during_a_step_starts_the_next_step_later() -> None:
    """Closed form: A decodes alone in 10 ms steps; B arrives mid-step.  The next step starts per_arrival +
    per_arrival_token * prompt after the current one ends; an arrival at an idle engine costs nothing."""
    flat = IterationModel(fixed=0.010, per_prefill_token=0.0, per_decode_seq=0.0, per_context_token=0.0,
                          per_arrival=0.002, per_arrival_token=1e-5)  # fmt: skip
    cfg = EngineConfig(scheduler={"name": "chunked_prefill", "max_num_seqs": 4}, iteration_model=flat,
                       latency="iteration")  # fmt: skip
    out = simulate(two((8, 100), (6, 2), (0.0, 0.025)), cfg)
    assert out.emissions is not None
    times = out.emissions.token_times()
    a = times.values[times.offsets[0] : times.offsets[1]]
    # A's steps end at 10, 20, 30 ms; B arrived in the third: the fourth starts 2 + 1 = 3 ms after 30 ms and holds
    # B's prefill (B's first token) with A's next token
    assert np.diff(a) == pytest.approx([0.010, 0.010, 0.013, 0.010, 0.010])
    assert times.values[times.offsets[1]] == pytest.approx(0.043)
    idle = simulate(two((8, 100), (2, 2), (0.0, 0.050)), cfg)  # A is done by 20 ms
    assert idle.ends.first[1] - idle.sent[1] == pytest.approx(0.010)


def test_a_completions_cost_follows_the_prompt_held_and_adds_to_an_arrivals() -> None:
    model = IterationModel(per_request=0.002, per_request_token=1e-5)
    assert model.after_requests(2, 300) == pytest.approx(0.004 + 0.003)
    assert model.arrival_cost(100) == 0.0
    assert replace(model, per_arrival=0.001, per_arrival_token=2e-6).arrival_cost(500) == pytest.approx(0.002)


SHAPES = ((32, 2), (32, 12), (32, 48), (500, 2))  # the probe's closed loops: (prompt, output)


def measured_loops(truth: EngineConfig, requests: int = 160) -> list[ClosedLoop]:
    """The closed loops as an engine with these costs serves them (the probe's shapes at twice its batch)."""
    out = []
    for prompt, output in SHAPES:
        reqs, _ = build_requests(requests, 0, None, prompt, output)
        duration = simulate(reqs, truth, concurrency=16).end_time
        out.append(ClosedLoop(prompt_tokens=prompt, output_tokens=output, concurrency=16, requests=requests,
                              duration_s=duration))  # fmt: skip
    return out


def measured_scene(truth: EngineConfig) -> Interference:
    scene = Interference(offset_s=0.0, step_s=0.006, running_prompt=32, running_output=48, prompt_tokens=400,
                         delay_s=0.04)  # fmt: skip
    stall, ttft = probe_replay.interference(truth, scene)
    return scene.model_copy(update={"stall_s": stall, "newcomer_ttft_s": ttft})


def test_the_costs_of_a_loaded_engine_are_recovered_from_its_loops_and_a_newcomer() -> None:
    """An engine that takes 2 ms after each request and 5 us per prompt token of each arrival during a step: the
    fit of the steps alone to its closed loops and interference scene finds both, and predicts every replay."""
    truth_model = replace(STEPS, per_request=0.002, per_arrival_token=5e-6)
    truth = engine(truth_model)
    fitted = fit_load(engine(), measured_loops(truth), [measured_scene(truth)])
    it = fitted.iteration_model
    assert it.per_request == pytest.approx(0.002, rel=0.1) and it.per_arrival_token == pytest.approx(5e-6, rel=0.1)
    assert it.per_arrival == pytest.approx(0.0, abs=2e-4) and it.fixed == pytest.approx(STEPS.fixed, rel=0.05)
    cal = fitted.calibration
    assert cal is not None
    quality = next(f for f in cal.fits if f.fit == LOAD_FIT)
    assert "per prompt token of an arrival" in quality.model and "per request" in quality.model
    assert quality.held_out_rms is not None and quality.held_out_rms < 0.02
    assert quality.candidates["no cost beyond the engine's steps"] > 0.1  # what the steps alone missed
    for loop in measured_loops(truth):
        assert abs(loop_errors(fitted, loop)[0]) < 0.02
    assert sum("closed loop at 16" in n for n in cal.notes) == len(SHAPES)
    assert {"iteration_model.per_request", "iteration_model.per_arrival_token"} <= {p.parameter for p in
                                                                                 cal.parameters}  # fmt: skip


def test_an_engine_without_such_costs_keeps_none() -> None:
    truth = engine()
    fitted = fit_load(engine(), measured_loops(truth), [measured_scene(truth)])
    it = fitted.iteration_model
    assert (it.per_request, it.per_arrival, it.per_arrival_token) == (0.0, 0.0, 0.0)
    assert fitted.calibration is not None
    assert next(f for f in fitted.calibration.fits if f.fit == LOAD_FIT).model == "no cost beyond the engine's steps"


def test_a_loaded_engine_slower_than_its_lockstep_steps_scales_them() -> None:
    """Decode steps 15% slower under load than the probe's lockstep batches showed: the scale is fitted."""
    truth = engine(replace(STEPS, fixed=STEPS.fixed * 1.15, per_decode_seq=STEPS.per_decode_seq * 1.15,
                           per_context_token=STEPS.per_context_token * 1.15))  # fmt: skip
    fitted = fit_load(engine(), measured_loops(truth), [measured_scene(truth)])
    assert fitted.iteration_model.fixed == pytest.approx(STEPS.fixed * 1.15, rel=0.03)
    for loop in measured_loops(truth):
        assert abs(loop_errors(fitted, loop)[0]) < 0.02


def together(truth: EngineConfig, count: int, prompt: int) -> SentTogether:
    group = SentTogether(prompt_tokens=prompt, ttfts_s=[0.1] * count)
    return group.model_copy(update={"ttfts_s": probe_replay.together_ttfts(truth, group).tolist()})


def test_a_budget_no_isolated_prompt_shows_is_read_from_prompts_sent_together() -> None:
    """vLLM's V1 scheduler takes at most 2048 tokens into a step: isolated prompts of up to 2000 tokens never show
    it, and calibration assumed 8192.  Four 2000-token prompts sent together end a step apart under 2048, together
    under 8192; a running request stalls for a newcomer's whole prefill under either, not a chunk of it."""
    truth = engine()
    data = probe(STEPS, 0.006, None, 8, lengths=(16, 64, 200, 400, 600, 800, 1100, 1500, 2000))
    data.most_sent = 16
    mixed = Interference(offset_s=0.0, step_s=0.006)
    data.interference = [mixed.model_copy(update=measured_scene(truth).model_dump(exclude={"offset_s"}))] * 3
    data.together = [together(truth, 4, 2000), together(truth, 16, 2000)]
    chosen = fit_engine(data)
    assert chosen.scheduler.name == "chunked_prefill" and chosen.scheduler.token_budget == 8192  # type: ignore[attr-defined]
    found = fit_policy_together(data, chosen)
    assert found.scheduler.token_budget == 2048  # type: ignore[attr-defined]
    assert found.calibration is not None
    quality = next(f for f in found.calibration.fits if f.fit == TOGETHER_FIT)
    assert quality.model == "one step per prompt, budget 2048"
    assert quality.candidates["one step per prompt, budget 2048"] < 0.5 * quality.candidates[
        "one step per prompt, budget 8192"]  # fmt: skip
    assert any(n.startswith("prefill: one step per prompt, budget 2048") for n in found.calibration.notes)


def test_what_the_probe_could_not_see_is_said() -> None:
    """A probe without long prompts sent together or closed loops: calibrate says the budget per step and the costs
    outside the steps were not seen, and what it assumed instead."""
    from infermeter.sim.probe_engine import engine_from_probe

    data = probe(STEPS, 0.006, None, 8)
    data.interference = [Interference(offset_s=0.0, step_s=0.006)] * 3  # mixed: chunked_prefill, budget assumed
    cal = engine_from_probe(data).calibration
    assert cal is not None
    assert any(line.startswith("the token budget per step: no probe put more than 4000") for line in cal.unseen)
    assert any(line.startswith("costs outside the engine's steps") for line in cal.unseen)
    assert any("preempts" in line for line in cal.unseen)


def test_the_median_scene_is_replayed() -> None:
    scenes = [
        Interference(offset_s=0.0, step_s=0.006, running_prompt=32, running_output=48, prompt_tokens=400,
                     delay_s=0.04, stall_s=stall, newcomer_ttft_s=ttft)
        for stall, ttft in ((0.026, 0.034), (0.090, 0.120), (0.027, 0.035))
    ]  # fmt: skip
    median = probe_replay.median_scene([*scenes, Interference(offset_s=0.0, step_s=0.006)])
    assert median is not None and (median.stall_s, median.newcomer_ttft_s) == (0.027, 0.035)  # the stalled one left


def test_a_held_out_error_weighs_each_measurement_by_what_it_averages() -> None:
    from infermeter.engine.least_squares import HeldOut

    errors = np.asarray([0.02, -0.02, 0.6])  # the last: a batch size seen for a few gaps
    assert HeldOut("", errors).rms > 0.3
    assert HeldOut("", errors, np.asarray([400.0, 400.0, 16.0])).rms < 0.13
