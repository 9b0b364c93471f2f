"""Markdown out of program text: escaping (help strings and docstrings are plain text, not Markdown), tables, and
the names the site gives the methods the code cites by their source documents' file names."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

# The code cites its source documents by file (seeds/000 ...); the site names the method or standard instead.
SOURCES = {
    "000": "the IETF draft",
    "001": "Metron",
    "002": "vLLM's serving benchmark",
    "003": "exo bench's methodology",
    "004": "multi-bin dynamic batching",
}
_SOURCE = re.compile(r"seeds/(\d{3})(?:_\w+(?:\.txt)?)?")
_SPECIAL = re.compile(r"([\\`*_\[\]{}|#])")
_SPAN = re.compile(r"`[^`\n]+`")  # a code span of one backtick, as docstrings write them


@dataclass(frozen=True)
class Page:
    """One generated page: where it sits in the site (as if it were a file under docs/), its title and text."""

    src_uri: str
    title: str
    markdown: str


def name_sources(text: str) -> str:
    """`seeds/001` and the like, as the code cites its sources, replaced by the method's or standard's name."""
    return _SOURCE.sub(lambda m: SOURCES.get(m.group(1), "its source document"), text)


def _escaped(text: str) -> str:
    """Text with Markdown's and HTML's special characters escaped."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _SPECIAL.sub(r"\\\1", text)


def plain(text: str) -> str:
    """Program text shown as it reads (Markdown's and HTML's special characters escaped, sources named), but for its
    `code spans`, which help texts and docstrings mean as code and the site shows as code."""
    text = name_sources(text)
    out, last = [], 0
    for match in _SPAN.finditer(text):
        out += [_escaped(text[last : match.start()]), match.group(0)]
        last = match.end()
    return "".join([*out, _escaped(text[last:])])


def paragraphs(text: str) -> str:
    """Wrapped program text (a docstring, a command's help) as Markdown paragraphs: lines of a paragraph joined,
    blank lines kept, every line escaped."""
    blocks = re.split(r"\n\s*\n", text.strip())
    return "\n\n".join(plain(" ".join(line.strip() for line in block.splitlines())) for block in blocks if block)


def one_line(text: str) -> str:
    """Program text for a table cell: one line, escaped."""
    return plain(" ".join(text.split()))


def code(text: str) -> str:
    """Inline code that holds any text (a run of backticks inside it takes a longer fence)."""
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table of cells that are already Markdown (each on one line)."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell or " " for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def slug(name: str) -> str:
    """An anchor for a heading given explicitly (`{#slug}`), so links do not depend on the table of contents'
    own slugs."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


_CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def table_code_pipes(markdown: str) -> str:
    """`\\|` inside a code span of a table row (which GitHub needs to keep the cell whole) as a plain `|`:
    Python-Markdown never splits a cell inside a code span, and would show the backslash."""

    def unescape(match: re.Match[str]) -> str:
        return match.group(1) + match.group(2).replace("\\|", "|") + match.group(1)

    return "\n".join(
        _CODE_SPAN.sub(unescape, line) if line.lstrip().startswith("|") else line for line in markdown.split("\n")
    )
