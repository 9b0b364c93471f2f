"""The engine configuration a black-box probe implies: the iteration model's costs, the API's overhead, the
scheduling policy that best explains the prompts' TTFT, the largest running batch and the KV capacity."""

from __future__ import annotations

import datetime as dt

from infermeter.engine.calibration import (
    Calibration,
    DecodeFit,
    ParameterFit,
    PolicyFit,
    PrefillFit,
    ProbeData,
    choose_policy,
    fit_decode,
    per_request_cost,
    quadratic_term,
    short_turnarounds,
)
from infermeter.engine.config import EngineConfig
from infermeter.engine.latency import IterationModel
from infermeter.errors import UserError
from infermeter.units import MS_PER_S

DEFAULT_MAX_NUM_SEQS = 256  # kept when the probe never filled the server's batch


def _parameters(decode: DecodeFit, prefill: PrefillFit, per_request: float | None, turns: int) -> list[ParameterFit]:
    d, p = decode.fit, prefill.fit
    rows = [
        ("iteration_model.fixed", decode.fixed, "s", d.stderr[0], "decode steps", d),
        ("iteration_model.per_decode_seq", decode.per_decode_seq, "s/sequence", d.stderr[1], "decode steps", d),
        ("iteration_model.per_context_token", decode.per_context_token, "s/token", d.stderr[2], "decode steps", d),
        ("iteration_model.per_prefill_token", prefill.per_prefill_token, "s/token", p.stderr[1], "isolated TTFT", p),
        ("api_overhead", max(prefill.overhead, 0.0), "s", p.stderr[0], "isolated TTFT", p),
    ]
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
        )
        for name, value, unit, err, fit, lin in rows
    ]
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


def fit_engine(probe: ProbeData, base: EngineConfig | None = None) -> EngineConfig:
    """The engine configuration that explains the probe: `base`'s other settings kept."""
    if len(probe.prefill) < 2:
        raise UserError("the probe measured fewer than 2 prompt lengths: cannot fit the prefill cost")
    decode = fit_decode(probe.decode)
    if decode.fixed <= 0:
        raise UserError("the decode steps fit no positive fixed cost: the server's timings are too noisy to calibrate")
    chosen, fits = choose_policy(probe.prefill, decode)
    limited = probe.largest_batch < probe.most_sent
    max_num_seqs = probe.largest_batch if limited else max(DEFAULT_MAX_NUM_SEQS, probe.most_sent)
    if chosen.budget is None:
        scheduler: dict[str, object] = {"name": "continuous", "max_num_seqs": max_num_seqs}
    else:
        scheduler = {"name": "chunked_prefill", "max_num_seqs": max_num_seqs, "token_budget": chosen.budget}
    per_request = per_request_cost(probe.turnarounds, decode, chosen)
    model = IterationModel(
        fixed=decode.fixed,
        per_prefill_token=chosen.per_prefill_token,
        per_decode_seq=decode.per_decode_seq,
        per_context_token=decode.per_context_token,
        per_request=per_request or 0.0,
    )
    quad = quadratic_term(probe.prefill)
    notes = list(probe.notes)
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
    calibration = Calibration(
        source=probe.source,
        measured_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        duration_s=probe.duration_s,
        parameters=_parameters(decode, chosen, per_request, len(short_turnarounds(probe.turnarounds))),
        policies=[PolicyFit(policy=f.policy, residual_rms_ms=f.fit.rms * MS_PER_S, r2=f.fit.r2) for f in fits],
        policy=chosen.policy if not (limited and probe.largest_batch == 1) else f"one at a time ({chosen.policy})",
        largest_batch=probe.largest_batch,
        batch_limited=limited,
        quadratic_prefill_ms_per_ktoken2=None if quad is None else quad * MS_PER_S * 1e6,
        prefix_cache="not measured"
        if cache is None
        else (
            f"{'present' if cache.present else 'absent'}: the same {cache.prompt_tokens}-token prompt again took "
            f"{cache.second_ttft_s * MS_PER_S:.1f} ms against {cache.first_ttft_s * MS_PER_S:.1f} ms"
        ),
        kv_capacity_source=probe.kv_capacity_source,
        notes=notes,
    )
    data = (base or EngineConfig()).model_dump(exclude={"scheduler", "iteration_model", "latency", "calibration"})
    data.update(
        scheduler=scheduler,
        latency="iteration",
        iteration_model=model,
        api_overhead=max(chosen.overhead, 0.0),
        calibration=calibration,
    )
    if probe.kv_capacity_tokens is not None:
        data["kv_capacity_tokens"] = probe.kv_capacity_tokens
    return EngineConfig.model_validate(data)
