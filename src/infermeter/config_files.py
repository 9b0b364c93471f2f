"""Reading a pydantic model from a YAML or JSON file, with a one-line error naming what is wrong."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from infermeter.errors import UserError

M = TypeVar("M", bound=BaseModel)


def read_mapping(path: Path, what: str) -> dict[str, Any]:
    """The file's top-level mapping (empty file: {})."""
    if not path.is_file():
        raise UserError(f"{what} {path} does not exist")
    try:
        text = path.read_text()
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise UserError(
            f"{what} {path} is not valid {path.suffix.lstrip('.') or 'YAML'}: {str(exc).splitlines()[0]}"
        ) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UserError(f"{what} {path} must hold a mapping of settings")
    return data


def validate(model: type[M], data: dict[str, Any], path: Path, what: str) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "(top level)"
        raise UserError(f"{what} {path}: {where}: {first['msg']}") from None


def load_model(model: type[M], path: Path, what: str) -> M:
    return validate(model, read_mapping(path, what), path, what)
