"""Time `infermeter report DIR --json` as a whole process on a run of 100,000 requests x 256 tokens (targets here:
under 2 s and under 1 GB peak RSS).

Writes a run directory (run.json with an SLO, records.parquet from summary_speed.synthetic_table) from a child
process (a child forked from a parent that held the table would inherit its peak RSS), then runs the report in a
fresh interpreter a few times, after one run that is not counted (it leaves the bytecode cache as an installed
package has it), and prints the best wall time and the largest peak RSS (the child's own rusage, from os.wait4).
`--deadlines` also asks for the fluidity block.  The code measured is the `src/` beside this script (or
$PYTHONPATH when it is set).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from infermeter.records import RunInfo, write_records
from summary_speed import synthetic_table

SRC = Path(__file__).resolve().parent.parent / "src"


def timed_process(argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """Wall seconds, peak RSS in GB and exit status of one child process (its output discarded)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    error = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        sys.stderr.write(error.decode(errors="replace"))
    return elapsed, usage.ru_maxrss / 1024**2, proc.returncode  # ru_maxrss is in KiB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--deadlines", default=None, help="e.g. tbt=25ms: also compute the fluidity block")
    parser.add_argument("--write-to", type=Path, default=None, help=argparse.SUPPRESS)  # the child that writes
    args = parser.parse_args()
    if args.write_to is not None:
        info = RunInfo(kind="test", slo={"ttft": 0.5, "tpot": 0.03}, deadlines=args.deadlines)
        write_records(args.write_to, info, synthetic_table(args.requests, args.tokens))
        return
    env = dict(os.environ)
    env.setdefault("PYTHONPATH", str(SRC))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        write = [sys.executable, __file__, "--requests", str(args.requests), "--tokens", str(args.tokens)]
        subprocess.run([*write, *(["--deadlines", args.deadlines] if args.deadlines else []), "--write-to", str(run)],
                       env=env, check=True)  # fmt: skip
        size = (run / "records.parquet").stat().st_size / 1024**2
        argv = [sys.executable, "-m", "infermeter", "report", str(run), "--json"]
        timed_process(argv, env)
        runs = [timed_process(argv, env) for _ in range(args.repeat)]
    if any(code for _, _, code in runs):
        sys.exit(f"infermeter report failed: exit codes {[code for _, _, code in runs]}")
    wall = min(t for t, _, _ in runs)
    rss = max(m for _, m, _ in runs)
    what = f", deadlines {args.deadlines}" if args.deadlines else ""
    print(
        f"infermeter report --json of {args.requests:,} requests x {args.tokens} tokens ({size:.0f} MB parquet{what})"
    )
    print(f"  whole process: {wall:.2f} s best of {args.repeat}  (target < 2 s)")
    print(f"  peak RSS:      {rss:.2f} GB  (target < 1 GB)")
    print(f"  PYTHONPATH={env['PYTHONPATH']}")


if __name__ == "__main__":
    main()
