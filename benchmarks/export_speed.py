"""Time `infermeter export` of a 100,000-request run in each format (the issue asks for seconds, not minutes).

Writes a run directory (run.json, records.parquet from summary_speed.synthetic_table: --requests x --tokens, one
token per chunk, 1% failed), then for each format times, best of --repeat, what the command does after parsing its
options: the rows (every per-request metric) and the file written.  Prints the seconds and the file's size.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from infermeter.exports.request_rows import RunSource, export_rows
from infermeter.exports.table_files import FORMATS, LIST_FORMATS, write_table
from infermeter.records import RunInfo, write_records
from summary_speed import synthetic_table


def timed_export(run: Path, fmt: str, out: Path, repeat: int) -> float:
    """The best of `repeat` exports of the run to `out` in `fmt`, in seconds."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        rows = export_rows([RunSource(run)], lists=fmt in LIST_FORMATS)
        write_table(rows.table, fmt, out)
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        write_records(
            run, RunInfo(kind="test", slo={"ttft": 0.5, "tpot": 0.03}), synthetic_table(args.requests, args.tokens)
        )
        print(f"export of {args.requests:,} requests x {args.tokens} tokens")
        for fmt in FORMATS:
            out = Path(tmp) / f"requests.{fmt}"
            seconds = timed_export(run, fmt, out, args.repeat)
            print(f"  {fmt:8} {seconds:6.2f} s  {out.stat().st_size / 1e6:8.1f} MB")


if __name__ == "__main__":
    main()
