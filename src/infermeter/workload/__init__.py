"""Workloads: length distributions, the draft's standard workloads, traces and arrival processes."""

from infermeter.workload.arrivals import ArrivalSpec, arrival_offsets
from infermeter.workload.spec import RequestClass, Requests, WorkloadSpec, generate
from infermeter.workload.standard import STANDARD, resolve

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
