"""A report Document as Markdown: numbered headings, bullets, pipe tables; each chart is named with its note and
points to the HTML report, which draws it."""

from __future__ import annotations

from infermeter.report.document import Document, Section
from infermeter.suite_result import Table


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def table_markdown(table: Table) -> list[str]:
    """A GitHub-flavoured pipe table with its caption in bold above and its notes below."""
    lines = [f"**{table.caption}**", ""] if table.caption else []
    lines.append("| " + " | ".join(_cell(h) for h in table.headers) + " |")
    lines.append("|" + "|".join("---" for _ in table.headers) + "|")
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in table.rows]
    lines += [f"\n_{n}_" for n in table.notes]
    return [*lines, ""]


def _section(section: Section, level: int) -> list[str]:
    lines = [f"{'#' * level} {section.title}", ""]
    if section.bullets:
        lines += [f"- {b}" for b in section.bullets] + [""]
    for table in section.tables:
        lines += table_markdown(table)
    for chart in section.charts:
        note = f" {chart.note}" if chart.note else ""
        lines += [f"_Figure: {chart.title} ({chart.points():,} points; drawn in the HTML report).{note}_", ""]
    for sub in section.subsections:
        lines += _section(sub, level + 1)
    return lines


def render_markdown(doc: Document) -> str:
    lines = [f"# {doc.title}", ""]
    lines += [f"> {b}" for b in doc.banners] + ([""] if doc.banners else [])
    for section in doc.sections:
        lines += _section(section, 2)
    return "\n".join(lines).rstrip() + "\n"
