"""Black-box calibration's arithmetic: decode steps read from token times, the running batch seen, prefill chunks,
and the engine fitted back from measurements a known model produced."""

import numpy as np
import pytest

from infermeter.engine.latency import IterationModel, attention_pairs
from infermeter.engine.prefill_fit import chunks
from infermeter.engine.probe_data import DecodePoint, Interference, PrefillPoint, ProbeData
from infermeter.engine.probe_fit import fit_engine
from infermeter.engine.probe_points import decode_points, interference, mixes_prefill, streaming_peak, trimmed_mean

TRUE = IterationModel(fixed=0.010, per_prefill_token=80e-6, per_decode_seq=0.2e-3, per_context_token=0.2e-6)


def test_decode_points_group_gaps_by_the_batch_streaming():
    # two requests decode together in 10 ms steps (both tokens at each step's end), then B goes on alone in 8 ms
    a = np.arange(6) * 0.010 + 0.100
    b = np.concatenate([a, a[-1] + np.arange(1, 7) * 0.008])
    points = {p.batch: p for p in decode_points([a, b], [100, 300], min_gaps=4)}
    assert set(points) == {1, 2}
    assert points[2].step_s == pytest.approx(0.010) and points[2].gaps == 10
    assert points[1].step_s == pytest.approx(0.008) and points[1].gaps == 6
    # at the first gap's midpoint each has 1 token: 101 + 301; the batch-2 points average the 5 gaps' contexts
    assert points[2].context_tokens == pytest.approx(np.mean([2 * k + 402 for k in range(5)]))
    # by default a batch size held for fewer than 16 gaps (here 10 and 6) says too little: each step may hold a
    # request's arrival or last reply
    assert decode_points([a, b], [100, 300]) == []


def test_a_gap_holding_another_requests_prefill_is_left_out():
    a = np.arange(10) * 0.010
    late = np.asarray([0.0545, 0.0645, 0.0745, 0.0845])  # arrived mid-stream: its first token ends a prefill step
    a_stalled = a.copy()
    a_stalled[5:] += 0.030  # A's gap 4 -> 5 held that prefill
    points = decode_points([a_stalled, late], [10, 10], min_gaps=4)
    assert points and all(p.step_s < 0.02 for p in points), points


def test_streaming_peak_counts_requests_between_first_and_last_token():
    one_at_a_time = [np.asarray([0.0, 0.1]), np.asarray([0.2, 0.3]), np.asarray([0.4, 0.5])]
    together = [np.asarray([0.0, 0.5]), np.asarray([0.1, 0.4]), np.asarray([0.2, 0.6])]
    assert streaming_peak(one_at_a_time) == 1
    assert streaming_peak(together) == 3


def test_chunks_count_steps_and_the_context_each_step_attends():
    assert chunks(300, None) == (1, 300)
    assert chunks(300, 512) == (1, 300)
    assert chunks(1100, 512) == (3, 512 + 1024 + 1100)


def test_trimmed_mean_ignores_a_stall_and_keeps_a_timers_rounding():
    gaps = np.asarray([0.006, 0.007] * 10 + [0.5])  # a timer rounding to 1 ms, and one host stall
    assert trimmed_mean(gaps) == pytest.approx(0.0065, abs=2e-4)


LENGTHS = (16, 64, 200, 400, 600, 800, 1100, 1500, 2000, 3000, 4000)  # the full probe's isolated prompts


def isolated_ttft(model: IterationModel, overhead: float, budget: int | None, p: int) -> float:
    steps, ctx = chunks(p, budget)
    pairs = model.per_prefill_pair * attention_pairs(p, 0)
    return overhead + steps * model.fixed + model.per_prefill_token * p + pairs + model.per_context_token * ctx


def probe(model: IterationModel, overhead: float, budget: int | None, batch_limit: int,
          lengths: tuple[int, ...] = LENGTHS) -> ProbeData:  # fmt: skip
    """What an exact probe of an engine with this model would measure."""
    prefill = [PrefillPoint(prompt_tokens=p, ttft_s=isolated_ttft(model, overhead, budget, p)) for p in lengths]
    decode = [
        DecodePoint(batch=b, context_tokens=c, step_s=model.step_time(0, b, int(c)), gaps=40)
        for b, c in [(1, 50), (2, 100), (4, 200), (8, 400), (16, 800), (1, 2100), (4, 8400), (16, 33600)]
        if b <= batch_limit
    ]
    return ProbeData(source="test", prefill=prefill, decode=decode, largest_batch=min(batch_limit, 16), most_sent=16)


def test_fit_engine_recovers_the_model_that_made_the_measurements():
    engine = fit_engine(probe(TRUE, 0.0015, None, 64))
    m = engine.iteration_model
    for name in ("fixed", "per_prefill_token", "per_decode_seq", "per_context_token"):
        assert getattr(m, name) == pytest.approx(getattr(TRUE, name), rel=1e-6), name
    assert engine.api_overhead == pytest.approx(0.0015, rel=1e-6)
    assert engine.scheduler.name == "continuous" and engine.scheduler.max_num_seqs == 256  # never filled
    cal = engine.calibration
    assert cal is not None and not cal.batch_limited and cal.policy == "continuous"
    assert {p.parameter for p in cal.parameters} >= {"iteration_model.fixed", "api_overhead"}
    # a linear prefill keeps the linear model: the P^2 term was tried and fitted to nothing
    assert m.per_prefill_pair == 0
    prefill = next(f for f in cal.fits if f.fit == "isolated TTFT")
    assert prefill.model == "continuous, linear" and "continuous, attention P^2" in prefill.candidates


def test_prefill_growing_as_the_prompt_squared_is_fitted_with_attentions_pairs():
    """A CPU's (or a small model's) prefill: attention's P^2 is 30% of a 4000-token prompt's TTFT."""
    truth = IterationModel(fixed=0.010, per_prefill_token=80e-6, per_decode_seq=0.2e-3, per_context_token=0.2e-6,
                           per_prefill_pair=2e-8)  # fmt: skip
    engine = fit_engine(probe(truth, 0.0015, None, 64))
    m = engine.iteration_model
    assert m.per_prefill_pair == pytest.approx(2e-8, rel=1e-6)
    assert m.per_prefill_token == pytest.approx(80e-6, rel=1e-6)
    assert engine.api_overhead == pytest.approx(0.0015, rel=1e-6)
    prefill = next(f for f in engine.calibration.fits if f.fit == "isolated TTFT")
    assert prefill.model == "continuous, attention P^2" and prefill.held_out_rms == pytest.approx(0.0, abs=1e-9)
    assert prefill.candidates["continuous, linear"] > 0.05  # what the P^2 term had to beat
    row = next(p for p in engine.calibration.parameters if p.parameter == "iteration_model.per_prefill_pair")
    assert row.unit == "s/pair" and row.value == m.per_prefill_pair
    # four lengths are too few to tell P^2 from noise: the linear model, its overhead never below 0
    few = fit_engine(probe(truth, 0.0015, None, 64, lengths=(64, 300, 600, 1000)))
    assert few.iteration_model.per_prefill_pair == 0 and few.api_overhead >= 0


def test_the_shortest_prompts_are_predicted_when_the_longest_ran_slow():
    """Isolated TTFTs with the longest prompts 12% slow (a host's stall, a warm cache elsewhere): the prefill fit
    weighs each length by its relative error, and its overhead is never below 0, so the 16- and 64-token prompts a
    workload sends are predicted within a few percent.  Fitted in seconds with a free overhead (clamped to 0 after),
    it predicted a 64-token prompt of llama-server 19% slow."""
    data = probe(TRUE, 0.002, None, 64, lengths=(16, 64, 200, 400, 600, 800))
    slow = [p.model_copy(update={"ttft_s": p.ttft_s * (1.12 if p.prompt_tokens >= 600 else 1.0)}) for p in data.prefill]
    engine = fit_engine(data.model_copy(update={"prefill": slow}))
    m = engine.iteration_model
    for p in (16, 64):
        predicted = engine.api_overhead + isolated_ttft(m, 0.0, None, p)
        assert predicted == pytest.approx(isolated_ttft(TRUE, 0.002, None, p), rel=0.04), p


def test_fit_engine_finds_chunked_prefill_by_its_staircase():
    engine = fit_engine(probe(TRUE, 0.001, 512, 64))
    assert engine.scheduler.name == "chunked_prefill" and engine.scheduler.token_budget == 512
    assert engine.iteration_model.per_prefill_token == pytest.approx(TRUE.per_prefill_token, rel=1e-6)
    rms = {f.policy: f.residual_rms_ms for f in engine.calibration.policies}
    assert rms["chunked_prefill (budget 512)"] < 1e-6 < rms["continuous"]


def test_fit_engine_serving_one_at_a_time():
    engine = fit_engine(probe(TRUE, 0.001, None, 1))
    assert engine.scheduler.max_num_seqs == 1
    assert engine.calibration.policy.startswith("one at a time")
    # one sequence at a time: the per-sequence cost cannot be told from the fixed one, and is folded into it
    assert engine.iteration_model.per_decode_seq == 0
    assert engine.iteration_model.fixed == pytest.approx(TRUE.fixed + TRUE.per_decode_seq, rel=1e-6)


def test_turnarounds_and_the_per_request_cost_of_a_one_at_a_time_server():
    from infermeter.engine.probe_data import Turnaround
    from infermeter.engine.probe_points import turnarounds

    a, b = np.asarray([0.0, 0.1, 0.2]), np.asarray([0.45, 0.5])
    (turn,) = turnarounds([b, a], [10, 20])  # b (10 tokens) came after a: its prefill is in the turnaround
    assert turn.prompt_tokens == 10 and turn.seconds == pytest.approx(0.25)
    data = probe(TRUE, 0.001, None, 1)
    # the engine works 30 ms after each request before the next one's prefill step
    data.turnarounds = [
        Turnaround(
            prompt_tokens=32, seconds=0.030 + TRUE.fixed + (TRUE.per_prefill_token + TRUE.per_context_token) * 32
        )
    ] * 3
    engine = fit_engine(data)
    # one at a time, the per-sequence cost is folded into `fixed`, so the prefill step it subtracts is that much longer
    assert engine.iteration_model.per_request == pytest.approx(0.030 - TRUE.per_decode_seq, rel=1e-6)
    assert engine.api_overhead == pytest.approx(0.001 - TRUE.per_decode_seq, rel=1e-6)  # the same fold


def test_per_request_cost_is_read_after_the_shortest_prompts():
    """A turnaround before a long prompt carries that prompt's whole predicted prefill, and a host whose speed drifted
    by 10% moves it by 10% of that prefill: only those before the shortest prompts (up to twice its length) count."""
    from infermeter.engine.probe_data import Turnaround

    data = probe(TRUE, 0.001, None, 1)

    def turn(tokens: int, cost: float, slower: float = 1.0) -> Turnaround:
        prefill = (TRUE.fixed + TRUE.per_decode_seq + TRUE.per_prefill_token * tokens) * slower
        return Turnaround(prompt_tokens=tokens, seconds=cost + prefill + TRUE.per_context_token * tokens)

    # short ones: 20 ms after each request; three before 1,000-token prompts served 10% slower than calibrated
    data.turnarounds = [turn(32, 0.020), turn(40, 0.020), turn(60, 0.020)] + [turn(1000, 0.020, 1.1)] * 3
    engine = fit_engine(data)
    assert engine.iteration_model.per_request == pytest.approx(0.020, rel=1e-6)
    (param,) = [p for p in engine.calibration.parameters if p.parameter == "iteration_model.per_request"]
    assert param.points == 3
    # every turnaround counted, the median would land on the slow long ones
    data.turnarounds = [turn(32, 0.020)] + [turn(1000, 0.020, 1.1)] * 3
    assert fit_engine(data).iteration_model.per_request == pytest.approx(0.020, rel=1e-6)


def test_per_request_cost_delays_the_next_request_served_one_at_a_time():
    """Closed form: two requests at t=0, one at a time; the second's prefill starts per_request after the first ends."""
    from infermeter.engine.config import EngineConfig
    from infermeter.sim import simulate
    from infermeter.workload.spec import Requests

    model = IterationModel(
        fixed=0.01, per_prefill_token=0.0, per_decode_seq=0.0, per_context_token=0.0, per_request=0.05
    )
    cfg = EngineConfig(scheduler={"name": "continuous", "max_num_seqs": 1}, iteration_model=model, latency="iteration")
    reqs = Requests(
        request_class=np.asarray(["", ""], dtype=object),
        input_tokens=np.asarray([8, 8]),
        output_tokens=np.asarray([3, 3]),
        prefix_id=np.asarray([-1, -1]),
        prefix_tokens=np.zeros(2, dtype=np.int64),
        arrival_s=np.zeros(2),
    )
    out = simulate(reqs, cfg)
    first, last = out.emissions.first_token(), out.emissions.last_token()
    assert last[0] == pytest.approx(0.03)  # prefill step + 2 decode steps of 10 ms
    assert first[1] == pytest.approx(0.03 + 0.05 + 0.01)


# ----- models chosen by held-out error, fit quality and prediction intervals

SUBLINEAR = IterationModel(
    fixed=0.004, per_prefill_token=50e-6, per_decode_seq=1.5e-3, per_context_token=0.1e-6, batch_exponent=0.6
)


def test_a_decode_cost_growing_sublinearly_with_the_batch_is_fitted_with_its_exponent():
    """b ** 0.6: the linear model misses held-out batch sizes, the exponent found by least squares does not."""
    engine = fit_engine(probe(SUBLINEAR, 0.001, None, 64))
    m = engine.iteration_model
    assert m.batch_exponent == pytest.approx(0.6, abs=1e-9)
    for name in ("fixed", "per_decode_seq", "per_context_token", "per_prefill_token"):
        assert getattr(m, name) == pytest.approx(getattr(SUBLINEAR, name), rel=1e-6), name
    decode = next(f for f in engine.calibration.fits if f.fit == "decode steps")
    assert decode.model == "batch ** 0.6" and decode.held_out_rms == pytest.approx(0.0, abs=1e-9)
    assert decode.candidates["linear in the batch"] > 0.03  # what the exponent had to beat
    assert engine.calibration.warnings == []
    assert "iteration_model.batch_exponent" in {p.parameter for p in engine.calibration.parameters}


def test_linear_decode_costs_keep_the_linear_model():
    engine = fit_engine(probe(TRUE, 0.001, None, 64))
    assert engine.iteration_model.batch_exponent == 1.0
    decode = next(f for f in engine.calibration.fits if f.fit == "decode steps")
    assert decode.model == "linear in the batch" and decode.held_out_rms == pytest.approx(0.0, abs=1e-9)


def noisy(data: ProbeData, spread: float) -> ProbeData:
    """The probe with every decode step off by up to +-spread (alternating signs, so no exponent absorbs it)."""
    steps = [p.model_copy(update={"step_s": p.step_s * (1 + spread * (-1) ** k)}) for k, p in enumerate(data.decode)]
    return data.model_copy(update={"decode": steps})


def test_a_poor_fit_is_a_warning_with_its_held_out_error():
    engine = fit_engine(noisy(probe(TRUE, 0.001, None, 64), 0.3))
    cal = engine.calibration
    decode = next(f for f in cal.fits if f.fit == "decode steps")
    assert decode.held_out_rms > 0.15
    assert any(w.startswith("poor fit: the decode steps model") and f"{decode.held_out_rms:.0%}" in w
               for w in cal.warnings), cal.warnings  # fmt: skip
    # the band is the held-out errors' range, both signs here
    assert cal.band("decode steps") == (decode.held_out_low, decode.held_out_high)
    assert decode.held_out_low < 0 < decode.held_out_high


def test_one_batch_size_leaves_the_growth_with_the_batch_not_verifiable():
    cal = fit_engine(probe(TRUE, 0.001, None, 1)).calibration
    assert any(w.startswith("not verifiable: decode steps were measured at batch size 1 only") for w in cal.warnings)


def test_prediction_bounds_scale_each_cost_by_its_fits_held_out_band():
    from infermeter.sim.predict import bound_engines

    engine = fit_engine(noisy(probe(TRUE, 0.001, None, 64), 0.3))
    low, high = bound_engines(engine)
    d_lo, d_hi = engine.calibration.band("decode steps")
    p_lo, p_hi = engine.calibration.band("isolated TTFT")
    m = engine.iteration_model
    assert low.iteration_model.fixed == pytest.approx(m.fixed / (1 + d_hi))
    assert high.iteration_model.fixed == pytest.approx(m.fixed / (1 + d_lo))
    assert high.iteration_model.per_decode_seq == pytest.approx(m.per_decode_seq / (1 + d_lo))
    assert low.iteration_model.per_prefill_token == pytest.approx(m.per_prefill_token / (1 + p_hi))
    assert high.api_overhead == pytest.approx(engine.api_overhead / (1 + p_lo))
    assert bound_engines(engine.model_copy(update={"calibration": None})) is None


def test_a_gap_overlapping_another_requests_prefill_is_left_out_when_sending_times_are_known():
    """Request 1 streams 10 ms steps; request 0, sent at 0, queued behind nothing, prefills from 0 to its first token
    at 0.100: request 1's gaps before 0.100 mixed its prompt in (the 50 ms gap) and are left out, not only the one
    holding that first token."""
    first = np.array([0.0, 0.010, 0.020, 0.030, 0.080, 0.110, 0.120, 0.130, 0.140, 0.150, 0.160])  # 80: a chunk
    other = np.array([0.100, 0.110, 0.120, 0.130, 0.140, 0.150, 0.160, 0.170])
    without = decode_points([first, other], [10, 10], min_gaps=4)
    with_sent = decode_points([first, other], [10, 10], sent=[-0.010, 0.0], min_gaps=4)
    alone = next(p for p in without if p.batch == 1)
    assert alone.step_s > 0.015  # the 50 ms gap counted as a decode step
    assert [p.batch for p in with_sent] == [2] and with_sent[0].step_s == pytest.approx(0.010), with_sent


def test_prefill_starts_at_the_finish_that_freed_a_slot():
    from infermeter.engine.probe_points import prefill_starts

    firsts = np.array([0.1, 0.2, 1.5])
    lasts = np.array([1.0, 1.2, 2.0])
    sent = np.zeros(3)
    # the third waited: its prefill began when the second finished (1.2), the last finish before its first token
    assert prefill_starts(firsts, lasts, sent).tolist() == [0.0, 0.0, 1.2]


def test_a_prompt_sent_while_another_decodes_shows_whether_prefill_shares_the_step():
    # the running request decodes in 10 ms steps; a newcomer's 100 ms prefill starts after its token at 0.05
    before = np.arange(6) * 0.010
    mixed = np.concatenate([before, 0.150 + np.arange(10) * 0.011])  # its next token ends the newcomer's step
    separate = np.concatenate([before, 0.162 + np.arange(10) * 0.012])  # a decode step (of two) after it
    same, apart = interference(mixed, 0.150), interference(separate, 0.150)
    assert same.offset_s == pytest.approx(0.0) and same.step_s == pytest.approx(0.011)
    assert apart.offset_s == pytest.approx(0.012)
    assert mixes_prefill([same, same, apart]) is True and mixes_prefill([apart, apart, same]) is False
    assert mixes_prefill([]) is None
    assert interference(before, 0.150) is None  # the running request ended before the newcomer's first token


def test_an_engine_that_mixes_prefill_into_decode_steps_is_given_chunked_prefill():
    data = probe(TRUE, 0.001, None, 8)
    mixed = Interference(offset_s=0.0002, step_s=0.010)
    engine = fit_engine(data.model_copy(update={"interference": [mixed] * 3}))
    assert engine.scheduler.name == "chunked_prefill" and engine.scheduler.token_budget == 8192
    assert engine.calibration.policy == "prefill mixed into decode steps (continuous)"
    assert engine.calibration.prefill_mixing.startswith("mixed: the running request's nearest token came +0.2 ms")
    separate = Interference(offset_s=0.012, step_s=0.010)
    engine = fit_engine(data.model_copy(update={"interference": [separate] * 3}))
    assert engine.scheduler.name == "continuous" and engine.calibration.prefill_mixing.startswith("separate")
    # a staircase keeps its budget; mixing or not, the chunks are what the isolated prompts showed
    chunked = fit_engine(probe(TRUE, 0.001, 512, 8).model_copy(update={"interference": [mixed] * 3}))
    assert chunked.scheduler.name == "chunked_prefill" and chunked.scheduler.token_budget == 512
    assert fit_engine(data).calibration.prefill_mixing.startswith("not measured")
