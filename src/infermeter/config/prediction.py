"""`predict`'s own options: the engine configuration to predict with and the "what if" settings laid over it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field

from infermeter.config import checks
from infermeter.config.section import Flag, Section


class PredictedEngine(Section):
    """The engine a prediction simulates: a file (what `infermeter calibrate` wrote) and settings changed on it."""

    title = "predicted"
    engine: Annotated[Path, Flag("engine configuration (what `infermeter calibrate` wrote)", checks.ENGINE_CONFIG_FILE)]
    set_: Annotated[
        list[str],
        Flag(
            "what if: an engine setting as key=value (max_num_seqs=128, scheduler=chunked_prefill, "
            "kv_capacity_tokens=200000, iteration_model.fixed=0.008; times in seconds); repeatable",
            names=("--set",),
            repeatable=True,
        ),
    ] = Field(default_factory=list)
