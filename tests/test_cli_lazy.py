"""The command line loads a command's module only when the command runs: `import infermeter.cli` and
`infermeter --help` load none of the heavy packages, and the help lists every command as typer does once they are
all imported."""

from __future__ import annotations

import subprocess
import sys

import typer.main
from typer.models import DefaultPlaceholder

from infermeter import cli
from infermeter.cli.lazy import LISTED, LazyGroup, Unlisted, declared
from tests.cli import infermeter

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


def test_the_listing_is_what_typer_makes_of_the_imported_commands():
    """Every command, in order, with what the help shows of it, as read from the sources equals the real one."""
    real = typer.main.get_command(cli.app)  # cli.app: every command module imported
    assert isinstance(real, LazyGroup)
    assert not any(isinstance(c, Unlisted) for c in real.commands.values())
    assert [d.name for d in declared()] == list(real.commands)
    for d in declared():
        placeholder = Unlisted(name=d.name, **d.attrs)
        assert shown(placeholder) == shown(real.commands[d.name]), d.name


def shown(command: object) -> dict[str, object]:
    """What the listing shows of a command (typer's unset defaults as their values)."""
    return {k: v.value if isinstance(v := getattr(command, k), DefaultPlaceholder) else v for k in LISTED}


def test_help_and_a_command_run_as_before():
    top = infermeter("--help")
    assert top.returncode == 0
    for d in declared():
        assert d.name in top.stdout
    assert infermeter("test", "--list").stdout.count("\n") >= 10
    unknown = infermeter("reprot")
    assert unknown.returncode == 2 and "No such command 'reprot'" in unknown.stderr and "report" in unknown.stderr
