"""Generated parts inside hand-written pages: a page holds `<!-- infermeter: NAME -->` where the part goes (an HTML
comment, alone on its line, so the page read on GitHub shows nothing there) and the build puts the part in its
place.  An unknown name fails the build."""

from __future__ import annotations

import re
from collections.abc import Callable

from infermeter_docgen import api, contracts, suites
from infermeter_docgen.text import code, one_line, table

MARKER = re.compile(r"^<!--\s*infermeter:\s*([\w.\-]+)\s*-->[ \t]*$", re.MULTILINE)  # alone on its line


class UnknownMarker(ValueError):
    """A page names a generated part that does not exist."""


def _contract(file: str) -> Callable[[str], str]:
    """The tables of one of the pydantic contracts (contracts.CONTRACTS), made when the page is built."""
    return lambda page: contracts.render(contracts.contract_tables(file))


def _records(page: str) -> str:
    from infermeter.records.schema import SCHEMA, RequestRecord

    return contracts.render([contracts.record_table(RequestRecord, SCHEMA)])


def _exporters(page: str) -> str:
    from infermeter.exports.spec import EXPORT_KINDS

    rows = [
        [code(f"--export {kind}" + (":WHERE" if required else "[:WHERE]")), one_line(what)]
        for kind, (required, what) in EXPORT_KINDS.items()
    ]
    return table(["option", "WHERE"], rows)


def _headline(page: str) -> str:
    """The headline figures every exporter and the catalog carry: each family of figures with what it measures,
    its unit as OpenTelemetry gets it (UCUM) and its Prometheus name (in base units)."""
    from infermeter.exports.measures import DISTRIBUTIONS, SINGLE, Measure
    from infermeter.metrics.headline import HEADLINE_STATS, Figure

    rows = []
    stats = "{" + ",".join(HEADLINE_STATS) + "}"
    for name, family in DISTRIBUTIONS.items():
        prometheus = Measure(Figure(name, "", 0.0, "neither"), family, "STAT").prometheus_name
        rows.append(
            [
                code(f"{name}.{stats}"),
                one_line(family.help),
                code(family.ucum),
                code(prometheus.replace("STAT", "<stat>")),
            ]
        )
    for name, family in SINGLE.items():
        prometheus = Measure(Figure(name, "", 0.0, "neither"), family, None).prometheus_name
        rows.append([code(name), one_line(family.help), code(family.ucum), code(prometheus)])
    return table(["figure", "what it is", "unit (UCUM)", "Prometheus name"], rows)


PARTS: dict[str, Callable[[str], str]] = {
    "suites": suites.suite_table,
    "api": lambda page: api.reference(),
    **{file: _contract(file) for file in contracts.CONTRACTS},
    "records": _records,
    "exporters": _exporters,
    "headline": _headline,
}


def fill(markdown: str, page: str) -> str:
    """The page's text with each marker replaced by its part (`page`: the page's docs-relative path, for links)."""

    def part(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in PARTS:
            raise UnknownMarker(f"{page}: no generated part named {name!r} (known: {', '.join(PARTS)})")
        return PARTS[name](page)

    return MARKER.sub(part, markdown)
