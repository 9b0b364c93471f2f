"""The serving-engine model: latency models, KV memory, schedulers, and the clock-free EngineCore."""

from infermeter.engine.config import SCHEDULERS, EngineConfig, build_engines
from infermeter.engine.core import EngineCore
from infermeter.engine.latency import BatchModel, IterationModel, LatencyModel
from infermeter.engine.request import EngineRequest
from infermeter.engine.step import Step

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
