"""A configuration section: a pydantic model whose fields carry their command-line flag (help, check, names), so that
the CLI and scenario files are built from one definition and every value passes the same check either way."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator

from infermeter.errors import UserError

Given = dict[str, dict[str, Any]]  # section -> field -> value, as the command line gave them


@dataclass(frozen=True)
class Flag:
    """How a field appears on the command line: its help, the check of its raw value, its names when they are
    not just `--field-name`, and whether a list field's option may be given more than once (its check then joins
    the lists of every occurrence); a list field's option is otherwise given once, its items comma-separated."""

    help: str
    check: Callable[[Any], Any] | None = None
    names: tuple[str, ...] = ()
    repeatable: bool = False


class Section(BaseModel):
    """A group of options (target, workload, load, ...); unknown keys are refused, values pass their flag's check."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    title: ClassVar[str] = ""

    @classmethod
    def flag(cls, name: str) -> Flag | None:
        """The Flag declared on a field, if any."""
        return next((m for m in cls.model_fields[name].metadata if isinstance(m, Flag)), None)

    @classmethod
    def from_options(cls, values: Mapping[str, Any]) -> Self:
        """The section from the command line's values (each already checked by its flag): a rule across options
        fails with its own message, a field with its option's name in front."""
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            first = exc.errors()[0]
            message = str(first["msg"]).removeprefix("Value error, ")
            name = str(first["loc"][0]) if first["loc"] else ""
            if name not in cls.model_fields:
                raise UserError(message) from None
            flag = cls.flag(name)
            option = next((n for n in flag.names if n.startswith("--")), None) if flag else None
            raise UserError(f"{option or '--' + name.replace('_', '-')}: {message}") from None

    @field_validator("*", mode="before")
    @classmethod
    def _checked(cls, value: Any, info: ValidationInfo) -> Any:
        flag = cls.flag(info.field_name) if info.field_name else None
        if flag is None or flag.check is None or value is None:
            return value
        return flag.check(value)
