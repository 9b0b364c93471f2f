"""The test suites by name (`infermeter test NAME`): each lives in its own module, imported when it is asked for;
another package adds one with an entry point in `infermeter.suites` naming its suite object."""

from __future__ import annotations

from typing import Any

from infermeter.errors import UserError
from infermeter.plugins import Entry, Registry
from infermeter.suites.framework import Suite

SUITE_PARTS = (
    "name",
    "section",
    "reference",
    "title",
    "summary",
    "params",
    "emulator",
    "procedure",
    "analyze",
    "requirements",
)


def _a_suite(name: str, obj: Any) -> str | None:
    """What keeps another package's entry from being the suite `name` (None: nothing)."""
    missing = [part for part in SUITE_PARTS if not hasattr(obj, part)]
    if missing:
        return f"it is not a suite (it has no {', '.join(missing)})"
    return None if obj.name == name else f"its suite's name is {obj.name!r}, not {name!r}"


def _entry(name: str, module: str, line: str) -> Entry[Suite]:
    """One of infermeter's suites: the module defines SUITE; `line` is what `infermeter test --list` says of it."""
    return Entry(name, f"infermeter.suites.{module}:SUITE", line)


SUITES: Registry[Suite] = Registry(
    "suite",
    [
        _entry("ttft", "ttft", "time to first token: Tables 1-2, queue and prefill components"),
        _entry("throughput", "throughput", "search for the maximum sustainable load (Tables 3-4)"),
        _entry("tradeoff", "tradeoff", "open loop at 10%..120% of capacity: Table 5, knee, saturation"),
        _entry("itl", "itl", "ITL at 25/50/75/90% of saturation: Table 6, jitter, pauses, modality"),
        _entry("long-context", "long_context", "TTFT against context length: Table 12, scaling fits"),
        _entry("capacity", "concurrency", "closed-loop search for the maximum concurrency (Table 7)"),
        _entry("fairness", "fairness", "short and long classes alone and mixed (Tables 8-9)"),
        _entry("prefix-cache", "prefix_cache", "cache disabled, cold and warm: TTFT reduction (Table 10)"),
        _entry("memory-pressure", "memory_pressure", "100-150% of capacity: preemption (Table 11)"),
        _entry("guardrail", "guardrail", "guardrail configurations at 25-75% of capacity (Tables 13-14)"),
        _entry("grid", "grid", "exo bench's grid: prompt x generation x concurrency, repeats"),
        _entry(
            "twin", "twin", "calibrate the engine model over HTTP, then predict and measure at 30/60/90% of capacity"
        ),
    ],
    check=_a_suite,
    describe=lambda suite: suite.summary,
)


def get_suite(name: str) -> Suite:
    suite = SUITES.load(name)
    if suite is None:
        raise UserError(f"no test suite named {name!r}: the suites are {', '.join(SUITES)} (infermeter test --list)")
    return suite
