"""Emulator configuration: the engine model plus the knobs the methodology tests turn."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from infermeter.config_files import load_model
from infermeter.engine.config import EngineConfig


class EmulatorConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    model: str = "infermeter-emulator"
    engine: EngineConfig = Field(default_factory=EngineConfig)
    speed: float = Field(default=1.0, gt=0, description="run the engine this many times faster than its model")
    prefix_caching: bool = True
    max_model_len: int = Field(default=131072, gt=0)
    input_filter_ms: float = Field(default=0.0, ge=0, description="guardrail before the engine (adds to TTFT)")
    output_filter_ms: float = Field(default=0.0, ge=0, description="guardrail delay on every streamed event")
    error_rate: float = Field(default=0.0, ge=0, le=1, description="share of requests answered with HTTP 500")
    stall_rate: float = Field(default=0.0, ge=0, le=1, description="share of streams that pause once")
    stall_s: float = Field(default=1.0, ge=0)
    drop_rate: float = Field(default=0.0, ge=0, le=1, description="share of streams cut off mid-way")
    seed: int = 0


def load_emulator_config(path: Path) -> EmulatorConfig:
    return load_model(EmulatorConfig, path, "emulator config")
