"""Wall time and peak memory of simulating synthetic-skewed on 8 engines with multi_bin_dynamic.

Targets: 1,000,000 requests in under 60 s and 2 GB.  Prints the simulation alone, then writing the run
directory (records + summary).  Past --token-limit tokens a run records each stream's first and last token time
only, with ITL computed exactly from the simulator's emission runs; under it, every token time is recorded.
Run one size per process so peak memory (max RSS) belongs to that size.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

from infermeter.engine.config import EngineConfig
from infermeter.sim import simulate, write_sim_run
from infermeter.sim.run import DEFAULT_TOKEN_LIMIT
from infermeter.workload.build import arrival_spec, build_requests


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--engines", type=int, default=8)
    parser.add_argument("--rate", type=float, default=27.0, help="Poisson arrivals, req/s (the seed's 100x level)")
    parser.add_argument("--token-times", choices=["auto", "full", "endpoints"], default="auto")
    parser.add_argument("--token-limit", type=int, default=DEFAULT_TOKEN_LIMIT)
    parser.add_argument("--scheduler", default="multi_bin_dynamic", help="any registered scheduler (K=8 for multi-bin)")
    args = parser.parse_args()

    t0 = time.perf_counter()
    reqs, decl = build_requests(
        args.requests, 42, workload="synthetic-skewed", arrivals=arrival_spec("poisson", args.rate)
    )
    t_gen = time.perf_counter() - t0
    t0 = time.perf_counter()
    multi_bin = args.scheduler == "multi_bin_dynamic"
    config = EngineConfig(scheduler=args.scheduler, **({"bins": 8} if multi_bin else {}))
    out = simulate(reqs, config, args.engines, 42)
    t_sim = time.perf_counter() - t0
    rss_sim = peak_rss_gb()
    tokens = int(out.emissions.count.sum())
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        summary = write_sim_run(out, Path(tmp) / "run", decl, 42, args.token_times, args.token_limit)
        t_write = time.perf_counter() - t0
        size = sum(f.stat().st_size for f in (Path(tmp) / "run").iterdir()) / 1024**2
    mode = "endpoints" if summary.itl_source is not None else "full"
    print(
        f"{args.requests:,} requests of synthetic-skewed, {args.engines} engines, "
        f"{args.scheduler}{' K=8' if multi_bin else ''}, "
        f"Poisson {args.rate:g} req/s; {tokens:,} output tokens"
    )
    print(f"  workload generation:           {t_gen:6.1f} s")
    print(
        f"  simulation:                    {t_sim:6.1f} s   peak RSS so far {rss_sim:.2f} GB   (target < 60 s, < 2 GB)"
    )
    print(f"  run directory + summary:       {t_write:6.1f} s   peak RSS {peak_rss_gb():.2f} GB, {size:.0f} MB on disk")
    print(f"  token times recorded:          {mode} (limit {args.token_limit:,} tokens)")
    print(
        f"  throughput {summary.throughput.req_s:.2f} req/s, GPU utilization "
        f"{summary.sim.gpu_utilization if summary.sim else 0.0:.1%}, ITL p99 {summary.itl_ms.p99 or 0.0:.2f} ms"
    )


if __name__ == "__main__":
    main()
