"""The command line loads a command's module only when the command runs: `import infermeter.cli` and
`infermeter --help` load none of the heavy packages, and the help lists every command as typer does once they are
all imported."""

from __future__ import annotations

import ast
import inspect
import json
import subprocess
import sys
from pathlib import Path

import typer.main
from typer.models import DefaultPlaceholder

from infermeter import cli
from infermeter.cli.lazy import COMMANDS, LazyGroup, Unlisted, modules
from tests.cli import infermeter

SRC = Path(__file__).resolve().parent.parent / "src" / "infermeter"

HEAVY = ("numpy", "scipy", "pyarrow", "aiohttp", "uvloop", "grpc", "jinja2", "plotly", "dask", "yaml")


def modules_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running `code` (listed on stderr: the code may print)."""
    probe = f"{code}\nimport sys\nprint(' '.join(sorted(sys.modules)), file=sys.stderr)"
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(p.stderr.split())


def loaded_after(code: str) -> set[str]:
    """Top-level packages a fresh interpreter holds after running `code`."""
    return {m.split(".")[0] for m in modules_after(code)}


def test_importing_the_cli_loads_no_heavy_package():
    assert loaded_after("import infermeter.cli") & set(HEAVY) == set()


def test_the_help_loads_no_heavy_package():
    code = "from infermeter.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass"
    assert loaded_after(code) & set(HEAVY) == set()


def test_a_command_loads_only_its_own_module():
    code = "from infermeter.cli import main\ntry:\n    main(['serve', '--help'])\nexcept SystemExit:\n    pass"
    modules = modules_after(code)
    assert "infermeter.cli.serve" in modules
    assert not {"infermeter.cli.run", "infermeter.cli.sim", "infermeter.cli.test", "infermeter.cli.report"} & modules


def test_the_table_lists_every_command_with_its_help_as_typer_shows_it():
    """COMMANDS names every command the modules declare, in order, each with the first paragraph of its help."""
    real = typer.main.get_command(cli.app)  # cli.app: every command module imported
    assert isinstance(real, LazyGroup)
    assert not any(isinstance(c, Unlisted) for c in real.commands.values())
    assert list(real.commands) == list(COMMANDS)  # none registered that the table lacks
    for name, command in real.commands.items():
        shown = inspect.cleandoc(command.short_help or command.help or "").split("\n\n")[0]
        assert COMMANDS[name].help == " ".join(shown.split()), name
        # what the table cannot say, no command uses
        assert not command.hidden and not command.deprecated, name
        panel = getattr(command, "rich_help_panel", None)
        assert panel is None or isinstance(panel, DefaultPlaceholder), name


def test_each_command_is_declared_by_the_module_the_table_names():
    """Importing the table's modules one by one registers exactly the commands the table gives each."""
    probe = (
        "import importlib, json, typer.main\n"
        "from infermeter.cli.app import app\n"
        "from infermeter.cli.lazy import Unlisted, modules\n"
        "seen, out = set(), {}\n"
        "for m in modules():\n"
        "    importlib.import_module(f'infermeter.cli.{m}')\n"
        "    real = {n for n, c in typer.main.get_group(app).commands.items() if not isinstance(c, Unlisted)}\n"
        "    out[m], seen = sorted(real - seen), real\n"
        "print(json.dumps(out))"
    )
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    expected = {m: sorted(n for n, listed in COMMANDS.items() if listed.module == m) for m in modules()}
    assert json.loads(p.stdout) == expected


def test_the_listing_is_the_table_whether_or_not_the_commands_are_imported():
    lazy = LazyGroup(name="infermeter")  # no command registered: every one a placeholder
    real = typer.main.get_command(cli.app)
    for group in (lazy, real):
        ctx = group.make_context("infermeter", ["--help"], resilient_parsing=True)
        assert isinstance(group, LazyGroup)
        group.listing = True
        try:
            listed = {n: group.get_command(ctx, n) for n in group.list_commands(ctx)}
        finally:
            group.listing = False
        assert {n: c.help for n, c in listed.items()} == {n: c.help for n, c in COMMANDS.items()}


def test_the_cli_imports_no_private_typer_module_and_parses_no_source():
    """The lazy listing rests on typer's public modules only, and on no reading of the CLI's own files."""
    for path in (SRC / "cli").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            for name in names:
                parts = name.split(".")
                assert not (parts[0] in ("typer", "click") and any(p.startswith("_") for p in parts)), (path, name)
                assert parts[0] != "ast" or path.name != "lazy.py", path


def test_help_and_a_command_run_as_before():
    top = infermeter("--help")
    assert top.returncode == 0
    for name in COMMANDS:
        assert name in top.stdout
    assert infermeter("test", "--list").stdout.count("\n") >= 10
    unknown = infermeter("reprot")
    assert unknown.returncode == 2 and "No such command 'reprot'" in unknown.stderr and "report" in unknown.stderr
