"""One entry point from user options to (requests, declaration): standard/custom workloads or traces + arrivals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from infermeter.errors import UserError
from infermeter.workload.arrivals import ArrivalSpec, arrival_offsets
from infermeter.workload.content import describe
from infermeter.workload.limits import RATE_PROCESSES
from infermeter.workload.spec import Requests, generate
from infermeter.workload.standard import fixed_lengths, resolve
from infermeter.workload.traces import load_burstgpt


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
    """Requests with arrival offsets, and the declaration run.json keeps (workload, seed, arrival process).

    With a trace, lengths and arrival times both come from it (arrivals compressed rps_scale times) unless
    `arrivals` names a rate process, which then replaces the trace's timestamps.
    """
    if trace is not None:
        try:
            requests = load_burstgpt(trace, n, rps_scale=rps_scale)
        except UserError as exc:
            raise UserError(f"--trace {exc}") from None
        declaration: dict[str, Any] = {
            "name": f"trace:{trace.name}",
            "seed": seed,
            "source": str(trace),
            "content": describe("words"),
            "notes": ["lengths and arrival times replayed from a BurstGPT-format trace, sorted by timestamp"],
        }
        if arrivals is None or arrivals.kind == "trace":
            arrivals = ArrivalSpec(kind="trace", time_scale=rps_scale)
        else:
            requests.arrival_s = arrival_offsets(arrivals, len(requests), seed)
    else:
        if input_tokens is not None or output_tokens is not None:
            if workload is not None or input_tokens is None or output_tokens is None:
                raise UserError("give either --workload, or both --input-tokens and --output-tokens")
            spec = fixed_lengths(input_tokens, output_tokens)
        else:
            spec = resolve(workload or "synthetic-uniform")
        requests = generate(spec, n, seed)
        declaration = spec.declaration(seed)
        if arrivals is not None:
            if arrivals.kind == "trace":
                raise UserError("trace arrivals need --trace FILE")
            requests.arrival_s = arrival_offsets(arrivals, n, seed)
    declaration["arrivals"] = (
        None if arrivals is None else {**arrivals.model_dump(), "description": arrivals.describe()}
    )
    return requests, declaration
