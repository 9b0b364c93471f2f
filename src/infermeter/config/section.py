"""A configuration section: a pydantic model whose fields carry their command-line flag (help, check, names), so that
the CLI and scenario files are built from one definition and every value passes the same check either way."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator


@dataclass(frozen=True)
class Flag:
    """How a field appears on the command line: its help, the check of its raw value, and its names when they are
    not just `--field-name`."""

    help: str
    check: Callable[[Any], Any] | None = None
    names: tuple[str, ...] = ()


class Section(BaseModel):
    """A group of options (target, workload, load, ...); unknown keys are refused, values pass their flag's check."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    title: ClassVar[str] = ""

    @classmethod
    def flag(cls, name: str) -> Flag | None:
        """The Flag declared on a field, if any."""
        return next((m for m in cls.model_fields[name].metadata if isinstance(m, Flag)), None)

    @field_validator("*", mode="before")
    @classmethod
    def _checked(cls, value: Any, info: ValidationInfo) -> Any:
        flag = cls.flag(info.field_name) if info.field_name else None
        if flag is None or flag.check is None or value is None:
            return value
        return flag.check(value)
