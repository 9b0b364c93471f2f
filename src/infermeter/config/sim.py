"""A simulation's requests and load from the workload and load options (`sim`, `predict`, `sim-sweep`): the same
options as a live run's, with a simulation's reading of them (a trace replaces the command's default workload)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from infermeter.config.section import Given
from infermeter.config.sections import Load, Workload

if TYPE_CHECKING:
    from infermeter.sim.requests import RequestSource


def simulated_load(given: Given) -> tuple[RequestSource, Load]:
    """Where the requests come from, and the load options as given (requests, rate, concurrency...)."""
    from infermeter.sim.requests import RequestSource

    values = dict(given.get("workload", {}))
    if "trace" in values or "dataset" in values:  # the file gives the lengths: the command's default workload is not
        values.pop("workload", None)
    workload = Workload.from_options(values)
    load = Load.from_options(given.get("load", {}))
    dataset = None
    if workload.dataset is not None:
        from infermeter.workload.source import WorkloadSource

        dataset = WorkloadSource.read(workload)
    source = RequestSource(
        seed=workload.seed,
        workload=workload.workload,
        trace=workload.trace,
        rps_scale=workload.rps_scale,
        rate=load.rate,
        arrival=load.arrival,
        burstiness=load.burstiness,
        dataset=dataset,
    )
    return source, load
