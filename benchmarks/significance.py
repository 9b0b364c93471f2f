"""Time of the statistics that compare two groups of runs: the stratified bootstrap of P50 and P99 differences
(3 runs x 10,000 lognormal samples a group, 2000 replicates) and Mann-Whitney U on the pooled 30,000 vs 30,000.
Prints the median of 3 repetitions of each.  Run: PYTHONPATH=src .venv/bin/python benchmarks/significance.py"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

from infermeter.metrics.significance import bootstrap_quantile_difference, mann_whitney

RUNS, SAMPLES, REPS, REPEATS = 3, 10_000, 2000, 3


def median_seconds(fn: Callable[[], object], repeat: int = REPEATS) -> float:
    """The median wall time of `repeat` calls: steadier than one call, less flattering than the best."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    argparse.ArgumentParser(description=__doc__).parse_args()  # no options: --help says what it times
    rng = np.random.default_rng(0)
    a = [rng.lognormal(2.0, 0.5, SAMPLES) for _ in range(RUNS)]
    b = [rng.lognormal(2.05, 0.5, SAMPLES) for _ in range(RUNS)]
    for q in (0.5, 0.99):
        s = median_seconds(lambda q=q: bootstrap_quantile_difference(a, b, q, reps=REPS))
        print(f"bootstrap P{q * 100:g} difference, {RUNS} x {SAMPLES:,} a group, {REPS} replicates: {s:.3f} s")
    pooled_a, pooled_b = np.concatenate(a), np.concatenate(b)
    s = median_seconds(lambda: mann_whitney(pooled_a, pooled_b))
    print(f"Mann-Whitney U, {len(pooled_a):,} vs {len(pooled_b):,}: {s:.3f} s")


if __name__ == "__main__":
    main()
