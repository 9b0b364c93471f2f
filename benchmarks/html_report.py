"""Size and time of the HTML report of a large run (the issue's budget: a 10,000-request run under ~5 MB), and the
time of a comparison's statistics (3 runs a group, the bootstrap at 2000 replicates).

Prints, for --requests N x --tokens T: the page's size, the time to build its charts and render it (best of three),
then the bootstrap of P50 and P99 and Mann-Whitney U for 3 x 10,000 ITL samples a group."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from infermeter.metrics import RecordColumns, summarize
from infermeter.metrics.significance import bootstrap_quantile_difference, mann_whitney
from infermeter.records import RunInfo
from infermeter.report.documents import run_document
from infermeter.report.html import plotly_payload, render_html
from summary_speed import synthetic_table


def best(fn, repeat: int = 3) -> tuple[float, object]:  # type: ignore[no-untyped-def]
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--requests", type=int, default=10_000)
    ap.add_argument("--tokens", type=int, default=256)
    args = ap.parse_args()
    cols = RecordColumns.from_table(synthetic_table(args.requests, args.tokens))
    summary = summarize(cols, "B", {}, None)
    plotly_payload()  # compressed once per process
    seconds, page = best(lambda: render_html(run_document(Path("."), RunInfo(), summary, cols)))
    assert isinstance(page, str)
    print(
        f"HTML report of {args.requests:,} requests x {args.tokens} tokens: {len(page.encode()) / 1e6:.2f} MB, "
        f"charts + render {seconds:.2f} s (best of 3)"
    )
    rng = np.random.default_rng(0)
    a = [rng.lognormal(2, 0.5, 10_000) for _ in range(3)]
    b = [rng.lognormal(2.05, 0.5, 10_000) for _ in range(3)]
    for q in (0.5, 0.99):
        s, _ = best(lambda q=q: bootstrap_quantile_difference(a, b, q, reps=2000))
        print(f"bootstrap P{q * 100:g} difference, 3 x 10,000 a group, 2000 replicates: {s:.2f} s")
    s, _ = best(lambda: mann_whitney(np.concatenate(a), np.concatenate(b)))
    print(f"Mann-Whitney U, 30,000 against 30,000: {s * 1000:.1f} ms")


if __name__ == "__main__":
    main()
