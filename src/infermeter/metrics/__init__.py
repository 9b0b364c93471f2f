"""Metrics over a run's records: latency, throughput, goodput, fairness, statistics, the summary."""

from infermeter.metrics.columns import Ragged, RecordColumns, counting_of
from infermeter.metrics.summary import summarize
from infermeter.metrics.summary_model import Summary

__all__ = ["Ragged", "RecordColumns", "Summary", "counting_of", "summarize"]
