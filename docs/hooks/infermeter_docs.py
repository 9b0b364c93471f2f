"""The mkdocs hook (mkdocs.yml `hooks:`) that builds the site's generated parts from the code on every build: a
page per command and the Commands section of the navigation (from the CLI's command tree), and the parts that
hand-written pages name with `<!-- infermeter: NAME -->` (contracts, tests, Python API).  Nothing is written into
docs/: the command pages are virtual files."""

from __future__ import annotations

import logging
from typing import Any

from infermeter_docgen import commands, markers
from infermeter_docgen.text import table_code_pipes
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

log = logging.getLogger("mkdocs.plugins.infermeter_docs")
COMMANDS_SECTION = "Commands"  # the nav entry (`- Commands: commands/index.md`) the command pages replace

_tree: list[commands.Command] = []  # this build's command tree, read once in on_config


def on_config(config: Any) -> Any:
    """Read the command tree, warn of a command that cannot be loaded, and put every command's page in the nav."""
    tree = commands.command_tree()
    _tree[:] = [tree]
    for problem in commands.problems(tree):
        log.warning("command page: %s", problem)
    found = False
    for entry in config.nav or []:
        if isinstance(entry, dict) and COMMANDS_SECTION in entry:
            entry[COMMANDS_SECTION] = commands.nav(tree)
            found = True
    if not found:
        raise PluginError(f"mkdocs.yml's nav has no '{COMMANDS_SECTION}' entry for the command pages")
    return config


def on_files(files: Files, config: Any) -> Files:
    """Add the command pages as generated files (a file of docs/ at the same path is an error: it would drift)."""
    for page in commands.pages(_tree[0]):
        if files.get_file_from_path(page.src_uri) is not None:
            raise PluginError(f"docs/{page.src_uri} is generated from the CLI: remove it from docs/")
        files.append(File.generated(config, page.src_uri, content=page.markdown))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """Fill the generated parts a hand-written page names; keep `|` whole in its tables' code spans."""
    try:
        return markers.fill(table_code_pipes(markdown), page.file.src_uri)
    except markers.UnknownMarker as exc:
        raise PluginError(str(exc)) from None
