"""TTFT and ITL over gRPC (KServe v2 ModelStreamInfer) against HTTP/SSE, on one emulator, one request at a time.

Alternates the transports in blocks so that drift of the machine falls on both; prints p50 and p99 of each and the
difference of the medians (the acceptance figure: within 1 ms).
"""

from __future__ import annotations

import argparse
import asyncio

import numpy as np

from infermeter.client.backend import open_backend
from infermeter.client.openai_sse import ClientConfig, PreparedRequest
from infermeter.emulator import EmulatorConfig
from infermeter.emulator.process import emulator_process
from infermeter.load import LoadPattern, drive
from infermeter.records import RunClock
from infermeter.tokenizers import REFERENCE, resolve_tokenizer
from infermeter.workload.prompts import ExactPrompter

PROMPTS = ExactPrompter(resolve_tokenizer(REFERENCE))  # exact lengths under cl100k_base, as the emulator counts


async def block(target: str, backend: str, reqs: list[PreparedRequest]) -> list:
    client = open_backend(backend, ClientConfig(target, model="infermeter-emulator"), RunClock())
    out: list = []
    await drive(client, reqs, LoadPattern(concurrency=1), out.append)
    await client.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=200, help="per transport")
    parser.add_argument("--block", type=int, default=20)
    args = parser.parse_args()
    # every prompt unique and no prefix cache: neither transport may find the other's work cached
    reqs = {
        b: [PreparedRequest(i, PROMPTS.build(128, i + k * 10**6), 128, 32) for i in range(args.requests)]
        for k, b in enumerate(("openai", "grpc"))
    }
    ttft: dict[str, list[float]] = {"openai": [], "grpc": []}
    itl: dict[str, list[float]] = {"openai": [], "grpc": []}
    with emulator_process(EmulatorConfig(grpc_port=0, prefix_caching=False), pin_cpus=True) as emu:
        targets = {"openai": emu.url, "grpc": emu.grpc_target or ""}
        for start in range(0, args.requests, args.block):
            for backend, target in targets.items():
                for rec in asyncio.run(block(target, backend, reqs[backend][start : start + args.block])):
                    if rec.status == "ok" and rec.token_times:
                        ttft[backend].append(rec.token_times[0] - rec.submitted_at)
                        itl[backend] += list(np.diff(rec.token_times))
    for name, d in (("TTFT", ttft), ("ITL", itl)):
        for backend in ("openai", "grpc"):
            v = np.asarray(d[backend]) * 1e3
            print(
                f"{name:4s} {backend:6s} n={len(v):5d}  p50 {np.median(v):7.3f} ms  p99 {np.percentile(v, 99):7.3f} ms"
            )
        diff = (np.median(d["grpc"]) - np.median(d["openai"])) * 1e3
        print(f"{name:4s} gRPC - SSE at the median: {diff:+.3f} ms")


if __name__ == "__main__":
    main()
