"""Each worker's clock against the coordinator's (the IETF draft, section 4.7.2): round trips over the dask comm,
the sample with the smallest round trip kept.  Processes on one host share CLOCK_MONOTONIC: their offset is zero."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from infermeter.run_info import WorkerClock

if TYPE_CHECKING:
    from distributed import Client

ROUNDS = 16
METHOD = f"round trips over the dask comm, the minimum-round-trip sample of {ROUNDS}"
SAME_HOST = "one host: the worker shares the coordinator's monotonic clock (CLOCK_MONOTONIC)"


@dataclass(frozen=True)
class Estimate:
    """remote clock - local clock (at the middle of the round trip), and that round trip's length."""

    offset_s: float
    rtt_s: float


def estimate(
    read_remote: Callable[[], float], local: Callable[[], float] = time.perf_counter, rounds: int = ROUNDS
) -> Estimate:
    """The offset from the round trip with the smallest length: its error is at most half that round trip."""
    best: Estimate | None = None
    for _ in range(rounds):
        t1 = local()
        remote = read_remote()
        t2 = local()
        if best is None or t2 - t1 < best.rtt_s:
            best = Estimate(remote - (t1 + t2) / 2, t2 - t1)
    assert best is not None
    return best


def host_identity() -> str:
    """This machine: its host name and boot id (two containers on one kernel share the boot id and the clock)."""
    boot = Path("/proc/sys/kernel/random/boot_id")
    try:
        boot_id = boot.read_text().strip()
    except OSError:
        boot_id = ""
    return f"{socket.gethostname()}/{boot_id}"


def reading() -> tuple[float, str]:
    """Run on a worker: its monotonic clock now, and its host."""
    return time.perf_counter(), host_identity()


def measure(client: Client, address: str, rounds: int = ROUNDS) -> tuple[Estimate, str]:
    """A worker's offset to this process's clock, and the worker's host."""
    host = [""]

    def read() -> float:
        value, host[0] = client.run(reading, workers=[address])[address]
        return float(value)

    return estimate(read, rounds=rounds), host[0]


def placed(before: Estimate, after: Estimate | None, same_host: bool) -> WorkerClock:
    """run.json's account of a worker's clock: zero offset on one host; else the offset before the run, with an
    accuracy of half the longer round trip plus the drift between before and after."""
    if same_host:
        return WorkerClock(
            method=SAME_HOST, same_host=True, offset_s=0.0, accuracy_s=0.0, rtt_s_before=before.rtt_s,
            rtt_s_after=after.rtt_s if after else None, drift_s=0.0 if after else None,
        )  # fmt: skip
    drift = after.offset_s - before.offset_s if after else None
    half = max(before.rtt_s, after.rtt_s if after else 0.0) / 2
    return WorkerClock(
        method=METHOD, same_host=False, offset_s=before.offset_s, accuracy_s=half + abs(drift or 0.0),
        rtt_s_before=before.rtt_s, rtt_s_after=after.rtt_s if after else None, drift_s=drift,
    )  # fmt: skip
