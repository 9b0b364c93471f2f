"""The code base stays ruff clean (the style guide's rule), checked with the test suite."""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_clean():
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    p = subprocess.run(
        [ruff, "check", "src", "tests", "benchmarks", "docs"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert p.returncode == 0, p.stdout + p.stderr
