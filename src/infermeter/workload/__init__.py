"""Workloads: length distributions, the draft's standard workloads, traces and arrival processes.

Its modules load on first use, so naming a constant of one of them does not import them all.
"""

import importlib
from typing import Any

_FROM = {
    "ArrivalSpec": "arrivals",
    "arrival_offsets": "arrivals",
    "RequestClass": "spec",
    "Requests": "spec",
    "WorkloadSpec": "spec",
    "generate": "spec",
    "STANDARD": "standard",
    "resolve": "standard",
}

__all__ = [
    "STANDARD",
    "ArrivalSpec",
    "RequestClass",
    "Requests",
    "WorkloadSpec",
    "arrival_offsets",
    "generate",
    "resolve",
]


def __getattr__(name: str) -> Any:
    if name in _FROM:
        return getattr(importlib.import_module(f"infermeter.workload.{_FROM[name]}"), name)
    raise AttributeError(f"module 'infermeter.workload' has no attribute {name!r}")
