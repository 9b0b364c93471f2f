"""The serving-engine model: latency models, KV memory, schedulers, and the clock-free EngineCore."""

from infermeter.engine.config import SCHEDULERS, EngineConfig, build_engines
from infermeter.engine.core import EngineCore, Step
from infermeter.engine.latency import BatchModel, IterationModel, LatencyModel
from infermeter.engine.request import EngineRequest

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
