"""A run's configuration from its three sources, in order: a scenario file (YAML/JSON, or a run directory's run.json),
then the command line's options, each overriding the key it names; the result is validated once, as a whole."""

from __future__ import annotations

from pathlib import Path
from types import UnionType
from typing import Any, TypeGuard, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from infermeter.config.run import RunConfig
from infermeter.config.section import Given
from infermeter.config_files import read_mapping
from infermeter.emulator.config import EmulatorConfig, load_emulator_config
from infermeter.errors import UserError

RUN_SCHEMA = "infermeter.run/"


def read_scenario(path: Path) -> dict[str, Any]:
    """A scenario file's mapping; a run.json (or its directory) gives the resolved configuration it recorded."""
    if path.is_dir():
        path = path / "run.json"
    data = read_mapping(path, "--config")
    version = data.get("schema_version")
    if isinstance(version, str) and version.startswith(RUN_SCHEMA):
        config = data.get("config")
        if data.get("kind") == "simulated":
            raise UserError(
                f"--config {path} is a simulated run: `infermeter sim` with its options (run.json's engine and "
                "workload blocks) runs it again, `infermeter run` does not"
            )
        if not isinstance(config, dict):
            raise UserError(
                f"--config {path} is a run.json without a resolved configuration ({version}, written before "
                "infermeter recorded one): give the run's options on the command line instead"
            )
        return config
    return data


# a scenario's `dataset:` block (a file name, or a mapping) -> the workload section's keys
DATASET_KEYS = {
    "path": "dataset",
    "format": "dataset_format",
    "max_input_tokens": "max_input_tokens",
    "max_output_tokens": "max_output_tokens",
    "sample": "dataset_sample",
    "block_tokens": "block_tokens",
    "time_scale": "rps_scale",
    "multi_turn": "multi_turn",
    "history": "history",
    "think_time": "think_time",
}


def dataset_block(data: dict[str, Any], path: Path) -> dict[str, Any]:
    """A scenario's top-level `dataset:` (a file, or a mapping of path, format, max_input_tokens, max_output_tokens,
    sample, block_tokens, time_scale, multi_turn, history, think_time) moved into its workload section; a relative
    path is taken from the directory the run starts in, as the workload section's files are."""
    if "dataset" not in data:
        return data
    block = data["dataset"]
    block = {"path": block} if isinstance(block, str) else block
    if not isinstance(block, dict) or "path" not in block:
        raise UserError(f"--config {path}: dataset: give a file name, or a mapping with `path` (and {_optional()})")
    unknown = [k for k in block if k not in DATASET_KEYS]
    if unknown:
        raise UserError(f"--config {path}: unknown key dataset.{unknown[0]}: the keys are {', '.join(DATASET_KEYS)}")
    workload = data.get("workload") or {}
    if not isinstance(workload, dict):
        raise UserError(f"--config {path}: workload must be a mapping of its options, got {workload!r}")
    moved = {DATASET_KEYS[k]: v for k, v in block.items()}
    rest = {k: v for k, v in data.items() if k != "dataset"}
    return {**rest, "workload": {**workload, **moved}}


def _optional() -> str:
    return ", ".join(k for k in DATASET_KEYS if k != "path")


# Keys that answer one question: an option given on the command line replaces the file's answer, not just its key
# (`--concurrency` over a file's `rate`, `--input-tokens` over a run.json's `workload`, `--duration` over `requests`).
ALTERNATIVES: dict[str, tuple[tuple[str, ...], ...]] = {
    "workload": (("workload", "input_tokens", "output_tokens", "trace", "dataset"),),
    "load": (("rate", "concurrency"), ("requests", "duration")),
}


def merged(base: dict[str, Any], given: Given, path: Path | None = None) -> dict[str, Any]:
    """The file's sections with the command line's values laid over them, key by key; a key the command line gives
    drops the file's alternatives to it."""
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in base.items()}
    for section, values in given.items():
        current = out.get(section)
        if current is not None and not isinstance(current, dict):
            raise UserError(f"--config {path}: {section} must be a mapping of its options, got {current!r}")
        kept = dict(current or {})
        for group in ALTERNATIVES.get(section, ()):
            if any(k in values for k in group):
                for k in group:
                    kept.pop(k, None)
        out[section] = {**kept, **values}
    return out


def run_config(
    path: Path | None, given: Given, emulator_file: Path | None = None, scheduler: str | None = None
) -> RunConfig:
    """The run's configuration; a bad key or value is a one-line error naming the file's key or the option.
    --emulator-config replaces the emulator's configuration, --scheduler changes its scheduler; a --url given on the
    command line drops the emulator a scenario file described."""
    base = dataset_block(read_scenario(path), path) if path is not None else {}
    data = merged(base, given, path)
    if "url" in given.get("target", {}):
        data.pop("emulator", None)
    if emulator_file is not None or scheduler is not None:
        emu = load_emulator_config(emulator_file) if emulator_file else _emulator(data.get("emulator"), path)
        data["emulator"] = emu.with_scheduler(scheduler).model_dump(mode="json")
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        message = str(first["msg"]).removeprefix("Value error, ")
        loc = [str(x) for x in first["loc"]]
        if first["type"] == "extra_forbidden":
            keys = _keys_beside(loc, data)
            raise UserError(f"--config {path}: unknown key {'.'.join(loc)}: the keys are {keys}") from None
        if len(loc) < 2 and first["type"] == "value_error":  # a rule across options: its message names them
            raise UserError(message + (f" (--config {path})" if path is not None else "")) from None
        raise UserError(f"--config {path}: {'.'.join(loc)}: {message}") from None


def _keys_beside(loc: list[str], data: object) -> str:
    """The keys a scenario may hold where an unknown one was found (pydantic's error location, walked through
    models, optional values, list items, tagged unions and configs chosen by their `name`, as schedulers are)."""
    model: Any = RunConfig
    for key in loc[:-1]:
        model = _inside(model, key)
        if isinstance(data, dict):
            data = data.get(key)
        elif isinstance(data, list) and key.isdigit() and int(key) < len(data):
            data = data[int(key)]
        if _is_model(model) and isinstance(data, dict) and isinstance(data.get("name"), str):
            model = _named(model, data["name"]) or model
    model = _inside(model, None)
    fields = model.model_fields if _is_model(model) else {}
    return ", ".join(fields) or "those of `infermeter run --help`"


def _inside(model: Any, key: str | None) -> Any:
    """What `key` of `model` holds (the model itself unwrapped from Optional when key is None); None if unknown."""
    if get_origin(model) in (Union, UnionType):
        members = [a for a in get_args(model) if a is not type(None)]
        if len(members) == 1:
            return _inside(members[0], key)
        tagged = [m for m in members if _is_model(m) and getattr(m.model_fields.get("name"), "default", None) == key]
        return tagged[0] if len(tagged) == 1 else None  # the key is the tag pydantic puts in the location
    if key is None:
        return model
    if get_origin(model) in (list, tuple) and key.isdigit():
        return next(iter(get_args(model)), None)
    if _is_model(model):
        field = model.model_fields.get(key)
        return field.annotation if field is not None else None
    return None


def _named(base: type[BaseModel], name: str) -> type[BaseModel] | None:
    """The subclass of `base` whose `name` is `name` (a scheduler's config, say)."""
    for sub in base.__subclasses__():
        if getattr(sub.model_fields.get("name"), "default", None) == name:
            return sub
        found = _named(sub, name)
        if found is not None:
            return found
    return None


def _is_model(value: object) -> TypeGuard[type[BaseModel]]:
    return isinstance(value, type) and issubclass(value, BaseModel)


def _emulator(block: object, path: Path | None) -> EmulatorConfig:
    if block is None:
        return EmulatorConfig()
    try:
        return EmulatorConfig.model_validate(block)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(["emulator", *map(str, first["loc"])])
        raise UserError(f"--config {path}: {where}: {str(first['msg']).removeprefix('Value error, ')}") from None
