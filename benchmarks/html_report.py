"""Size and time of the HTML report of a large run (the budget: a 10,000-request run under ~5 MB).

Prints, for --requests N x --tokens T: the page's size and the time to build its charts and render it (best of
three).  The comparison's statistics are timed by benchmarks/significance.py."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from infermeter.metrics import RecordColumns, summarize
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


if __name__ == "__main__":
    main()
