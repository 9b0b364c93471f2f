"""The test suites by name (`infermeter test NAME`): each lives in its own module, imported when it is asked for."""

from __future__ import annotations

import importlib

from infermeter.errors import UserError
from infermeter.suites.framework import Suite

# name -> (module, the draft's section, one line for --list); the module defines SUITE
SUITES: dict[str, tuple[str, str, str]] = {
    "ttft": ("infermeter.suites.ttft", "5.1", "time to first token: Tables 1-2, queue and prefill components"),
    "throughput": ("infermeter.suites.throughput", "5.2", "search for the maximum sustainable load (Tables 3-4)"),
    "tradeoff": ("infermeter.suites.tradeoff", "5.3", "open loop at 10%..120% of capacity: Table 5, knee, saturation"),
    "itl": ("infermeter.suites.itl", "5.4", "ITL at 25/50/75/90% of saturation: Table 6, jitter, pauses, modality"),
    "long-context": ("infermeter.suites.long_context", "5.9", "TTFT against context length: Table 12, scaling fits"),
    "capacity": ("infermeter.suites.concurrency", "5.5", "closed-loop search for the maximum concurrency (Table 7)"),
    "fairness": ("infermeter.suites.fairness", "5.6", "short and long classes alone and mixed (Tables 8-9)"),
    "prefix-cache": (
        "infermeter.suites.prefix_cache",
        "5.7",
        "cache disabled, cold and warm: TTFT reduction (Table 10)",
    ),
    "memory-pressure": ("infermeter.suites.memory_pressure", "5.8", "100-150% of capacity: preemption (Table 11)"),
    "guardrail": (
        "infermeter.suites.guardrail",
        "5.10",
        "guardrail configurations at 25-75% of capacity (Tables 13-14)",
    ),
    "grid": ("infermeter.suites.grid", "exo", "exo bench's grid: prompt x generation x concurrency, repeats"),
    "twin": (
        "infermeter.suites.twin",
        "twin",
        "calibrate the engine model over HTTP, then predict and measure at 30/60/90% of capacity",
    ),
}


def get_suite(name: str) -> Suite:
    if name not in SUITES:
        raise UserError(f"no test suite named {name!r}: the suites are {', '.join(SUITES)} (infermeter test --list)")
    module = importlib.import_module(SUITES[name][0])
    return module.SUITE  # type: ignore[no-any-return]
