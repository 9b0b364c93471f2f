"""Metrics over a run's records: latency, throughput, goodput, fairness, statistics, the summary."""

from infermeter.metrics.columns import Ragged, RecordColumns
from infermeter.metrics.summary import summarize
from infermeter.metrics.summary_model import Summary

__all__ = ["Ragged", "RecordColumns", "Summary", "summarize"]
