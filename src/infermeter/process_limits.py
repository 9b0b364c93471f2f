"""What a load generator (or the emulator it drives) asks of the operating system: one socket per request in flight,
and on request a real-time scheduling class, so that other tasks on its CPU wait for its idle moments."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass

OPEN_FILES_CAP = 1_048_576


def raise_open_files_limit() -> int:
    """Raise the soft limit on open descriptors to the hard limit (an overloaded run holds one socket per queued
    request: at the common soft limit of 1024 the client fails its own sends); returns the limit in force."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return -1
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = OPEN_FILES_CAP if hard == resource.RLIM_INFINITY else min(hard, OPEN_FILES_CAP)
    if soft == resource.RLIM_INFINITY or soft >= target:
        return soft
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        return target
    return soft


REALTIME_PRIORITY = 1  # SCHED_FIFO's lowest: ahead of every ordinary task, behind the kernel's real-time threads
REALTIME = f"SCHED_FIFO {REALTIME_PRIORITY}"
REALTIME_REFUSED = "--realtime: the real-time class was refused ({}): the load was sent at ordinary priority"
NEEDS = "it needs root, CAP_SYS_NICE or an RLIMIT_RTPRIO (ulimit -r), and a cgroup with a real-time budget"


@dataclass(frozen=True)
class Scheduling:
    """What `realtime` did: the class in force for the block (None: ordinary), or why it was refused."""

    in_force: str | None = None
    refused: str | None = None


@contextlib.contextmanager
def realtime(wanted: bool) -> Iterator[Scheduling]:
    """Run the calling thread at REALTIME for the block when `wanted`, and in its class before afterwards.  Ordinary
    tasks (a kernel thread, an agent polling) otherwise take the CPU for a millisecond at a time between two sends;
    by default Linux keeps 5% of each second for them whatever a real-time thread does (sched_rt_runtime_us)."""
    if not wanted:
        yield Scheduling()
        return
    if not hasattr(os, "sched_setscheduler"):
        yield Scheduling(refused=REALTIME_REFUSED.format("this platform has no SCHED_FIFO"))
        return
    policy, param = os.sched_getscheduler(0), os.sched_getparam(0)
    try:
        # threads and processes started meanwhile (a resolver's, a pool's) are ordinary ones: they outlive the block
        os.sched_setscheduler(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK, os.sched_param(REALTIME_PRIORITY))
    except OSError as exc:
        yield Scheduling(refused=REALTIME_REFUSED.format(f"{exc.strerror or exc}: {NEEDS}"))
        return
    try:
        yield Scheduling(in_force=REALTIME)
    finally:
        _restore(policy, param)


def _restore(policy: int, param: os.sched_param) -> None:
    """Back to the class before.  Without CAP_SYS_NICE (real-time allowed by RLIMIT_RTPRIO) Linux refuses to clear
    SCHED_RESET_ON_FORK, so the class comes back with it kept; never raises (the run's records come next)."""
    for flags in (0, os.SCHED_RESET_ON_FORK):
        with contextlib.suppress(OSError):
            os.sched_setscheduler(0, policy | flags, param)
            return
