"""`calibrate`'s own options: how long the probe of a live server may be."""

from __future__ import annotations

from typing import Annotated

from infermeter.config import checks
from infermeter.config.section import Flag, Section
from infermeter.workload.limits import MAX_LENGTH


class Calibration(Section):
    """The probe's size: the quick plan, and the longest prompt it sends."""

    title = "calibration"
    quick: Annotated[bool, Flag("a shorter probe, under a minute", names=("--quick",))] = False
    max_prompt: Annotated[
        int | None,
        Flag("longest prompt to send, in tokens (default 4096, 1000 with --quick)", checks.integer(16, MAX_LENGTH)),
    ] = None
