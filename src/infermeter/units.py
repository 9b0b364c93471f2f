"""Units: one definition of each conversion, and the one reader of durations written as text (`25ms`, `0.3s`)."""

from __future__ import annotations

import math
import re

MS_PER_S = 1000.0  # seconds -> milliseconds
S_PER_MS = 1e-3  # milliseconds -> seconds
S_PER_US = 1e-6
DURATION_UNITS = {"ms": S_PER_MS, "s": 1.0, "us": S_PER_US}
DURATION = r"([0-9]*\.?[0-9]+)\s*(ms|s|us)?"  # a number and an optional unit (a regex fragment with two groups)
_DURATION = re.compile(rf"\s*{DURATION}\s*")


def duration_s(number: str, unit: str | None) -> float:
    """Seconds from a DURATION match's two groups; a bare number means milliseconds."""
    return float(number) * DURATION_UNITS[unit or "ms"]


def parse_duration(text: str) -> float | None:
    """Seconds from `25ms`, `0.3s`, `150us` or `25` (milliseconds); None when the text is not a finite duration."""
    m = _DURATION.fullmatch(text)
    if m is None:
        return None
    value = duration_s(m.group(1), m.group(2))
    return value if math.isfinite(value) else None
