"""What a load generator (or the emulator it drives) asks of the operating system: one socket per request in flight,
and on request a real-time scheduling class, so that other tasks on its CPU wait for its idle moments."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

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


@contextlib.contextmanager
def realtime(wanted: bool) -> Iterator[str | None]:
    """Run the calling thread at REALTIME for the block when `wanted`, and as before afterwards.  Yields None when
    not wanted, REALTIME when in force, else why not (not Linux, or no root / CAP_SYS_NICE).  Ordinary tasks (a
    kernel thread, an agent polling) otherwise take the CPU for milliseconds at a time between two sends; Linux keeps
    5% of each second for them whatever a real-time thread does (sched_rt_runtime_us)."""
    if not wanted:
        yield None
        return
    if not hasattr(os, "sched_setscheduler"):
        yield REALTIME_REFUSED.format("this platform has no SCHED_FIFO")
        return
    policy, param = os.sched_getscheduler(0), os.sched_getparam(0)
    try:
        # threads and processes started meanwhile (a resolver's, a pool's) are ordinary ones: they outlive the block
        os.sched_setscheduler(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK, os.sched_param(REALTIME_PRIORITY))
    except OSError as exc:
        yield REALTIME_REFUSED.format(f"{exc.strerror or exc}: it needs root or CAP_SYS_NICE")
        return
    try:
        yield REALTIME
    finally:
        os.sched_setscheduler(0, policy, param)
