"""Load generation: open and closed loop drivers, warm-up, and whole benchmark runs.

The driver (and its HTTP client) loads on first use: the run's options alone do not import it.
"""

from infermeter.lazy import lazy_exports

_FROM = {
    "LiveStats": "driver",
    "LoadPattern": "driver",
    "drive": "driver",
}

__all__ = [*_FROM]

__getattr__ = lazy_exports(__name__, _FROM)
