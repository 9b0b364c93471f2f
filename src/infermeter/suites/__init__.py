"""Procedures that drive load and read metrics: prefill profiling, capacity search (and the draft's tests)."""
