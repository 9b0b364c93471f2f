"""The serving-engine model: latency models, KV memory, schedulers, and the clock-free EngineCore.

Its modules load on first use, so a configuration that names a scheduler does not import the engine.
"""

import importlib
from typing import Any

_FROM = {
    "SCHEDULERS": "config",
    "EngineConfig": "config",
    "build_engines": "config",
    "EngineCore": "core",
    "BatchModel": "latency",
    "IterationModel": "latency",
    "LatencyModel": "latency",
    "EngineRequest": "request",
    "Step": "step",
}

__all__ = [
    "SCHEDULERS",
    "BatchModel",
    "EngineConfig",
    "EngineCore",
    "EngineRequest",
    "IterationModel",
    "LatencyModel",
    "Step",
    "build_engines",
]


def __getattr__(name: str) -> Any:
    if name in _FROM:
        return getattr(importlib.import_module(f"infermeter.engine.{_FROM[name]}"), name)
    raise AttributeError(f"module 'infermeter.engine' has no attribute {name!r}")
