"""DESIGN.md's summary.json contract: the key names reports, comparisons and scripts read."""

SUMMARY_KEYS = frozenset(
    {
        "requests",
        "duration_s",
        "ttft_ms",
        "itl_ms",
        "tpot_ms",
        "e2e_ms",
        "normalized_latency_ms",
        "throughput",
        "goodput",
        "fluidity",
    }
)
STATS_KEYS = frozenset({"n", "mean", "std", "min", "max", "p50", "p90", "p95", "p99", "p99.9"})
