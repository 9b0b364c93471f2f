"""Is the load generator the bottleneck?  Its own event loop's lag, the CPU its loop thread used and how late it
started its sends, measured through every run, and the verdict (draft 4.2.5: the load generator must keep its
schedule, or the figures are bounds on the client, not measurements of the server).

A run is client-bound when any threshold below is crossed; README ("Is the client the bottleneck?") states them.
CPU time the host steals is not the client's, so a noisy machine inflates the lags but not the CPU share; the lag
thresholds are on medians and shares of sends, not on single stalls.  On Linux the figures also say who else had the
client's CPU: how long the loop thread waited behind other tasks (schedstat) and what the hypervisor stole.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from array import array
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import numpy as np

from infermeter.run_info import ClientHealth

TICK_S = 0.001  # the ticker's period
CPU_BOUND = 0.90  # the loop thread busy this share of the load's wall time
TICK_LAG_P50_MS = 2.0  # half the ticks this much late: the loop is rarely idle
SEND_LAG_MS = 5.0  # a send started this much after its scheduled time is late ...
LATE_SHARE = 0.05  # ... and more than this share of sends late is falling behind


@dataclass
class HealthProbe:
    """Collects while the load runs: tick lags, the loop thread's CPU, and each send's dispatch lag."""

    tick_lag: array[float] = field(default_factory=lambda: array("d"))
    send_lag: array[float] = field(default_factory=lambda: array("d"))  # open loop: started - scheduled, seconds
    cpu_s: float = 0.0
    wall_s: float = 0.0
    wait_s: float | None = None  # the loop thread runnable but not running (Linux)
    steal_s: float | None = None  # stolen by the hypervisor from the CPUs the client may run on (Linux)

    def sent(self, lag_s: float) -> None:
        self.send_lag.append(lag_s)

    def health(self) -> ClientHealth:
        """The figures and the verdict."""
        ticks = np.frombuffer(self.tick_lag, dtype=np.float64) * 1e3
        sends = np.frombuffer(self.send_lag, dtype=np.float64) * 1e3
        cpu = self.cpu_s / self.wall_s if self.wall_s > 0 else 0.0
        reasons: list[str] = []
        if cpu >= CPU_BOUND:
            reasons.append(f"its event loop was busy {cpu:.0%} of the time (threshold {CPU_BOUND:.0%})")
        tick_p50 = float(np.median(ticks)) if ticks.size else None
        if tick_p50 is not None and tick_p50 > TICK_LAG_P50_MS:
            reasons.append(f"its 1 ms ticker ran {tick_p50:.1f} ms late at the median (threshold {TICK_LAG_P50_MS:g})")
        late = float(np.mean(sends > SEND_LAG_MS)) if sends.size else None
        if late is not None and late > LATE_SHARE:
            reasons.append(
                f"{late:.1%} of sends started more than {SEND_LAG_MS:g} ms after their scheduled time "
                f"(threshold {LATE_SHARE:.0%})"
            )
        tail = sends[-max(1, sends.size // 10) :] if sends.size else sends
        return ClientHealth(
            bound=bool(reasons),
            reasons=reasons,
            cpu_fraction=round(cpu, 4),
            tick_lag_ms_p50=tick_p50,
            tick_lag_ms_p99=float(np.percentile(ticks, 99)) if ticks.size else None,
            tick_lag_ms_max=float(ticks.max()) if ticks.size else None,
            send_lag_ms_p50=float(np.median(sends)) if sends.size else None,
            send_lag_ms_p99=float(np.percentile(sends, 99)) if sends.size else None,
            late_sends=late,
            behind_at_end_ms=float(np.median(tail)) if sends.size else None,
            cpu_wait_ms=round(self.wait_s * 1e3, 3) if self.wait_s is not None else None,
            steal_ms=round(self.steal_s * 1e3, 3) if self.steal_s is not None else None,
        )


def runqueue_wait_s() -> float | None:
    """How long the calling thread has been runnable but not running since it started (Linux schedstat), or None."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


def steal_s(cpus: set[int] | None = None) -> float | None:
    """CPU time the hypervisor has taken from `cpus` (default: those this process may run on) since boot, from
    /proc/stat's steal column (USER_HZ ticks), or None off Linux."""
    try:
        with open("/proc/stat") as f:
            stat = f.read()
        return steal_from(stat, os.sched_getaffinity(0) if cpus is None else cpus) / os.sysconf("SC_CLK_TCK")
    except (OSError, AttributeError, ValueError):
        return None


def steal_from(stat: str, cpus: set[int]) -> int:
    """The steal ticks of `cpus` in a /proc/stat text (its eighth number on each `cpuN` line)."""
    total = 0
    for line in stat.splitlines():
        name, _, rest = line.partition(" ")
        if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus:
            total += int(rest.split()[7])
    return total


async def _tick(probe: HealthProbe) -> None:
    """Asks to wake every TICK_S and keeps how late each wake-up was (libuv's millisecond timers add up to ~1 ms)."""
    perf, lags = time.perf_counter, probe.tick_lag
    before = perf()
    while True:
        await asyncio.sleep(TICK_S)
        now = perf()
        lags.append(max(0.0, now - before - TICK_S))
        before = now


@contextlib.asynccontextmanager
async def watched() -> AsyncIterator[HealthProbe]:
    """Measure the client while the block runs (on the loop's own thread)."""
    probe = HealthProbe()
    wait0, steal0 = runqueue_wait_s(), steal_s()
    cpu0, wall0 = time.thread_time(), time.perf_counter()
    ticker = asyncio.create_task(_tick(probe))
    try:
        yield probe
    finally:
        ticker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ticker
        probe.cpu_s, probe.wall_s = time.thread_time() - cpu0, time.perf_counter() - wall0
        wait, steal = runqueue_wait_s(), steal_s()
        probe.wait_s = wait - wait0 if wait is not None and wait0 is not None else None
        probe.steal_s = steal - steal0 if steal is not None and steal0 is not None else None
