"""Metrics over a run's records: latency, throughput, goodput, fairness, statistics, the summary.

Its modules load on first use, so a module that needs one metric (or the summary's model) does not import them all.
"""

import importlib
from typing import Any

_FROM = {
    "Ragged": "columns",
    "RecordColumns": "columns",
    "counting_of": "columns",
    "summarize": "summary",
    "Summary": "summary_model",
}

__all__ = ["Ragged", "RecordColumns", "Summary", "counting_of", "summarize"]


def __getattr__(name: str) -> Any:
    if name in _FROM:
        return getattr(importlib.import_module(f"infermeter.metrics.{_FROM[name]}"), name)
    raise AttributeError(f"module 'infermeter.metrics' has no attribute {name!r}")
