"""The `infermeter` command group, lazily: a command's module is imported when that command runs or shows its own
help, so `infermeter --help` and each command start without loading what the others need.

`infermeter --help` lists the commands from their modules' source: a command is a top-level function decorated with
`@app.command(...)` (its name, and help, short_help, hidden, deprecated or rich_help_panel, as literals) and a group is
`app.add_typer(X, name="...")` of an `X = typer.Typer(help="...")`.  tests/test_cli_lazy.py holds the listing to what
typer makes of the imported modules.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import typer.main
from typer._click import Context, HelpFormatter
from typer.core import TyperCommand, TyperGroup

# the modules that declare commands, in the order `infermeter --help` lists them (a group after every command)
MODULES = ("calibrate", "compare", "sim", "predict", "report", "run", "serve", "workload", "test")
LISTED = ("help", "short_help", "hidden", "deprecated", "rich_help_panel")  # what the listing shows of a command


@dataclass(frozen=True)
class Declared:
    """A command (or group) as its module's source declares it."""

    name: str
    module: str
    attrs: dict[str, Any] = field(default_factory=dict)


class Unlisted(TyperCommand):
    """Stands in for a command whose module is not imported yet: enough to list it."""

    module: str = ""


@functools.cache
def declared() -> tuple[Declared, ...]:
    """Every command, then every group, of MODULES, from their source."""
    commands: list[Declared] = []
    groups: list[Declared] = []
    for module in MODULES:
        path = Path(__file__).with_name(f"{module}.py")
        tree = ast.parse(path.read_text(), str(path))
        typers: dict[str, dict[str, Any]] = {}
        for node in tree.body:
            where = f"{path.name}:{node.lineno}"
            if isinstance(node, ast.Assign) and _call_of(node.value, "typer", "Typer"):
                typers.update({t.id: _literals(node.value, where) for t in node.targets if isinstance(t, ast.Name)})
            elif isinstance(node, ast.FunctionDef):
                for decorator in node.decorator_list:
                    if _call_of(decorator, "app", "command"):
                        commands.append(_command(node, decorator, module, where))  # type: ignore[arg-type]
            elif isinstance(node, ast.Expr) and _call_of(node.value, "app", "add_typer"):
                call = node.value
                options = _literals(call, where)  # type: ignore[arg-type]
                sub = call.args[0] if call.args else None  # type: ignore[attr-defined]
                if not isinstance(sub, ast.Name) or sub.id not in typers or "name" not in options:
                    raise TypeError(f"{where}: add_typer(X, name='...') of an X = typer.Typer(...) is listed")
                helps = {k: v for k, v in {**typers[sub.id], **options}.items() if k in LISTED}
                if "help" in helps:
                    helps["help"] = inspect.cleandoc(helps["help"])
                groups.append(Declared(options["name"], module, helps))
    return (*commands, *groups)


def _call_of(node: ast.AST, owner: str, method: str) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == method
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == owner
    )


def _literals(call: ast.Call, where: str) -> dict[str, Any]:
    """A call's keyword arguments that the listing shows (or names a command by), which must be literals."""
    out = {}
    for keyword in call.keywords:
        if keyword.arg in (*LISTED, "name"):
            if not isinstance(keyword.value, ast.Constant):
                raise TypeError(f"{where}: {keyword.arg}= must be a literal for `infermeter --help` to list it")
            out[keyword.arg] = keyword.value.value
    return out


def _command(fn: ast.FunctionDef, decorator: ast.Call, module: str, where: str) -> Declared:
    """A command as typer names and describes it: the decorator's name, else the function's; its help, else the
    function's docstring."""
    attrs = _literals(decorator, where)
    if decorator.args:
        if not isinstance(decorator.args[0], ast.Constant):
            raise TypeError(f"{where}: a command's name must be a literal for `infermeter --help` to list it")
        attrs["name"] = decorator.args[0].value
    name = attrs.pop("name", None) or typer.main.get_command_name(fn.name)
    if "help" in attrs:
        attrs["help"] = inspect.cleandoc(attrs["help"])
    else:
        attrs["help"] = ast.get_docstring(fn)
    return Declared(name, module, attrs)


class LazyGroup(TyperGroup):
    """The top-level group: commands whose module is not imported yet stand listed by `Unlisted` placeholders,
    replaced by the real command (its module imported) the moment one is looked up for running or its own help.
    `typer_app` is the app the modules register their commands with (cli.app sets it)."""

    typer_app: typer.Typer | None = None

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.listing = False
        built = dict(self.commands)
        self.commands = {}
        for d in declared():
            placeholder = Unlisted(name=d.name, **d.attrs)
            placeholder.module = d.module
            self.commands[d.name] = built.pop(d.name, placeholder)
        self.commands.update(built)  # registered some other way: listed last

    def get_command(self, ctx: Context, cmd_name: str) -> Any:
        command = self.commands.get(cmd_name)
        if isinstance(command, Unlisted) and not self.listing:
            assert self.typer_app is not None
            importlib.import_module(f"infermeter.cli.{command.module}")
            command = self.commands[cmd_name] = typer.main.get_group(self.typer_app).commands[cmd_name]
        return command

    def format_help(self, ctx: Context, formatter: HelpFormatter) -> None:
        """The help lists the commands without importing them."""
        self.listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self.listing = False
