"""The wind tunnel on the real clock: an OpenAI-compatible server running the engine model.

Its modules load on first use: the emulator's configuration alone does not import the server.
"""

from infermeter.lazy import lazy_exports

_FROM = {
    "EmulatorConfig": "config",
    "Fault": "faults",
    "EmulatorProcess": "process",
    "emulator_process": "process",
    "running_emulator": "process",
}

__all__ = [*_FROM]

__getattr__ = lazy_exports(__name__, _FROM)
