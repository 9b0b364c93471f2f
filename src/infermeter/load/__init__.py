"""Load generation: open and closed loop drivers, warm-up, and whole benchmark runs.

The driver (and its HTTP client) loads on first use: the run's options alone do not import it.
"""

import importlib
from typing import Any

_FROM = {
    "LiveStats": "driver",
    "LoadPattern": "driver",
    "drive": "driver",
}

__all__ = ["LiveStats", "LoadPattern", "drive"]


def __getattr__(name: str) -> Any:
    if name in _FROM:
        return getattr(importlib.import_module(f"infermeter.load.{_FROM[name]}"), name)
    raise AttributeError(f"module 'infermeter.load' has no attribute {name!r}")
