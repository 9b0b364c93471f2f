"""The iterative search of the draft's sections 5.2.3 and 5.5.3: grow the load while it passes, then bisect between
the last pass and the first failure.  Probe values are rounded (4 significant digits, or whole numbers for
concurrency) so that a resumed suite asks for the same runs and its decisions replay identically."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Probe:
    value: float
    passed: bool


@dataclass
class Bracket:
    """The highest value that passed (None: even the lowest failed), the lowest that failed (None: none did), every
    probe in the order it ran, and why the search stopped when it did not converge."""

    passed: float | None
    failed: float | None
    probes: list[Probe] = field(default_factory=list)
    note: str = ""


def rounded(value: float, integer: bool) -> float:
    return float(max(1, round(value))) if integer else float(f"{value:.4g}")


def bisect(
    check: Callable[[float], bool],
    start: float,
    maximum: float,
    *,
    minimum: float | None = None,
    growth: float = 2.0,
    tolerance: float = 0.05,
    max_probes: int = 12,
    integer: bool = False,
) -> Bracket:
    """Find the highest value in [minimum, maximum] for which `check` passes, assuming passing is monotone."""
    out = Bracket(None, None)
    lowest = minimum if minimum is not None else (1.0 if integer else start / 64)

    def probe(x: float) -> bool:
        x = rounded(x, integer)
        ok = check(x)
        out.probes.append(Probe(x, ok))
        if ok:
            out.passed = x if out.passed is None else max(out.passed, x)
        else:
            out.failed = x if out.failed is None else min(out.failed, x)
        return ok

    x = rounded(start, integer)
    while len(out.probes) < max_probes:  # grow while passing
        if not probe(x):
            break
        if x >= maximum:
            out.note = f"every probe passed up to the maximum {maximum:g}"
            return out
        x = rounded(min(x * growth, maximum), integer)
    while out.passed is None and len(out.probes) < max_probes:  # the first probe failed: shrink
        x = rounded(x / growth, integer)
        if x < lowest or (out.failed is not None and x >= out.failed):
            out.note = f"even the lowest load probed ({out.failed:g}) failed"
            return out
        probe(x)

    def converged() -> bool:
        lo, hi = out.passed, out.failed
        assert lo is not None and hi is not None
        return hi - lo <= 1 if integer else (hi - lo) / hi <= tolerance

    while out.passed is not None and out.failed is not None and not converged():
        if len(out.probes) >= max_probes:
            out.note = f"stopped after {max_probes} probes with [{out.passed:g}, {out.failed:g}] not yet converged"
            break
        mid = rounded((out.passed + out.failed) / 2, integer)
        if mid in (out.passed, out.failed):
            break
        probe(mid)
    return out
