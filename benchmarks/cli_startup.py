"""Time `infermeter --help` as a whole process (target here: under 0.4 s), and list the heaviest imports of
`import infermeter.cli` (python -X importtime, cumulative).

The code measured is the `src/` beside this script (or $PYTHONPATH when it is set).  Prints the best of --repeat.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
HEAVY = ("scipy", "aiohttp", "pyarrow", "numpy", "pydantic", "uvloop", "grpc", "jinja2", "plotly", "dask")


def wall(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--top", type=int, default=12, help="how many of the heaviest imports to list")
    args = parser.parse_args()
    env = dict(os.environ)
    env.setdefault("PYTHONPATH", str(SRC))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed package has its bytecode cached: so has this, after one run
    wall([sys.executable, "-m", "infermeter", "--help"], env)
    help_s = min(wall([sys.executable, "-m", "infermeter", "--help"], env) for _ in range(args.repeat))
    bare_s = min(wall([sys.executable, "-c", "pass"], env) for _ in range(args.repeat))
    probe = "import sys, infermeter.cli; print(' '.join(sorted(m for m in sys.modules if '.' not in m)))"
    loaded = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    heavy = sorted(set(loaded.stdout.split()) & set(HEAVY))
    trace = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import infermeter.cli"], env=env, capture_output=True, text=True
    )
    rows = []
    for line in trace.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]), parts[2].rstrip()))
    print(
        f"infermeter --help: {help_s:.2f} s best of {args.repeat}  (target < 0.4 s; a bare interpreter: {bare_s:.2f} s)"
    )
    print(f"  heavy packages `import infermeter.cli` loads: {', '.join(heavy) or 'none'}")
    print("  heaviest imports (cumulative ms):")
    for us, name in sorted(rows, reverse=True)[: args.top]:
        print(f"    {us / 1000:8.1f}  {name}")
    print(f"  PYTHONPATH={env['PYTHONPATH']}")


if __name__ == "__main__":
    main()
