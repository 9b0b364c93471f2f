"""A run's results carried out of its directory: per-request tables (CSV, JSONL, Parquet) and the exporters run at
the end of a run or suite (MLflow, OpenTelemetry over OTLP/HTTP, a Prometheus textfile)."""
