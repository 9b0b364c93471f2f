"""The engine configuration a black-box probe implies: the iteration model's costs, the API's overhead, the
scheduling policy that best explains the prompts' TTFT, the largest running batch and the KV capacity."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

import numpy as np

from infermeter.engine.calibration import (
    DECODE_FIT,
    HELD_OUT_MAX,
    PREFILL_FIT,
    R2_MIN,
    Calibration,
    FitQuality,
    ParameterFit,
    PolicyFit,
)
from infermeter.engine.config import EngineConfig
from infermeter.engine.decode_fit import MIN_BATCH_SIZES, DecodeFit, fit_decode
from infermeter.engine.iteration import ContinuousConfig
from infermeter.engine.latency import IterationModel
from infermeter.engine.least_squares import HeldOut
from infermeter.engine.policy_choice import choose_policy
from infermeter.engine.prefill_fit import PrefillFit
from infermeter.engine.probe_data import ProbeData
from infermeter.engine.probe_points import mixes_prefill
from infermeter.engine.request_cost import per_request_cost, short_turnarounds
from infermeter.errors import UserError
from infermeter.units import MS_PER_S

DEFAULT_MAX_NUM_SEQS = 256  # kept when the probe never filled the server's batch
# the token budget of an engine that mixes prefill into its decode steps but chunked no probed prompt: the prompt
# tokens a continuous engine's step may take
UNCHUNKED_BUDGET = ContinuousConfig.model_fields["max_batched_tokens"].default
MIN_FIXED_SHARE = 0.01  # a step fitted with no fixed cost gets this share of the shortest step measured


def _rms(held: HeldOut | None) -> float | None:
    return None if held is None else held.rms


def _parameters(decode: DecodeFit, prefill: PrefillFit, per_request: float | None, turns: int) -> list[ParameterFit]:
    d, p = decode.fit, prefill.fit
    rows = [
        ("iteration_model.fixed", decode.fixed, "s", d.stderr[0], DECODE_FIT, d),
        ("iteration_model.per_decode_seq", decode.per_decode_seq, "s/sequence", d.stderr[1], DECODE_FIT, d),
        ("iteration_model.per_context_token", decode.per_context_token, "s/token", d.stderr[2], DECODE_FIT, d),
        ("iteration_model.per_prefill_token", prefill.per_prefill_token, "s/token", p.stderr[1], PREFILL_FIT, p),
        ("api_overhead", prefill.overhead, "s", p.stderr[0], PREFILL_FIT, p),
    ]
    if prefill.attention:
        rows.insert(4, ("iteration_model.per_prefill_pair", prefill.per_prefill_pair, "s/pair", p.stderr[2],
                        PREFILL_FIT, p))  # fmt: skip
    held = {DECODE_FIT: _rms(decode.held_out), PREFILL_FIT: _rms(prefill.held_out)}
    out = [
        ParameterFit(
            parameter=name,
            value=value,
            unit=unit,
            stderr=None if err != err else float(err),  # NaN: pinned to 0 or not identifiable
            fit=fit,
            r2=lin.r2,
            residual_rms_ms=lin.rms * MS_PER_S,
            points=lin.points,
            held_out_rms=held[fit],
        )
        for name, value, unit, err, fit, lin in rows
    ]
    if decode.batch_exponent != 1.0:
        out.insert(
            2,
            ParameterFit(
                parameter="iteration_model.batch_exponent",
                value=decode.batch_exponent,
                unit="",
                fit=f"{DECODE_FIT} (least squares over exponents)",
                r2=d.r2,
                residual_rms_ms=d.rms * MS_PER_S,
                points=d.points,
                held_out_rms=held[DECODE_FIT],
            ),
        )
    if per_request is not None:
        out.append(
            ParameterFit(
                parameter="iteration_model.per_request",
                value=per_request,
                unit="s",
                fit="turnarounds before the shortest prompts (median)",
                points=turns,
            )
        )
    return out


def _quality(fit: str, model: str, r2: float, points: int, held: HeldOut | None,
             candidates: dict[str, float]) -> FitQuality:  # fmt: skip
    low, high = held.band if held is not None else (None, None)
    return FitQuality(fit=fit, model=model, points=points, r2=r2, held_out=None if held is None else held.what,
                      held_out_rms=_rms(held), held_out_low=low, held_out_high=high, candidates=candidates)  # fmt: skip


def fit_qualities(decode: DecodeFit, prefill: PrefillFit, tried: list[PrefillFit]) -> list[FitQuality]:
    """The decode and prefill fits' quality: R^2, and the error on probes held out of them (`tried`: every prefill
    model fitted)."""
    model = "linear in the batch" if decode.batch_exponent == 1.0 else f"batch ** {decode.batch_exponent:g}"
    return [
        _quality(DECODE_FIT, model, decode.fit.r2, decode.fit.points, decode.held_out, dict(decode.candidates)),
        _quality(PREFILL_FIT, prefill.model, prefill.fit.r2, prefill.fit.points, prefill.held_out,
                 {f.model: f.held_out.rms for f in tried if f.held_out is not None}),
    ]  # fmt: skip


def fit_warnings(qualities: list[FitQuality], batch_sizes: list[int]) -> list[str]:
    """Every poor fit, and what the probe could not verify, as the lines calibrate prints and predict repeats."""
    out = []
    for q in qualities:
        if q.held_out_rms is not None and q.held_out_rms > HELD_OUT_MAX:
            out.append(
                f"poor fit: the {q.fit} model ({q.model}) misses probes held out of it by {q.held_out_rms:.0%} "
                f"(RMS of relative errors; over {HELD_OUT_MAX:.0%}): predictions from it are unreliable"
            )
        spans_batches = q.fit != DECODE_FIT or len(batch_sizes) >= MIN_BATCH_SIZES
        if spans_batches and q.r2 < R2_MIN:
            out.append(f"poor fit: the {q.fit} model ({q.model}) explains R^2 {q.r2:.3f} of them (under {R2_MIN:g})")
    if len(batch_sizes) < MIN_BATCH_SIZES:
        sizes = ", ".join(map(str, batch_sizes)) or "none"
        out.append(
            f"not verifiable: decode steps were measured at batch size {sizes} only (fewer than {MIN_BATCH_SIZES}): "
            "how the step grows with the batch is not measured, so predictions under load are extrapolations"
        )
    return out


def _policy(isolated: str, one_at_a_time: bool, mixed: bool | None) -> str:
    """The scheduling found, in words, ending with the policy the isolated TTFTs chose in parentheses."""
    if one_at_a_time:
        return f"one at a time ({isolated})"
    return f"prefill mixed into decode steps ({isolated})" if mixed else isolated


def _mixing(probe: ProbeData, mixed: bool | None) -> str:
    """What the prompts sent while another request decoded showed, in words."""
    points = probe.interference
    if mixed is None:
        return (
            "not measured (the server ran one request at a time, the probe's time ran out, or no newcomer's first "
            "token fell inside a running request's stream)"
        )
    offset = float(np.median([p.offset_s for p in points])) * MS_PER_S
    step = float(np.median([p.step_s for p in points])) * MS_PER_S
    where = "in the same step as" if mixed else "a step apart from"
    return (
        f"{'mixed' if mixed else 'separate'}: the running request's nearest token came {offset:+.1f} ms from the "
        f"newcomer's first (median of {len(points)}; decode step {step:.1f} ms): {where} its prefill"
    )


def policy_budgets(probe: ProbeData) -> list[int | None]:
    """The prefill policies `fit_engine` weighs, by their chunk budget (None: one prefill step per prompt)."""
    _, fits, _ = choose_policy(probe.prefill, fit_decode(probe.decode))
    return [f.budget for f in fits]


def fit_engine(probe: ProbeData, base: EngineConfig | None = None, policy: int | str | None = "best") -> EngineConfig:
    """The engine configuration that explains the probe: `base`'s other settings kept.  `policy`: the prefill policy,
    "best" (the isolated TTFTs' choice), or a chunk budget of `policy_budgets` (None: one prefill step per prompt)."""
    if len(probe.prefill) < 2:
        raise UserError("the probe measured fewer than 2 prompt lengths: cannot fit the prefill cost")
    decode = fit_decode(probe.decode)
    floor_note = None
    if decode.fixed <= 0:
        if decode.per_decode_seq <= 0:
            raise UserError("the decode steps fit no positive cost: the server's timings are too noisy to calibrate")
        # a step that is all per-sequence work (one CPU thread computing every row): the simulator needs a positive
        # fixed cost, so a sliver of the shortest step stands for it
        fixed = MIN_FIXED_SHARE * min(p.step_s for p in probe.decode)
        decode = replace(decode, fixed=fixed)
        floor_note = (
            f"iteration_model.fixed: the decode steps fit no fixed cost (all of a step's time grows with its batch): "
            f"set to {fixed * MS_PER_S:.3g} ms, {MIN_FIXED_SHARE:.0%} of the shortest step measured"
        )
    chosen, fits, tried = choose_policy(probe.prefill, decode)
    if policy != "best":
        chosen = next(f for f in fits if f.budget == policy)
    limited = probe.largest_batch < probe.most_sent
    max_num_seqs = probe.largest_batch if limited else max(DEFAULT_MAX_NUM_SEQS, probe.most_sent)
    mixed = mixes_prefill(probe.interference)
    if chosen.budget is None and not mixed:
        scheduler: dict[str, object] = {"name": "continuous", "max_num_seqs": max_num_seqs}
    else:
        budget = chosen.budget if chosen.budget is not None else UNCHUNKED_BUDGET
        scheduler = {"name": "chunked_prefill", "max_num_seqs": max_num_seqs, "token_budget": budget}
    per_request = per_request_cost(probe.turnarounds, decode, chosen)
    model = IterationModel(
        fixed=decode.fixed,
        per_prefill_token=chosen.per_prefill_token,
        per_decode_seq=decode.per_decode_seq,
        per_context_token=decode.per_context_token,
        per_request=per_request or 0.0,
        batch_exponent=decode.batch_exponent,
        per_prefill_pair=chosen.per_prefill_pair,
    )
    notes = list(probe.notes) + ([floor_note] if floor_note else [])
    if not decode.kept[1]:
        notes.append("per_decode_seq: the batch never grew past one sequence (or its cost fit below 0): set to 0")
    if not decode.kept[2]:
        notes.append("per_context_token: too small to separate from noise at the probed contexts: set to 0")
    if not limited:
        notes.append(
            f"the server ran all {probe.most_sent} requests the probe sent at once: max_num_seqs is at least that "
            f"(set to {max_num_seqs})"
        )
    cache = probe.prefix_cache
    qualities = fit_qualities(decode, chosen, tried)
    calibration = Calibration(
        source=probe.source,
        measured_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        duration_s=probe.duration_s,
        parameters=_parameters(decode, chosen, per_request, len(short_turnarounds(probe.turnarounds))),
        policies=[PolicyFit(policy=f.policy, residual_rms_ms=f.fit.rms * MS_PER_S, r2=f.fit.r2) for f in fits],
        policy=_policy(chosen.policy, limited and probe.largest_batch == 1, mixed),
        prefill_mixing=_mixing(probe, mixed),
        largest_batch=probe.largest_batch,
        batch_limited=limited,
        prefix_cache="not measured"
        if cache is None
        else (
            f"{'present' if cache.present else 'absent'}: the same {cache.prompt_tokens}-token prompt again took "
            f"{cache.second_ttft_s * MS_PER_S:.1f} ms against {cache.first_ttft_s * MS_PER_S:.1f} ms"
        ),
        kv_capacity_source=probe.kv_capacity_source,
        notes=notes,
        fits=qualities,
        warnings=fit_warnings(qualities, sorted({p.batch for p in probe.decode})),
    )
    data = (base or EngineConfig()).model_dump(exclude={"scheduler", "iteration_model", "latency", "calibration"})
    data.update(
        scheduler=scheduler,
        latency="iteration",
        iteration_model=model,
        api_overhead=chosen.overhead,
        calibration=calibration,
    )
    if probe.kv_capacity_tokens is not None:
        data["kv_capacity_tokens"] = probe.kv_capacity_tokens
    return EngineConfig.model_validate(data)
