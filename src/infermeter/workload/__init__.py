"""Workloads: length distributions, the draft's standard workloads, traces and arrival processes.

Its modules load on first use, so naming a constant of one of them does not import them all.
"""

from typing import TYPE_CHECKING

from infermeter.lazy import lazy_exports

if TYPE_CHECKING:  # what the names below are, for type checkers (at run time they load on first use)
    from infermeter.workload.arrivals import ArrivalSpec as ArrivalSpec
    from infermeter.workload.arrivals import arrival_offsets as arrival_offsets
    from infermeter.workload.spec import RequestClass as RequestClass
    from infermeter.workload.spec import Requests as Requests
    from infermeter.workload.spec import WorkloadSpec as WorkloadSpec
    from infermeter.workload.spec import generate as generate
    from infermeter.workload.standard import STANDARD as STANDARD
    from infermeter.workload.standard import resolve as resolve

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
