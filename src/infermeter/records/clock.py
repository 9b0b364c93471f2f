"""The run's one clock, and its anchor on the machine's monotonic and wall clocks (written to run.json)."""

from __future__ import annotations

import time

from infermeter.run_info import ClockAnchor


class RunClock:
    """The run's one monotonic clock: seconds since the run started (time.perf_counter, CLOCK_MONOTONIC)."""

    def __init__(self, origin: float | None = None) -> None:
        """`origin`: the perf_counter value that is the run's 0 (a worker process takes its coordinator's)."""
        self.t0 = time.perf_counter() if origin is None else origin

    def now(self) -> float:
        return time.perf_counter() - self.t0

    def at(self, perf_counter_value: float) -> float:
        return perf_counter_value - self.t0

    def anchor(self, tries: int = 7) -> ClockAnchor:
        """Run-clock 0 on CLOCK_MONOTONIC and on the wall clock, in nanoseconds: the monotonic read taken between
        two wall-clock reads, the tightest pair of `tries` (a preemption between reads widens only that pair)."""
        best: tuple[int, int, int] | None = None
        for _ in range(tries):
            w0 = time.time_ns()
            m = time.perf_counter_ns()
            w1 = time.time_ns()
            if best is None or w1 - w0 < best[2]:
                best = (m, (w0 + w1) // 2, w1 - w0)
        assert best is not None
        m, wall, spread = best
        origin = round(self.t0 * 1e9)
        return ClockAnchor(monotonic_ns=origin, wall_ns=wall - (m - origin), uncertainty_ns=(spread + 1) // 2)
