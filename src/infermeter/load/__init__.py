"""Load generation: a run's plan (load.plan), the open and closed loop drivers, the warm-up and the monitors beside a
run; infermeter.conduct runs a whole benchmark from them.

The driver (and its HTTP client) loads on first use: importing the package alone does not import it.
"""

from infermeter.lazy import lazy_exports

_FROM = {
    "LiveStats": "driver",
    "LoadPattern": "driver",
    "drive": "driver",
}

__all__ = [*_FROM]

__getattr__ = lazy_exports(__name__, _FROM)
