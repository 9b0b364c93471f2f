"""The Python API's keyword options: a command's configuration fields by their names (`rate=10`, `warmup="off"`),
given as Python values or as the strings the command line takes, each passed through the check of its command-line
option, so a bad value is refused the same way from either side."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError

from infermeter.config.section import Given, Section
from infermeter.errors import UserError

T = TypeVar("T")


@dataclass(frozen=True)
class Fields:
    """The options a command takes from one configuration section: all of its fields or `only` these, with the
    command's own defaults where they differ from the section's (applied when the option is not given).  The command
    line's options are built from the same tables (cli.options.Part adds their help)."""

    key: str
    section: type[Section]
    only: tuple[str, ...] | None = None
    defaults: Mapping[str, Any] = field(default_factory=dict)

    def names(self) -> list[str]:
        """The fields this command takes, in the section's order."""
        return [n for n in self.section.model_fields if self.only is None or n in self.only]


def given_from(
    options: Mapping[str, Any], fields: Sequence[Fields], function: str, command: str, own: Iterable[str] = ()
) -> Given:
    """The command line's `given` (section -> field -> value) from keyword options of `function` (the Python side of
    `command`): what was given (None counts as not given, as an option left off the command line) and the command's
    own defaults.  An unknown name is a UserError naming the close ones (`own`: the function's other parameters,
    close names too); a bad value, one naming the option and its value."""
    where = {name: f for f in fields for name in f.names()}
    for name in options:
        if name not in where:
            raise UserError(unknown_option(name, [*where, *own], function, command))
    given: Given = {}
    for f in fields:
        for name in f.names():
            value = options.get(name)
            if value is None:
                value = f.defaults.get(name)
            if value is not None:
                given.setdefault(f.key, {})[name] = checked_field(f.section, name, value)
    return given


def unknown_option(name: str, names: Sequence[str], function: str, command: str) -> str:
    """The message for a keyword the function does not take: the close names, else where its options are listed."""
    close = difflib.get_close_matches(name, list(names), n=3)
    if close:
        return f"{function}() has no option {name!r}: did you mean {' or '.join(close)}?"
    return f"{function}() has no option {name!r}: its options are `{command} --help`'s, spelled with _ for -"


def checked_field(section: type[Section], name: str, value: Any) -> Any:
    """One field's value as its section will take it: its command-line check (a string such as "off" or "10ms"
    parsed as the option parses it), then its type; a bad value is a one-line UserError naming the option."""
    flag = section.flag(name)
    if flag is not None and flag.repeatable and isinstance(value, str):
        value = [value]  # a repeatable option given once
    if flag is not None and flag.check is not None:
        value = checked(name, value, flag.check)
    annotation = section.model_fields[name].annotation
    try:
        if annotation is not None:
            TypeAdapter(annotation).validate_python(value)
    except ValidationError as exc:
        raise UserError(f"{name}={value!r}: {str(exc.errors()[0]['msg']).removeprefix('Value error, ')}") from None
    return value


def checked(name: str, value: Any, check: Callable[[Any], T]) -> T:
    """`check(value)`, its ValueError a one-line UserError naming the option and its value."""
    try:
        return check(value)
    except ValueError as exc:
        raise UserError(f"{name}={value!r}: {exc}") from None


def emulator_options(
    emulator_config: str | PathLike[str] | None, scheduler: str | None
) -> tuple[Path | None, str | None]:
    """The embedded emulator's two options, checked as `--emulator-config` and `--scheduler` are: an emulator (or
    engine) configuration file that reads, a scheduler the registry has."""
    from infermeter.config import checks
    from infermeter.config.engine import SimEngine

    path = checked("emulator_config", emulator_config, checks.EMULATOR_CONFIG_FILE) if emulator_config else None
    if scheduler is None:
        return path, None
    flag = SimEngine.flag("scheduler")
    assert flag is not None and flag.check is not None, "SimEngine.scheduler declares its check"
    return path, checked("scheduler", scheduler, flag.check)


def output_path(name: str, value: str | PathLike[str] | None) -> Path | None:
    """Where a function writes (`out`), checked as the command line's --out is; None stays None (the default)."""
    from infermeter.config import checks

    return checked(name, value, checks.out_path) if value is not None else None
