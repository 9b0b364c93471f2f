"""Workloads: length distributions, the draft's standard workloads, traces and arrival processes.

Its modules load on first use, so naming a constant of one of them does not import them all.
"""

from infermeter.lazy import lazy_exports

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

__all__ = [*_FROM]

__getattr__ = lazy_exports(__name__, _FROM)
