"""Per-process limits a load generator (or the emulator it drives) must lift: one socket per request in flight."""

from __future__ import annotations

import contextlib

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
