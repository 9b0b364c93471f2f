"""Time building a run's exact-length prompts, per standard workload (each is built lazily while the load runs, so
its cost is load-generator CPU).

For each workload: draw N requests, build every prompt to its exact token count under cl100k_base (as
`infermeter run` does), and print the best of three: seconds in all, milliseconds per prompt, prompts per second
and mean input tokens.  `--chat` builds them inside a chat template.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from infermeter.load.prompts import prepared
from infermeter.tokenizers import resolve_tokenizer
from infermeter.workload.build import build_requests
from infermeter.workload.prompts import ExactPrompter

WORKLOADS = ("synthetic-uniform", "conversation", "code-completion", "synthetic-skewed")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--workloads", nargs="+", default=list(WORKLOADS))
    ap.add_argument("--tokenizer", default="cl100k_base")
    ap.add_argument("--chat", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    tok = resolve_tokenizer(args.tokenizer)
    print(f"{args.requests} prompts per workload under {args.tokenizer}{' (chat)' if args.chat else ''}")
    print(f"{'workload':<20} {'seconds':>8} {'ms/prompt':>10} {'prompts/s':>10} {'mean tokens':>12}")
    for name in args.workloads:
        requests, _ = build_requests(args.requests, 1, workload=name)
        best = float("inf")
        for _ in range(args.repeat):
            prompter = ExactPrompter(tok, chat=args.chat, seed=1)  # a fresh prompter: no counts cached across runs
            t0 = time.perf_counter()
            built = sum(1 for _ in prepared(requests, 1, prompter=prompter))
            best = min(best, time.perf_counter() - t0)
        assert built == args.requests
        mean = float(np.mean(requests.input_tokens))
        print(f"{name:<20} {best:8.2f} {best / built * 1000:10.3f} {built / best:10.0f} {mean:12.0f}")


if __name__ == "__main__":
    main()
