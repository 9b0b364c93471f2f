"""Start the emulator in its own process (its own core) on a free loopback port, and stop it afterwards."""

from __future__ import annotations

import contextlib
import ctypes
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from infermeter.emulator.config import EmulatorConfig
from infermeter.errors import UserError

ANNOUNCE = "infermeter emulator listening on "
GRPC_ANNOUNCE = "gRPC KServe v2 on "  # in the same line, after the URL, when the gRPC front end runs


@dataclass(frozen=True)
class EmulatorProcess:
    """A running emulator: its base URL and its process (fault tests kill it)."""

    url: str
    process: subprocess.Popen[str]
    grpc_target: str | None = None  # host:port of the KServe v2 gRPC front end, when configured


@contextlib.contextmanager
def running_emulator(
    config: EmulatorConfig | None = None, timeout_s: float = 30.0, pin_cpus: bool = False
) -> Iterator[str]:
    """Yield the base URL of a freshly started emulator; the process ends when the block does.

    With pin_cpus (and two or more CPUs) the caller keeps the first CPU and the emulator gets the others for the
    duration: on a small VM, client and server migrating across the same cores caused ~8 ms stalls every
    half second, which pinning removes.
    """
    with emulator_process(config, timeout_s, pin_cpus) as emu:
        yield emu.url


@contextlib.contextmanager
def emulator_process(
    config: EmulatorConfig | None = None, timeout_s: float = 30.0, pin_cpus: bool = False
) -> Iterator[EmulatorProcess]:
    """`running_emulator`, yielding the process as well as the URL."""
    config = config or EmulatorConfig()
    with tempfile.TemporaryDirectory() as tmp:
        cfg_path = Path(tmp) / "emulator.json"
        cfg_path.write_text(config.model_dump_json())
        cmd = [sys.executable, "-m", "infermeter", "serve", "--port", "0", "--config", str(cfg_path)]
        log = (Path(tmp) / "stderr.log").open("w")
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            preexec_fn=die_with_parent,
        )
        saved = _pin(proc.pid) if pin_cpus else None
        try:
            url, grpc_target = _wait_for_url(proc, timeout_s, Path(tmp) / "stderr.log")
            yield EmulatorProcess(url, proc, grpc_target)
        finally:
            if saved is not None:
                os.sched_setaffinity(0, saved)
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()


PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """In the child before exec (Linux): SIGTERM when the process that started it dies, even by SIGKILL, so a killed
    benchmark or suite never leaves an emulator serving; SIGINT ignored, so a terminal's Ctrl-C, which reaches the
    whole process group, stops the benchmark (which lets in-flight requests finish) and not the server under it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _pin(child: int) -> set[int] | None:
    """Give this process the first allowed CPU and the child the rest; returns the old affinity to restore."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return None
    saved = set(cpus)
    os.sched_setaffinity(child, set(cpus[1:]))
    os.sched_setaffinity(0, {cpus[0]})
    return saved


def _wait_for_url(proc: subprocess.Popen[str], timeout_s: float, stderr_log: Path) -> tuple[str, str | None]:
    """The HTTP URL the emulator announces, and its gRPC target when it runs one."""
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            lines = stderr_log.read_text().strip().splitlines()
            raise UserError(f"the emulator exited before serving: {lines[-1] if lines else proc.returncode}")
        if sel.select(timeout=0.2):
            line = proc.stdout.readline()
            if line.startswith(ANNOUNCE):
                url, _, rest = line[len(ANNOUNCE) :].strip().partition(f" ({GRPC_ANNOUNCE}")
                return url, rest.rstrip(")") or None
    raise UserError(f"the emulator did not start within {timeout_s:g} s")
