"""The wind tunnel on the real clock: an OpenAI-compatible server running the engine model."""

from infermeter.emulator.config import EmulatorConfig
from infermeter.emulator.process import running_emulator

__all__ = ["EmulatorConfig", "running_emulator"]
