"""`--export KIND[:WHERE]`: which exporter runs at the end of a run or suite, and where it sends."""

from __future__ import annotations

from dataclasses import dataclass

# kind -> (whether WHERE is required, what WHERE is)
EXPORT_KINDS: dict[str, tuple[bool, str]] = {
    "mlflow": (False, "an MLflow tracking URI (default: MLFLOW_TRACKING_URI, else ./mlruns)"),
    "otlp": (True, "an OTLP/HTTP endpoint, e.g. http://127.0.0.1:4318 (metrics go to /v1/metrics)"),
    "prometheus": (True, "a textfile-collector file, e.g. /var/lib/node_exporter/infermeter.prom"),
}


@dataclass(frozen=True)
class ExportSpec:
    """One `--export`: the exporter's kind and where it sends (None: the exporter's default)."""

    kind: str
    where: str | None = None

    def __str__(self) -> str:
        return self.kind if self.where is None else f"{self.kind}:{self.where}"


def parse_export(text: str) -> ExportSpec:
    """`mlflow`, `mlflow:URI`, `otlp:URL` or `prometheus:FILE`; a one-line ValueError naming the forms otherwise
    (the option's parser makes it a usage error; the Python API raises it as it is)."""
    kind, sep, where = text.partition(":")
    kind = kind.strip().lower()
    forms = "mlflow[:URI], otlp:URL or prometheus:FILE"
    if kind not in EXPORT_KINDS:
        raise ValueError(f"{text!r}: unknown exporter {kind!r}; give {forms}")
    required, what = EXPORT_KINDS[kind]
    where = where.strip()
    if sep and not where:
        raise ValueError(f"{text!r}: nothing after the colon; give {what}")
    if required and not where:
        raise ValueError(f"{text!r}: {kind} needs {what}: --export {kind}:WHERE")
    return ExportSpec(kind, where or None)
