"""Wall time and peak memory of simulating synthetic-skewed on N engines with multi_bin_dynamic (K=8).

Targets: 10,000,000 requests on 64 engines in under 60 s and 2 GB (`--requests 10000000 --engines 64`).
The run directory is written as the simulation goes (`infermeter.sim.run.simulate_run`): records leave memory
in chunks as the requests at the front of the workload finish, so the simulation's time includes writing them;
sealing the journal into records.parquet and the summary are timed after it.  Past --token-limit tokens a run
records each stream's first and last token time only, with ITL computed exactly from the simulator's emission
runs; under it, every token time is recorded.

The arrival rate defaults to 27 req/s per 8 engines (the seed's 100x level at 8 engines, 3.375 req/s per engine),
so every pool size sees the same load per engine: 216 req/s on 64 engines.  Run one size per process so peak
memory (max RSS) belongs to that size.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

from infermeter.engine.config import EngineConfig
from infermeter.sim.run import DEFAULT_TOKEN_LIMIT, expected_tokens, simulate_run
from infermeter.workload.build import arrival_spec, build_requests

RATE_PER_ENGINE = 27.0 / 8


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=10_000_000)
    parser.add_argument("--engines", type=int, default=64)
    parser.add_argument("--rate", type=float, default=None, help="Poisson arrivals, req/s (default 27 per 8 engines)")
    parser.add_argument("--token-times", choices=["auto", "full", "endpoints"], default="auto")
    parser.add_argument("--token-limit", type=int, default=DEFAULT_TOKEN_LIMIT)
    parser.add_argument("--scheduler", default="multi_bin_dynamic", help="any registered scheduler (K=8 for multi-bin)")
    args = parser.parse_args()
    rate = args.rate if args.rate is not None else RATE_PER_ENGINE * args.engines

    t_start = time.perf_counter()
    reqs, decl = build_requests(args.requests, 42, workload="synthetic-skewed", arrivals=arrival_spec("poisson", rate))
    t_gen = time.perf_counter() - t_start
    multi_bin = args.scheduler == "multi_bin_dynamic"
    config = EngineConfig(scheduler=args.scheduler, **({"bins": 8} if multi_bin else {}))
    timings: dict[str, float] = {}
    rss_sim = [0.0]

    def progress(done: int) -> None:
        if done == args.requests:  # the simulation's last call
            rss_sim[0] = peak_rss_gb()

    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        summary = simulate_run(
            reqs,
            config,
            args.engines,
            42,
            run,
            decl,
            args.token_times,
            args.token_limit,
            progress=progress,
            timings=timings,
        )
        total = time.perf_counter() - t_start
        size = sum(f.stat().st_size for f in run.iterdir()) / 1024**2
    tokens = expected_tokens(reqs, config)  # what the run emitted (simulate_run checks it)
    mode = "endpoints" if summary.itl_source is not None else "full"
    print(
        f"{args.requests:,} requests of synthetic-skewed, {args.engines} engines, "
        f"{args.scheduler}{' K=8' if multi_bin else ''}, Poisson {rate:g} req/s; {tokens:,} output tokens"
    )
    print(f"  workload generation:             {t_gen:6.1f} s")
    print(f"  simulation, records streamed:    {timings['simulation']:6.1f} s   peak RSS so far {rss_sim[0]:.2f} GB")
    print(f"  records.parquet sealed:          {timings['records']:6.1f} s")
    print(f"  summary:                         {timings['summary']:6.1f} s")
    print(
        f"  total:                           {total:6.1f} s   peak RSS {peak_rss_gb():.2f} GB"
        f"   (target < 60 s, < 2 GB); {size:.0f} MB on disk"
    )
    print(f"  token times recorded:            {mode} (limit {args.token_limit:,} tokens)")
    print(
        f"  throughput {summary.throughput.req_s:.2f} req/s, GPU utilization "
        f"{summary.sim.gpu_utilization if summary.sim else 0.0:.1%}, ITL p99 {summary.itl_ms.p99 or 0.0:.2f} ms"
    )


if __name__ == "__main__":
    main()
