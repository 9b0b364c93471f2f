"""The documentation's generator lives beside the pages it makes (docs/hooks/, where mkdocs loads it as a hook), not
in the package: its tests import it from there."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HOOKS = ROOT / "docs" / "hooks"
if str(HOOKS) not in sys.path:
    sys.path.insert(0, str(HOOKS))
