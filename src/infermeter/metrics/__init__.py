"""Metrics over a run's records: latency, throughput, goodput, fairness, statistics, the summary.

Its modules load on first use, so a module that needs one metric (or the summary's model) does not import them all.
"""

from infermeter.lazy import lazy_exports

_FROM = {
    "Ragged": "columns",
    "RecordColumns": "columns",
    "counting_of": "columns",
    "summarize": "summary",
    "Summary": "summary_model",
}

__all__ = [*_FROM]

__getattr__ = lazy_exports(__name__, _FROM)
