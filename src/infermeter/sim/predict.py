"""The simulator's answer for a calibrated engine, with "what if" overrides: `--set key=value` on the engine
configuration (a scheduler setting, a model parameter by its dotted name, the scheduler itself)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import yaml
from pydantic import BaseModel, ValidationError

from infermeter.engine.calibration import DECODE_FIT, HELD_OUT_MAX, PREFILL_FIT, Calibration
from infermeter.engine.config import EngineConfig
from infermeter.engine.registry import SCHEDULER_CONFIGS
from infermeter.errors import UserError
from infermeter.metrics.summary_model import Summary


def parse_setting(text: str) -> tuple[str, Any]:
    """`key=value`, the value read as YAML (numbers, booleans, lists); seconds for times, as the file has them."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or not raw.strip():
        raise UserError(
            f"--set {text!r}: give key=value, e.g. --set max_num_seqs=128 or --set scheduler=chunked_prefill"
        )
    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError:
        value = raw.strip()
    return key, value


def _switch_scheduler(data: dict[str, Any], name: str) -> None:
    """Another scheduler, keeping the settings it shares with the current one (batch size, token budget)."""
    if name not in SCHEDULER_CONFIGS:
        raise UserError(f"--set scheduler={name}: unknown scheduler; choose one of {', '.join(SCHEDULER_CONFIGS)}")
    fields = SCHEDULER_CONFIGS[name].model_fields
    current = data.get("scheduler") or {}
    data["scheduler"] = {**{k: v for k, v in current.items() if k in fields and k != "name"}, "name": name}


def apply_settings(engine: EngineConfig, settings: list[str]) -> EngineConfig:
    """The engine with each `key=value` applied in order; a bad key or value is one line naming it."""
    data = engine.model_dump(mode="python")
    for text in settings:
        key, value = parse_setting(text)
        if key == "scheduler":
            _switch_scheduler(data, str(value))
            continue
        path = key.split(".")
        if path[0] == "scheduler" and len(path) == 2:
            data["scheduler"] = {**data["scheduler"], path[1]: value}
            continue
        if len(path) == 1 and path[0] not in EngineConfig.model_fields:
            data["scheduler"] = {**data["scheduler"], path[0]: value}  # a setting of the scheduler, written flat
            if path[0] not in SCHEDULER_CONFIGS[data["scheduler"]["name"]].model_fields:
                raise UserError(f"--set {text}: {path[0]} is not an engine or {data['scheduler']['name']} setting")
            continue
        node = data
        for part in path[:-1]:
            if not isinstance(node.get(part), dict):
                raise UserError(f"--set {text}: {part} holds no settings")
            node = node[part]
        if path[-1] not in node:
            raise UserError(f"--set {text}: {key} is not an engine setting")
        node[path[-1]] = value
    try:
        return EngineConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "engine"
        raise UserError(f"--set: {where}: {first['msg'].removeprefix('Value error, ')}") from None


# metric label -> Summary field: the figures a prediction gives with an interval
METRICS: dict[str, str] = {"TTFT": "ttft_ms", "ITL": "itl_ms", "TPOT": "tpot_ms", "E2E": "e2e_ms"}
MIN_FACTOR = 0.05  # a cost is never scaled below this share of its fitted value


def _scaled(engine: EngineConfig, decode: float, prefill: float) -> EngineConfig:
    it = engine.iteration_model
    model = replace(
        it,
        fixed=it.fixed * decode,
        per_decode_seq=it.per_decode_seq * decode,
        per_context_token=it.per_context_token * decode,
        per_request=it.per_request * decode,
        per_request_token=it.per_request_token * decode,
        per_arrival=it.per_arrival * decode,
        per_arrival_token=it.per_arrival_token * decode,
        per_prefill_token=it.per_prefill_token * prefill,
        per_prefill_pair=it.per_prefill_pair * prefill,
    )
    return engine.model_copy(update={"iteration_model": model, "api_overhead": engine.api_overhead * prefill})


def bound_engines(engine: EngineConfig) -> tuple[EngineConfig, EngineConfig] | None:
    """The engine at the two ends of its calibration's held-out error band: every decode cost (and every prefill
    cost) divided by 1 + the highest, then 1 + the lowest relative error of a probe held out of its fit (the model
    that over-predicted a held-out probe by 10% costs 1/1.1 of the prediction there).  None when the calibration
    held nothing out, or the engine was not calibrated over HTTP."""
    cal = engine.calibration
    if cal is None or engine.latency != "iteration":
        return None
    decode, prefill = cal.band(DECODE_FIT), cal.band(PREFILL_FIT)
    if decode is None and prefill is None:
        return None

    def factor(band: tuple[float, float] | None, end: int) -> float:
        return 1.0 if band is None else 1.0 / max(1.0 + band[end], MIN_FACTOR)

    return (
        _scaled(engine, factor(decode, 1), factor(prefill, 1)),
        _scaled(engine, factor(decode, 0), factor(prefill, 0)),
    )


def unreliable(cal: Calibration | None) -> str | None:
    """Why every figure predicted from a calibrated engine is not to be trusted: the fits whose error on probes held
    out of them is over HELD_OUT_MAX (each figure, under load, rests on both fits: queueing on the decode steps,
    mixed steps on the prefill); None when each fit held, or nothing was held out."""
    if cal is None:
        return None
    poor = [f"{q.fit} {q.held_out_rms:.0%}" for q in cal.fits if (q.held_out_rms or 0.0) > HELD_OUT_MAX]
    if not poor:
        return None
    return f"unreliable: the calibration misses held-out probes by over {HELD_OUT_MAX:.0%} ({', '.join(poor)})"


def trust(cal: Calibration | None) -> str:
    """What a predicted figure's calibration says of it, in a table's cell."""
    if cal is None:
        return "not calibrated"
    poor = unreliable(cal)
    if poor is not None:
        return poor
    held = [q.held_out_rms for q in cal.fits if q.held_out_rms is not None]
    if not held:
        return "not verifiable: the calibration held no probe out"
    return f"held-out error {max(held):.0%} at most (within {HELD_OUT_MAX:.0%})"


class FigureInterval(BaseModel):
    """A predicted figure and the range its calibration's error band carries it over (ms); `caveat`: why it is not
    to be trusted (`unreliable`), or None."""

    metric: str
    q: int
    predicted: float | None
    low: float | None
    high: float | None
    caveat: str | None = None

    def holds(self, measured: float | None) -> bool | None:
        """Whether a measured figure fell inside; None where either side has no figure."""
        if measured is None or self.low is None or self.high is None:
            return None
        return self.low <= measured <= self.high


def figure_intervals(nominal: Summary, low: Summary, high: Summary, caveat: str | None = None) -> list[FigureInterval]:
    """Each metric's P50 and P99: predicted, and the lowest and highest of it across the band's two engines."""
    out = []
    for label, field in METRICS.items():
        for q in (50, 99):
            values = [getattr(s, field).percentile(q) for s in (nominal, low, high)]
            known = [v for v in values if v is not None]
            out.append(
                FigureInterval(
                    metric=label,
                    q=q,
                    predicted=values[0],
                    low=min(known) if known else None,
                    high=max(known) if known else None,
                    caveat=caveat,
                )
            )
    return out


INTERVAL_NOTE = (
    "interval: the simulation rerun with every cost scaled to the ends of the calibration's held-out error band "
    "(decode steps for the decode costs, isolated TTFT for prefill and API overhead); it carries the model's error "
    "through queueing, not a run's sampling noise"
)


INTERVALS = "intervals.json"  # beside a prediction's run: each figure's interval


def save_intervals(run_dir: Path, intervals: list[FigureInterval]) -> None:
    """The intervals beside the prediction's run directory files."""
    doc = {"note": INTERVAL_NOTE, "intervals_ms": [i.model_dump() for i in intervals]}
    (run_dir / INTERVALS).write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
