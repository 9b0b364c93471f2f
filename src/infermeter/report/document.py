"""A report as data, laid out as the IETF draft's Appendix C.2 full report (numbered sections of bullets, tables and
charts), so that Markdown and HTML render the same content from a run, a suite or a comparison."""

from __future__ import annotations

from dataclasses import dataclass, field

from infermeter.chart import Chart
from infermeter.suite_result import Table


@dataclass
class Section:
    """One numbered section: bullet lines, then tables, then charts (and sub-sections, e.g. one per suite)."""

    title: str
    bullets: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    charts: list[Chart] = field(default_factory=list)
    subsections: list[Section] = field(default_factory=list)


@dataclass
class Document:
    """A whole report: a title, warnings shown above everything (e.g. --quick), and its sections."""

    title: str
    sections: list[Section]
    banners: list[str] = field(default_factory=list)

    def charts(self) -> list[Chart]:
        """Every chart, in document order."""
        out: list[Chart] = []
        stack = list(reversed(self.sections))
        while stack:
            s = stack.pop()
            out += s.charts
            stack += list(reversed(s.subsections))
        return out
