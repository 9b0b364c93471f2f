"""Runs for the tests, made as `infermeter run` makes them: a configuration resolved, its plan sent to a URL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infermeter.conduct.run import RunResult, conduct
from infermeter.config.run import RunConfig
from infermeter.load.target import Endpoint

QUIET = {"scrape_interval": 0, "telemetry_interval": 0}


def configured(url: str | None, **sections: dict[str, Any]) -> RunConfig:
    """A resolved configuration of these sections (monitors off unless given) for the server at `url`."""
    data: dict[str, Any] = {"monitors": QUIET, **sections}
    if url is not None:
        data["target"] = {**data.get("target", {}), "url": url}
    return RunConfig.model_validate(data).resolved()


async def measured(cfg: RunConfig, out: Path, url: str, sut: dict[str, Any] | None = None) -> RunResult:
    """The configuration's run against `url` (`sut`: what an embedded emulator declares), without live progress."""
    return await conduct(cfg, Endpoint(url, sut or {}, url), out, progress=False)
