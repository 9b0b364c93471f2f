"""The engines whose /metrics names the emulator can speak (emulator/metrics_dialects.py); light, for the CLI."""

from __future__ import annotations

from typing import Literal, get_args

MetricsDialect = Literal["vllm", "sglang", "tgi", "triton"]
METRICS_DIALECTS: tuple[str, ...] = get_args(MetricsDialect)
