"""The base of every run.json block (run_info.py and its parts): closed to stray keys, checked on assignment."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Block(BaseModel):
    """A run.json block: a stray key is an error, and a value assigned later is checked like one read."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)
