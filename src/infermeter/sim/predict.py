"""The simulator's answer for a calibrated engine, with "what if" overrides: `--set key=value` on the engine
configuration (a scheduler setting, a model parameter by its dotted name, the scheduler itself)."""

from __future__ import annotations

from typing import Any

import yaml
from pydantic import ValidationError

from infermeter.engine.config import EngineConfig
from infermeter.engine.registry import SCHEDULER_CONFIGS
from infermeter.errors import UserError


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
