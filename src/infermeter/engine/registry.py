"""Every scheduler the engine model offers, by name: adding one is a module with its config and a line here, or, from
another package, an entry point in `infermeter.schedulers` naming its config class."""

from __future__ import annotations

from collections.abc import Mapping

from infermeter.engine.scheduler import SchedulerConfig
from infermeter.plugins import Entry, Registry


def _a_config(name: str, obj: object) -> str | None:
    """What keeps another package's entry from being the scheduler `name`'s config class (None: nothing)."""
    if not (isinstance(obj, type) and issubclass(obj, SchedulerConfig)):
        return "it is not a SchedulerConfig class"
    declared = obj.model_fields["name"].default
    return None if declared == name else f"its config's name is {declared!r}, not {name!r}"


SCHEDULERS: Registry[type[SchedulerConfig]] = Registry(
    "scheduler",
    [
        Entry(
            "static_fifo",
            "infermeter.engine.batching:StaticFifoConfig",
            "one FIFO queue, a fixed batch of B requests run to completion (the baseline)",
        ),
        Entry(
            "dynamic_no_bins",
            "infermeter.engine.batching:DynamicNoBinsConfig",
            "one FIFO, batch size min(b_mem, b_SLA) from memory and the decode SLA",
        ),
        Entry(
            "multi_bin_dynamic",
            "infermeter.engine.multi_bin:MultiBinConfig",
            "K queues by predicted length, each sized by memory and the decode SLA",
        ),
        Entry(
            "continuous",
            "infermeter.engine.iteration:ContinuousConfig",
            "continuous batching as vLLM v0 does it; new prompts prefill in a step of their own",
        ),
        Entry(
            "chunked_prefill",
            "infermeter.engine.iteration:ChunkedPrefillConfig",
            "Sarathi-style chunked prefill; decodes first, then prompt chunks within a token budget",
        ),
        Entry(
            "priority",
            "infermeter.engine.priority:PriorityConfig",
            "continuous batching served by request priority, then shortest predicted job first",
        ),
    ],
    check=_a_config,
)
# each scheduler's config class by name, imported when asked for
SCHEDULER_CONFIGS: Mapping[str, type[SchedulerConfig]] = SCHEDULERS.loaded()


def scheduler_config(value: object) -> SchedulerConfig:
    """A scheduler's config from its name, a mapping with a `name`, or a config already built."""
    if isinstance(value, SchedulerConfig):
        return value
    if isinstance(value, str):
        value = {"name": value}
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        raise ValueError(f"expected a scheduler name or a mapping with a 'name', got {value!r}")
    config = SCHEDULERS.load(value["name"])
    if config is None:
        raise ValueError(f"unknown scheduler {value['name']!r}: choose one of {', '.join(SCHEDULERS)}")
    return config.model_validate(value)
