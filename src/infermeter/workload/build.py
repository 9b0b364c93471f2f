"""From user options to (requests, declaration): standard/custom workloads or traces, and their arrivals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from infermeter.errors import UserError
from infermeter.workload.arrivals import ArrivalSpec
from infermeter.workload.limits import RATE_PROCESSES
from infermeter.workload.source import WorkloadSource
from infermeter.workload.spec import Requests


def arrival_spec(kind: str, rate: float | None, burstiness: float = 1.0, time_scale: float = 1.0) -> ArrivalSpec:
    """Validate rate-driven arrival options into a spec, with the fix named in the error (traces come from
    --trace, not --arrival)."""
    if kind not in RATE_PROCESSES:
        raise UserError(f"--arrival must be one of {', '.join(RATE_PROCESSES)}, got '{kind}'")
    try:
        return ArrivalSpec.model_validate(
            {"kind": kind, "rate": rate, "burstiness": burstiness, "time_scale": time_scale}
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(x) for x in first["loc"])
        msg = first["msg"].removeprefix("Value error, ")
        raise UserError(f"arrival options: {f'--{field}: ' if field else ''}{msg}") from None


def build_requests(
    n: int,
    seed: int,
    workload: str | None = None,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    arrivals: ArrivalSpec | None = None,
    trace: Path | None = None,
    rps_scale: float = 1.0,
) -> tuple[Requests, dict[str, Any]]:
    """Requests with arrival offsets, and the declaration run.json keeps (workload, seed, arrival process): the
    source's draw (workload/source.py) for callers that read it once.

    With a trace, lengths and arrival times both come from it (arrivals compressed rps_scale times) unless
    `arrivals` names a rate process, which then replaces the trace's timestamps.
    """
    if trace is not None:
        source = WorkloadSource.burstgpt(trace)
    else:
        source = WorkloadSource.named(workload, input_tokens, output_tokens)
    if arrivals is not None and arrivals.kind == "trace" and trace is None:
        raise UserError("trace arrivals need --trace FILE")
    return source.draw(n, seed, arrivals, rps_scale)
