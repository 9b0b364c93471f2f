"""Prometheus text exposition written family by family, with the sample names an engine itself writes (Triton's and
TGI's counters carry no `_total`, which prometheus_client would add), so each dialect reads as its engine's."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from infermeter.emulator.batch_histogram import BatchHistogram

Kind = Literal["gauge", "counter", "histogram"]
Labels = dict[str, str]


@dataclass(frozen=True)
class Family:
    """One metric family: its name, type, help line and samples (name, labels, value)."""

    name: str
    kind: Kind
    doc: str
    samples: list[tuple[str, Labels, float]] = field(default_factory=list)


def gauge(name: str, doc: str, values: Iterable[tuple[Labels, float]]) -> Family:
    return Family(name, "gauge", doc, [(name, labels, v) for labels, v in values])


def counter(name: str, doc: str, values: Iterable[tuple[Labels, float]], sample_name: str | None = None) -> Family:
    """A counter; `sample_name` when the samples are named otherwise (prometheus_client's `_total`)."""
    return Family(name, "counter", doc, [(sample_name or name, labels, v) for labels, v in values])


def histogram(name: str, doc: str, series: Iterable[tuple[Labels, BatchHistogram]], scale: float = 1.0) -> Family:
    """A histogram from BatchHistograms, one per label set; `scale` multiplies the sum (never the bucket bounds)."""
    samples: list[tuple[str, Labels, float]] = []
    for labels, h in series:
        buckets, total = h.snapshot()
        samples += [(f"{name}_bucket", {**labels, "le": le}, count) for le, count in buckets]
        samples += [(f"{name}_sum", labels, total * scale), (f"{name}_count", labels, buckets[-1][1])]
    return Family(name, "histogram", doc, samples)


def render(families: Iterable[Family]) -> bytes:
    """The text format (version 0.0.4) of the families."""
    lines: list[str] = []
    for f in families:
        lines.append(f"# HELP {f.name} {_escape_help(f.doc)}")
        lines.append(f"# TYPE {f.name} {f.kind}")
        for name, labels, value in f.samples:
            tags = ",".join(f'{k}="{_escape_label(v)}"' for k, v in labels.items())
            lines.append(f"{name}{{{tags}}} {_number(value)}" if tags else f"{name} {_number(value)}")
    return ("\n".join(lines) + "\n").encode()


def _number(value: float) -> str:
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _escape_label(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
