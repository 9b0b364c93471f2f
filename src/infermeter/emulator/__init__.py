"""The wind tunnel on the real clock: an OpenAI-compatible server running the engine model.

Its modules load on first use: the emulator's configuration alone does not import the server.
"""

import importlib
from typing import Any

_FROM = {
    "EmulatorConfig": "config",
    "Fault": "faults",
    "EmulatorProcess": "process",
    "emulator_process": "process",
    "running_emulator": "process",
}

__all__ = ["EmulatorConfig", "EmulatorProcess", "Fault", "emulator_process", "running_emulator"]


def __getattr__(name: str) -> Any:
    if name in _FROM:
        return getattr(importlib.import_module(f"infermeter.emulator.{_FROM[name]}"), name)
    raise AttributeError(f"module 'infermeter.emulator' has no attribute {name!r}")
