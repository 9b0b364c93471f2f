"""DESIGN.md's summary.json contract: the key names reports, comparisons and scripts read, and the run directories
earlier versions wrote."""

import math
from pathlib import Path
from typing import Any

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

# run directories written by earlier versions of infermeter (tests/fixtures/runs/README.md): every one must read
EARLIER_RUNS = Path(__file__).resolve().parent / "fixtures" / "runs"
V1_RUNS = ("v1-live", "v1-sim")


def same_json(a: Any, b: Any, rel: float = 1e-12, where: str = "") -> list[str]:
    """Where two JSON documents differ: keys, list lengths, types (1 is not 1.0), numbers beyond `rel`."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{where}: keys {sorted(set(a) ^ set(b))}"] if set(a) != set(b) else []
        return out + [d for k in set(a) & set(b) for d in same_json(a[k], b[k], rel, f"{where}.{k}")]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: {len(a)} items against {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in same_json(x, y, rel, f"{where}[{i}]")]
    if type(a) is float and type(b) is float:
        return [] if math.isclose(a, b, rel_tol=rel, abs_tol=1e-300) else [f"{where}: {a!r} against {b!r}"]
    return [] if type(a) is type(b) and a == b else [f"{where}: {a!r} against {b!r}"]
