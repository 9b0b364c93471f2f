"""Load generation: open and closed loop drivers, warm-up, and whole benchmark runs."""

from infermeter.load.driver import LiveStats, LoadPattern, drive

__all__ = ["LiveStats", "LoadPattern", "drive"]
