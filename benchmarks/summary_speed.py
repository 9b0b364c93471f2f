"""Time the full summary of 100,000 requests x 256 tokens (target: under 3 s on this 2-core machine).

Builds the records columnar (as a run's records.parquet holds them), writes them to a run directory, then
times: (1) summarize from the in-memory table, (2) read records.parquet + columns + summarize, as
`infermeter report` does.  Prints the best of three for each.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from infermeter.metrics import RecordColumns, summarize
from infermeter.records import LATER_FIELDS, SCHEMA, RunInfo, read_records, write_records


def synthetic_table(n: int, tokens: int, seed: int = 0) -> pa.Table:
    """n successful requests of `tokens` tokens each, one token per chunk, realistic jittered gaps."""
    rng = np.random.default_rng(seed)
    submitted = np.sort(rng.uniform(0, n / 50.0, n))
    ttft = rng.lognormal(np.log(0.2), 0.5, n)
    gaps = rng.gamma(4.0, 0.005, (n, tokens))
    gaps[:, 0] = 0
    times = (submitted + ttft)[:, None] + np.cumsum(gaps, axis=1)
    offsets = pa.array(np.arange(0, n * tokens + 1, tokens, dtype=np.int32))
    flat = times.ravel()
    token_times = pa.ListArray.from_arrays(offsets, pa.array(flat))
    chunk_tokens = pa.ListArray.from_arrays(offsets, pa.array(np.ones(n * tokens, dtype=np.int32)))
    server = pa.ListArray.from_arrays(offsets, pa.array(flat - 0.001))
    cols = {
        "request_id": pa.array(np.arange(n, dtype=np.int64)),
        "request_class": pa.array(np.where(rng.random(n) < 0.8, "short", "long")),
        "input_tokens": pa.array(rng.integers(128, 4096, n, dtype=np.int32)),
        "output_tokens": pa.array(np.full(n, tokens, dtype=np.int32)),
        "max_tokens": pa.array(np.full(n, tokens, dtype=np.int32)),
        "scheduled_at": pa.array(submitted),
        "submitted_at": pa.array(submitted + 1e-4),
        "token_times": token_times,
        "chunk_times": token_times,
        "chunk_tokens": chunk_tokens,
        "server_token_times": server,
        "status": pa.array(np.where(rng.random(n) < 0.99, "ok", "error")),
        "error": pa.array(np.full(n, "", dtype=object)),
        **{name: pa.nulls(n, SCHEMA.field(name).type) for name in LATER_FIELDS},
    }
    return pa.Table.from_pydict(cols, schema=SCHEMA)


def best_of(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--tokens", type=int, default=256)
    args = parser.parse_args()
    table = synthetic_table(args.requests, args.tokens)
    slo = {"ttft": 0.5, "tpot": 0.03}
    t_mem = best_of(lambda: summarize(RecordColumns.from_table(table), "B", slo))
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        write_records(run, RunInfo(kind="test"), table)
        t_disk = best_of(lambda: summarize(RecordColumns.from_table(read_records(run)), "B", slo))
    samples = args.requests * (args.tokens - 1)
    print(f"summary of {args.requests:,} requests x {args.tokens} tokens ({samples:,} ITL samples)")
    print(f"  from memory:               {t_mem:.2f} s  (target < 3 s)")
    print(f"  from records.parquet:      {t_disk:.2f} s")


if __name__ == "__main__":
    main()
