"""Metrics over a run's records: latency, throughput, goodput, fairness, statistics, the summary.

Its modules load on first use, so a module that needs one metric (or the summary's model) does not import them all.
"""

from typing import TYPE_CHECKING

from infermeter.lazy import lazy_exports

if TYPE_CHECKING:  # what the names below are, for type checkers (at run time they load on first use)
    from infermeter.metrics.columns import Ragged as Ragged
    from infermeter.metrics.columns import RecordColumns as RecordColumns
    from infermeter.metrics.columns import counting_of as counting_of
    from infermeter.metrics.summary import summarize as summarize
    from infermeter.metrics.summary_model import Summary as Summary

_FROM = {
    "Ragged": "columns",
    "RecordColumns": "columns",
    "counting_of": "columns",
    "summarize": "summary",
    "Summary": "summary_model",
}

__all__ = [*_FROM]

__getattr__ = lazy_exports(__name__, _FROM)
