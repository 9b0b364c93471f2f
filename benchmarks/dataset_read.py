"""Time reading a ShareGPT-sized dataset and drawing a run's requests from it (`--dataset`, before the run starts).

Writes a ShareGPT JSON of N conversations (2-8 messages each, text of real-dump size) into a temporary directory,
then prints the best of `--repeat`: the seconds `read_dataset` takes (parse, validate, hash), the seconds
`dataset_requests` takes to draw `--sample` requests (counting prompts and replies under cl100k_base), and the
seconds to build those requests' prompts (`prepared`, as the run sends them).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson

from infermeter.load.prompts import prepared
from infermeter.tokenizers import resolve_tokenizer
from infermeter.workload.dataset_requests import DatasetChoice, dataset_requests
from infermeter.workload.datasets import read_dataset
from infermeter.workload.prompts import ExactPrompter

WORDS = ("the", "of", "and", "to", "in", "is", "was", "for", "that", "on", "as", "with", "by", "he", "at", "from")


def write_sharegpt(path: Path, conversations: int, seed: int = 0) -> int:
    """A ShareGPT file of that many conversations; returns its size in bytes."""
    rng = np.random.default_rng(seed)
    vocab = np.asarray(WORDS, dtype=object)
    data = []
    for c in range(conversations):
        messages = []
        for _ in range(int(rng.integers(1, 5))):
            human = " ".join(vocab[rng.integers(0, len(vocab), int(rng.lognormal(4.0, 1.0)) + 1)])
            gpt = " ".join(vocab[rng.integers(0, len(vocab), int(rng.lognormal(5.0, 0.8)) + 1)])
            messages += [{"from": "human", "value": human}, {"from": "gpt", "value": gpt}]
        data.append({"id": f"c{c}", "conversations": messages})
    path.write_bytes(orjson.dumps(data))
    return path.stat().st_size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--conversations", type=int, default=90_000)
    ap.add_argument("--sample", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    tok = resolve_tokenizer("cl100k_base")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sharegpt.json"
        size = write_sharegpt(path, args.conversations)
        reads, draws, builds = [], [], []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            ds = read_dataset(path)
            t1 = time.perf_counter()
            requests, _ = dataset_requests(ds, tok, DatasetChoice(sample=args.sample), seed=42)
            t2 = time.perf_counter()
            built = list(prepared(requests, 42, prompter=ExactPrompter(tok)))
            t3 = time.perf_counter()
            reads.append(t1 - t0)
            draws.append(t2 - t1)
            builds.append(t3 - t2)
    print(f"ShareGPT file: {args.conversations:,} conversations, {size / 1e6:.0f} MB")
    print(f"read_dataset (parse, validate, sha256):      {min(reads):.2f} s")
    print(f"dataset_requests, --dataset-sample {args.sample}:    {min(draws):.3f} s")
    print(f"prepared prompts ({len(built)} requests):           {min(builds):.3f} s")


if __name__ == "__main__":
    main()
