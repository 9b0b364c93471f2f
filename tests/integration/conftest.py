"""`.ci/run` builds llama.cpp while the tests before these run: each of these waits for that build to end."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

BUILD_WAIT_S = 3600.0  # the build on one core at the lowest priority takes 6-20 minutes


@pytest.fixture(scope="session", autouse=True)
def llama_cpp_built() -> None:
    """Wait until the file `$INFERMETER_LLAMA_BUILD_STATUS` holds the build's exit status (when set), and fail on a
    failed build with the tail of its log."""
    status = os.environ.get("INFERMETER_LLAMA_BUILD_STATUS")
    if not status:
        return
    path = Path(status)
    deadline = time.monotonic() + BUILD_WAIT_S
    while not path.exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"llama.cpp's build wrote no {path} within {BUILD_WAIT_S:.0f} s")
        time.sleep(2.0)
    code = path.read_text().strip()
    if code != "0":
        log = path.with_name("build.log")
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:]) if log.exists() else ""
        raise RuntimeError(f"llama.cpp's build failed (exit {code}); the end of {log}:\n{tail}")
