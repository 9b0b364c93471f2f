"""The tests' list from the suite registry (`infermeter.suites.registry.SUITES`): each test's name, the method it
follows, its title and what it does, linked to its command's page."""

from __future__ import annotations

import posixpath

from infermeter_docgen.text import code, one_line, table


def suite_table(page: str) -> str:
    """The table of infermeter's own tests (another package's are left out: they are not part of this site), each
    name linked to `commands/test/NAME.md` relative to `page`."""
    from infermeter.plugins import BUILTIN
    from infermeter.suites.registry import SUITES

    rows = []
    for name in SUITES:
        if SUITES[name].package != BUILTIN:
            continue
        suite = SUITES.load(name)
        assert suite is not None  # a built-in suite always loads
        link = posixpath.relpath(f"commands/test/{name}.md", posixpath.dirname(page))
        rows.append(
            [f"[{code(name)}]({link})", one_line(suite.reference), one_line(suite.title), one_line(suite.summary)]
        )
    return table(["test", "method", "title", "what it runs and shows"], rows)
