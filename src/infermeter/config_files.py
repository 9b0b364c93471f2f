"""Reading a pydantic model from a YAML or JSON file, with a one-line error naming what is wrong."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from infermeter.errors import UserError

M = TypeVar("M", bound=BaseModel)


INT64 = 2**63  # numbers beyond int64 overflow numpy arrays: no setting needs one


def read_mapping(path: Path, what: str) -> dict[str, Any]:
    """The file's top-level mapping (empty file: {}); every number in it finite and within int64."""
    if path.is_dir():
        raise UserError(f"{what} {path} is a directory: give a YAML or JSON file")
    if not path.is_file():
        raise UserError(f"{what} {path} does not exist")
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except UnicodeDecodeError:
        raise UserError(f"{what} {path} is not UTF-8 text: give a YAML or JSON file") from None
    except OSError as exc:
        raise UserError(f"{what} {path} cannot be read ({exc.strerror})") from None
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise UserError(
            f"{what} {path} is not valid {path.suffix.lstrip('.') or 'YAML'}: {str(exc).splitlines()[0]}"
        ) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UserError(f"{what} {path} must hold a mapping of settings")
    _check_numbers(data, path, what)
    return data


def _check_numbers(data: Any, path: Path, what: str, where: str = "") -> None:
    """Refuse NaN, infinities and integers beyond int64 anywhere in the file (YAML .nan/.inf, JSON NaN)."""
    if isinstance(data, dict):
        for key, value in data.items():
            _check_numbers(value, path, what, f"{where}.{key}" if where else str(key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            _check_numbers(value, path, what, f"{where}.{i}" if where else str(i))
    elif isinstance(data, float) and not math.isfinite(data):
        raise UserError(f"{what} {path}: {where or '(top level)'}: must be a finite number, got {data}")
    elif isinstance(data, int) and not isinstance(data, bool) and abs(data) >= INT64:
        raise UserError(f"{what} {path}: {where or '(top level)'}: {data} is too large")


def validate(model: type[M], data: dict[str, Any], path: Path, what: str) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "(top level)"
        raise UserError(f"{what} {path}: {where}: {first['msg'].removeprefix('Value error, ')}") from None


def load_model(model: type[M], path: Path, what: str) -> M:
    return validate(model, read_mapping(path, what), path, what)
