"""Wall-clock tests on a noisy machine: measure how late the machine runs a sleeping process during the test, hold
tail figures to that noise, and measure once more when a failing check coincided with a disturbance.

A shared VM loses whole milliseconds (sometimes seconds) to its host.  A tight bound on every sample is then an
assertion about the host's scheduler, not about infermeter.  Systematic checks (a median, an offset, a count) stay
tight; tail checks get `noise.allowance_s` added, the longest time the probe saw a CPU withheld from a ready process.

The probe is a separate process (no GIL shared with the test) with one thread pinned to each CPU the test may run
on; each thread sleeps 1 ms in a loop and records how late it woke.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

DISTURBED_S = 0.001  # a sleeping process woken a millisecond late: the machine was busy elsewhere
PERIOD_S = 0.001

_PROBE = r"""
import json, os, sys, threading, time
period = float(sys.argv[1])
cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [None]
stop = threading.Event()
late = {c: [] for c in cpus}
def probe(cpu):
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})  # pid 0 is the calling thread on Linux
    out = late[cpu]
    while not stop.is_set():
        t = time.perf_counter()
        time.sleep(period)
        out.append(time.perf_counter() - t - period)
threads = [threading.Thread(target=probe, args=(c,), daemon=True) for c in cpus]
for t in threads:
    t.start()
print("ready", flush=True)
sys.stdin.read()
stop.set()
for t in threads:
    t.join()
print(json.dumps({str(c): v for c, v in late.items()}))
"""


@dataclass(frozen=True)
class Noise:
    """How late 1 ms sleeps woke during a measurement, over every CPU."""

    sleeps: int
    p50_s: float
    p99_s: float
    max_s: float
    cpus: int

    @property
    def disturbed(self) -> bool:
        return self.max_s > DISTURBED_S

    @property
    def allowance_s(self) -> float:
        """What a tail bound may add for this machine: twice the longest stall (one on each side of a socket)."""
        return 2 * self.max_s

    def describe(self) -> str:
        return (
            f"machine noise: {self.sleeps:,} sleeps of 1 ms on {self.cpus} CPU(s) woke late by p50 "
            f"{self.p50_s * 1e3:.2f} ms, p99 {self.p99_s * 1e3:.2f} ms, max {self.max_s * 1e3:.2f} ms"
            + (" (disturbed)" if self.disturbed else "")
        )


class NoiseProbe:
    """Context manager: the probe runs for the duration of the block; `.noise` afterwards."""

    noise: Noise

    def __enter__(self) -> NoiseProbe:
        self._proc = subprocess.Popen(
            [sys.executable, "-I", "-c", _PROBE, str(PERIOD_S)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._proc.stdout is not None
        self._proc.stdout.readline()  # "ready": every thread is pinned and sleeping
        return self

    def __exit__(self, *exc: object) -> None:
        out, _ = self._proc.communicate(timeout=30)
        per_cpu = json.loads(out)
        late = sorted(x for v in per_cpu.values() for x in v)
        if not late:
            late = [0.0]

        def q(p: float) -> float:
            return max(0.0, late[min(len(late) - 1, int(p * len(late)))])

        self.noise = Noise(len(late), q(0.5), q(0.99), max(0.0, late[-1]), len(per_cpu))


def _failure(exc: AssertionError, noises: list[Noise]) -> AssertionError:
    lines = [str(exc)]
    for k, noise in enumerate(noises, 1):
        retried = " -> measured again" if k < len(noises) else ""
        lines.append(f"attempt {k}: {noise.describe()}{retried}")
    if len(noises) == 1:
        lines.append("the machine was quiet: this is not scheduling noise")
    return AssertionError("\n".join(lines))


def _judge(result: T, check: Callable[[T, Noise], None], noises: list[Noise], attempts: int) -> bool:
    """True when the check passed; False when the machine was disturbed and another attempt is due; else raise."""
    try:
        check(result, noises[-1])
        return True
    except AssertionError as exc:
        if len(noises) >= attempts or not noises[-1].disturbed:
            raise _failure(exc, noises) from None
        return False


def measured(measure: Callable[[], T], check: Callable[[T, Noise], None], attempts: int = 2) -> T:
    """Run `measure()` under the probe, then `check(result, noise)`.  A failed check is measured once more only when
    the probe saw the machine disturbed; the failure message carries the probe's figures for every attempt."""
    noises: list[Noise] = []
    while True:
        with NoiseProbe() as probe:
            result = measure()
        noises.append(probe.noise)
        if _judge(result, check, noises, attempts):
            return result


async def measured_async(
    measure: Callable[[], Awaitable[T]], check: Callable[[T, Noise], None], attempts: int = 2
) -> T:
    """`measured` for a coroutine measurement inside a running event loop."""
    noises: list[Noise] = []
    while True:
        with NoiseProbe() as probe:
            result = await measure()
        noises.append(probe.noise)
        if _judge(result, check, noises, attempts):
            return result
