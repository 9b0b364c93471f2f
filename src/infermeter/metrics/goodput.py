"""Goodput: requests that meet every given SLO at once, per second of the window (seeds/002: a conjunction).

SLOs bound a request's TTFT, TPOT, E2E, or ITL; the ITL bound must hold for every gap of the request (its
largest gap, the max pause).  A one-token reply has no TPOT or ITL and meets those bounds, as in vLLM; a request
without a first token meets no TTFT or E2E bound, and a failed request meets nothing.
"""

from __future__ import annotations

import math
import re

import numpy as np

from infermeter.errors import UserError
from infermeter.units import DURATION, duration_s

SLO_METRICS = ("ttft", "tpot", "itl", "e2e")
_SLO_ITEM = re.compile(rf"^\s*(\w+)\s*[=:<]\s*{DURATION}\s*$")


def parse_slo(text: str) -> dict[str, float]:
    """'ttft=200ms,tpot=50ms' -> {"ttft": 0.2, "tpot": 0.05} (seconds; a bare number means milliseconds)."""
    out: dict[str, float] = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        m = _SLO_ITEM.match(item)
        if not m:
            raise UserError(f"SLO item '{item}' is not of the form metric=value[ms|s|us], e.g. ttft=200ms")
        name, value = m.group(1).lower(), duration_s(m.group(2), m.group(3))
        if name not in SLO_METRICS:
            raise UserError(f"SLO metric '{name}' is unknown: use {', '.join(SLO_METRICS)}")
        if not 0 < value < math.inf:
            raise UserError(f"SLO bound {item} must be a positive, finite duration, e.g. {name}=200ms")
        out[name] = value
    if not out:
        raise UserError("the SLO is empty: give bounds such as ttft=200ms,tpot=50ms")
    return out


def meets_slo(ok: np.ndarray, per_request: dict[str, np.ndarray], slo: dict[str, float]) -> np.ndarray:
    """Boolean per request: successful and within every bound of the SLO."""
    good = ok.copy()
    for name, bound in slo.items():
        values = per_request[name]
        if name in ("tpot", "itl"):
            good &= ~(values > bound)  # undefined (NaN) passes
        else:
            good &= values <= bound  # undefined (NaN) fails
    return good
