"""The cost of reading a run under ITL option A against option B (issue 34: A within 1.3x of B in time and memory).

Writes a synthetic run of --requests N x --tokens T tokens (one token per chunk, as benchmarks/summary_speed.py
builds it: option A then differences as many chunk times as option B token times) to a temporary run directory,
then reads it as `infermeter report` does (RecordColumns.of_run + summarize) once per option, each in its own
process so that its peak resident memory is its own, --rounds times with A and B in turn.  Prints each option's wall
time (the best over rounds of --repeat reads) and peak RSS growth over the process's RSS before reading (the median
over rounds), and the A/B ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

OPTIONS = ("A", "B")
SRC = Path(__file__).resolve().parent.parent / "src"


@dataclass(frozen=True)
class Cost:
    """One option's cost of reading the run: the best wall time, and the peak RSS growth while reading."""

    seconds: float
    peak_mb: float


def status_mb(field: str) -> float:
    """A memory figure of this process from /proc (VmRSS: now; VmHWM: its peak, which, unlike getrusage's
    ru_maxrss, does not carry over the parent's peak from before the exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1e3  # kB
    raise RuntimeError(f"/proc/self/status has no {field}")


def measure(run_dir: Path, option: str, repeat: int) -> Cost:
    """Read the run `repeat` times under `option` (in this process: the peak is the first read's)."""
    from infermeter.metrics import RecordColumns, summarize
    from infermeter.records import read_run_info
    from summary_speed import best_of

    info = read_run_info(run_dir)
    before = status_mb("VmRSS")
    seconds = best_of(lambda: summarize(RecordColumns.of_run(run_dir, info), option), repeat)  # type: ignore[arg-type]
    peak = status_mb("VmHWM")
    return Cost(seconds=seconds, peak_mb=max(peak - before, 0.0))


def in_subprocess(run_dir: Path, option: str, repeat: int) -> Cost:
    env = dict(os.environ)
    env.setdefault("PYTHONPATH", str(SRC))  # the code beside this script, as report_speed.py measures
    out = subprocess.run(
        [sys.executable, __file__, "--measure", str(run_dir), "--option", option, "--repeat", str(repeat)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    ).stdout
    return Cost(**json.loads(out.strip().splitlines()[-1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=1, help="reads per option and process (the best time is printed)")
    ap.add_argument("--rounds", type=int, default=3, help="processes per option, A and B in turn (median peak)")
    ap.add_argument("--measure", type=Path, help=argparse.SUPPRESS)  # the child: measure one option of this run
    ap.add_argument("--option", choices=OPTIONS, default="B", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure is not None:
        print(json.dumps(measure(args.measure, args.option, args.repeat).__dict__))
        return

    sys.path.insert(0, str(Path(__file__).parent))
    from infermeter.records import RunInfo, write_records
    from summary_speed import synthetic_table

    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        write_records(run, RunInfo(kind="test"), synthetic_table(args.requests, args.tokens))
        rounds = [{option: in_subprocess(run, option, args.repeat) for option in OPTIONS} for _ in range(args.rounds)]
    costs = {  # options alternate round by round, so a busy spell of the machine hits both
        option: Cost(
            seconds=min(r[option].seconds for r in rounds),
            peak_mb=float(np.median([r[option].peak_mb for r in rounds])),
        )
        for option in OPTIONS
    }
    print(f"reading a run of {args.requests:,} requests x {args.tokens} tokens (one token per chunk)")
    for option, cost in costs.items():
        print(f"  option {option}: {cost.seconds:6.2f} s  peak RSS growth {cost.peak_mb:7.0f} MB")
    a, b = costs["A"], costs["B"]
    print(f"  A/B: time {a.seconds / b.seconds:.2f}x  memory {a.peak_mb / max(b.peak_mb, 1e-9):.2f}x  (target <= 1.3x)")


if __name__ == "__main__":
    main()
