"""How closely the emulator's own token times (option C) agree with the client's at low load.

Requests go one at a time; for every token, client receive time minus server emission time once both are on the
run clock (anchored at the response headers).  Acceptance: within 2 ms.
"""

from __future__ import annotations

import argparse
import asyncio

import numpy as np

from infermeter.client import ClientConfig, OpenAIClient, PreparedRequest
from infermeter.emulator import EmulatorConfig, running_emulator
from infermeter.load import LoadPattern, drive
from infermeter.records import RunClock
from infermeter.tokenizers import REFERENCE, resolve_tokenizer
from infermeter.workload.prompts import ExactPrompter

PROMPTS = ExactPrompter(resolve_tokenizer(REFERENCE))  # exact lengths under cl100k_base, as the emulator counts


async def measure(url: str, n: int, tokens: int) -> np.ndarray:
    client = OpenAIClient(ClientConfig(url, model="infermeter-emulator"), RunClock())
    reqs = [PreparedRequest(i, PROMPTS.build(64, i), 64, tokens) for i in range(n)]
    records = []
    await drive(client, reqs, LoadPattern(concurrency=1), records.append)
    await client.close()
    return np.concatenate([np.subtract(r.token_times, r.server_token_times) for r in records if r.status == "ok"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--tokens", type=int, default=32)
    args = parser.parse_args()
    with running_emulator(EmulatorConfig()) as url:
        diff = asyncio.run(measure(url, args.requests, args.tokens)) * 1000
    p50, p99 = np.percentile(diff, [50, 99])
    print(
        f"client - server token time over {diff.size:,} tokens (ms): min {diff.min():.3f}  median {p50:.3f}  "
        f"p99 {p99:.3f}  max {diff.max():.3f}   (target: within 2 ms)"
    )


if __name__ == "__main__":
    main()
