"""The wind tunnel on the real clock: an OpenAI-compatible server running the engine model."""

from infermeter.emulator.config import EmulatorConfig
from infermeter.emulator.faults import Fault
from infermeter.emulator.process import EmulatorProcess, emulator_process, running_emulator

__all__ = ["EmulatorConfig", "EmulatorProcess", "Fault", "emulator_process", "running_emulator"]
