"""Checked values of one row's fields: each bad value is a one-line error naming the file, the row and the field."""

from __future__ import annotations

import math

from infermeter.workload.datasets.source import Rows
from infermeter.workload.limits import MAX_LENGTH


def show(value: object) -> str:
    """A value as a message quotes it: strings quoted, JSON's literals as JSON spells them, long ones cut."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def whole(value: object) -> int | None:
    """A whole number as JSON or a table gives one (an int, or a float with nothing after the point; not a bool),
    else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def positive_int(rows: Rows, i: int, name: str, value: object) -> int:
    if value is None:
        raise rows.fail(i, f"{name} is missing: give the length in tokens, a whole number above 0")
    n = whole(value)
    if n is None or not 0 < n <= MAX_LENGTH:
        raise rows.fail(
            i, f"{name} {show(value)} is not a whole number from 1 to {MAX_LENGTH:,}: give the length in tokens"
        )
    return n


def number(rows: Rows, i: int, name: str, value: object, unit: str) -> float:
    if value is None:
        raise rows.fail(i, f"{name} is missing: give a number of {unit}")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise rows.fail(i, f"{name} {show(value)} is not a number: give a number of {unit}")
    return float(value)


def text(rows: Rows, i: int, name: str, value: object) -> str:
    if not isinstance(value, str):
        raise rows.fail(i, f"{name} {show(value)} is not a string: give the text")
    return value


def optional_text(rows: Rows, i: int, name: str, value: object) -> str | None:
    return None if value is None else text(rows, i, name, value)


class NonDecreasing:
    """Checks that a file's timestamps never go back (all rows carry one, or none does); names the first row that
    breaks it."""

    def __init__(self, rows: Rows, name: str) -> None:
        self.rows, self.name = rows, name
        self.last: float | None = None
        self.seen: bool | None = None  # whether the first row had one

    def check(self, i: int, value: float | None) -> None:
        has = value is not None
        if self.seen is None:
            self.seen = has
        elif has != self.seen:
            given = "this row has one and the rows before it have none" if has else "the rows before it have one"
            raise self.rows.fail(i, f"{self.name} is given on some rows only ({given}): give it on every row or none")
        if value is None:
            return
        if self.last is not None and value < self.last:
            raise self.rows.fail(
                i,
                f"{self.name} {value:g} is earlier than the row before ({self.last:g}): timestamps must not decrease; "
                "sort the file by timestamp",
            )
        self.last = value
