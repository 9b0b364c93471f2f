"""`.ci/run` builds llama.cpp and installs vLLM while the tests before these run: each module of these waits for its
server's build or install to end (`wait_for`)."""

from __future__ import annotations

import os
import time
from pathlib import Path

BUILD_WAIT_S = 3600.0  # llama.cpp's build on one core at the lowest priority takes 6-20 minutes; vLLM's install 4-10


def wait_for(variable: str, what: str) -> None:
    """Wait until the file `$variable` names holds the exit status of `what` (when it is set), and fail on a failed
    build or install with the tail of its log (beside the status file)."""
    status = os.environ.get(variable)
    if not status:
        return
    path = Path(status)
    deadline = time.monotonic() + BUILD_WAIT_S
    while not path.exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} wrote no {path} within {BUILD_WAIT_S:.0f} s")
        time.sleep(2.0)
    code = path.read_text().strip()
    if code != "0":
        log = path.with_suffix(".log")
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:]) if log.exists() else ""
        raise RuntimeError(f"{what} failed (exit {code}); the end of {log}:\n{tail}")
