"""Every scheduler the engine model offers, by name: adding one is a module with its config and a line here."""

from __future__ import annotations

from typing import Any

from infermeter.engine.batching import DynamicNoBinsConfig, StaticFifoConfig
from infermeter.engine.iteration import ChunkedPrefillConfig, ContinuousConfig
from infermeter.engine.multi_bin import MultiBinConfig
from infermeter.engine.priority import PriorityConfig
from infermeter.engine.scheduler import SchedulerConfig

SCHEDULER_CONFIGS: dict[str, type[SchedulerConfig]] = {
    config.model_fields["name"].default: config
    for config in (
        StaticFifoConfig,
        DynamicNoBinsConfig,
        MultiBinConfig,
        ContinuousConfig,
        ChunkedPrefillConfig,
        PriorityConfig,
    )
}
SCHEDULERS: tuple[str, ...] = tuple(SCHEDULER_CONFIGS)


def scheduler_config(value: Any) -> SchedulerConfig:
    """A scheduler's config from its name, a mapping with a `name`, or a config already built."""
    if isinstance(value, SchedulerConfig):
        return value
    if isinstance(value, str):
        value = {"name": value}
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        raise ValueError(f"expected a scheduler name or a mapping with a 'name', got {value!r}")
    config = SCHEDULER_CONFIGS.get(value["name"])
    if config is None:
        raise ValueError(f"unknown scheduler {value['name']!r}: choose one of {', '.join(SCHEDULERS)}")
    return config.model_validate(value)
