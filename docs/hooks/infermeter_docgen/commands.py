"""A page per command from the CLI's own command tree (`infermeter.cli.app.command_group()`, each command resolved
as `infermeter` resolves it, groups walked down to every subcommand): its usage line, help, options and arguments.

The tree is read through the attributes click's and typer's commands and parameters share (`params`, `opts`,
`help`, `list_commands`, `get_command`), so a typer built on click and one that carries its own copy of it both
work."""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from infermeter_docgen.text import Page, code, one_line, paragraphs, table

ROOT = "infermeter"


@dataclass(frozen=True)
class Param:
    """One option or argument as its table row shows it: names, the value it takes, its default, its help."""

    names: list[str]
    kind: str
    default: str
    help: str
    argument: bool


@dataclass
class Command:
    """One command or group of the tree, with what its page shows; `problem` says why it could not be loaded."""

    path: tuple[str, ...]
    usage: str = ""
    help: str = ""
    params: list[Param] = field(default_factory=list)
    subcommands: list[Command] = field(default_factory=list)
    runs_alone: bool = False  # a group that also runs without a subcommand (its options are its own)
    problem: str | None = None

    @property
    def name(self) -> str:
        return " ".join((ROOT, *self.path))

    @property
    def group(self) -> bool:
        return bool(self.subcommands) or self.runs_alone

    @property
    def src_uri(self) -> str:
        """`commands/run.md`; a group's page is its directory's index: `commands/test/index.md`."""
        if not self.path:
            return "commands/index.md"
        return (
            "/".join(("commands", *self.path, "index.md"))
            if self.subcommands
            else "/".join(("commands", *self.path)) + ".md"
        )

    def walk(self) -> Iterator[Command]:
        """This command, then every command below it, depth first in the listing's order."""
        yield self
        for sub in self.subcommands:
            yield from sub.walk()


def command_tree() -> Command:
    """The whole CLI: `infermeter` and every command and subcommand under it, each one loaded."""
    from infermeter.cli.app import command_group

    group = command_group()
    context_class = type(group).context_class
    return _read(group, context_class(group, info_name=ROOT), ())


def _read(cmd: Any, ctx: Any, path: tuple[str, ...]) -> Command:
    """One command of the tree and, for a group, its subcommands (each from the group, as the CLI resolves it)."""
    out = Command(
        path=path,
        usage=cmd.get_usage(ctx).strip(),
        help=cmd.help or "",
        params=[_param(p, ctx) for p in cmd.params if not getattr(p, "hidden", False)],
        runs_alone=bool(getattr(cmd, "invoke_without_command", False)),
    )
    if hasattr(cmd, "list_commands"):
        for name in cmd.list_commands(ctx):
            try:
                sub = cmd.get_command(ctx, name)
            except Exception as exc:  # a command's module that fails to import: its page says so, the build warns
                out.subcommands.append(Command(path=(*path, name), problem=f"{type(exc).__name__}: {exc}"))
                continue
            if sub is None or getattr(sub, "hidden", False):
                continue
            out.subcommands.append(_read(sub, type(ctx)(sub, parent=ctx, info_name=name), (*path, name)))
    return out


def _param(param: Any, ctx: Any) -> Param:
    """A parameter's row: its names (`--x / --no-x`), value kind, default and help."""
    argument = getattr(param, "param_type_name", "") == "argument"
    if argument:
        names = [(param.metavar or param.name).upper()]
    else:
        short_first = sorted(param.opts, key=lambda opt: len(opt) - len(opt.lstrip("-")))  # as --help lists them
        names = [*short_first, *([" / ".join(param.secondary_opts)] if getattr(param, "secondary_opts", None) else [])]
    return Param(names, _kind(param, ctx), _default(param), " ".join(param_help(param).split()), argument)


def param_help(param: Any) -> str:
    """A parameter's help text (arguments have one in typer, none in click)."""
    return str(getattr(param, "help", None) or "")


def _kind(param: Any, ctx: Any) -> str:
    """The value a parameter takes, as the help shows it (`float`, `a|b`, `Path`), `flag` for a flag; a repeatable
    option names its element and says so."""
    if getattr(param, "is_flag", False) or getattr(param, "count", False):
        return "count" if getattr(param, "count", False) else "flag"
    if hasattr(param, "display_type"):  # typer with its own click
        shown = str(param.display_type(ctx)).strip("<>")
    else:  # click: the type's name, or its choices
        kind = param.type
        choices = getattr(kind, "choices", None)
        shown = "|".join(map(str, choices)) if choices else str(getattr(kind, "name", kind))
    shown = shown.replace("typing.", "")
    repeatable = getattr(param, "multiple", False) or getattr(param, "nargs", 1) == -1
    inner = re.fullmatch(r"list\[(.*)\]", shown)
    if repeatable and inner:
        shown = inner.group(1)
    if repeatable:
        return f"{shown}, {'repeatable' if getattr(param, 'multiple', False) else 'one or more'}"
    return shown


def _default(param: Any) -> str:
    """The default a parameter's declaration gives, as its help shows it where the declaration says how (`5%`);
    empty when there is none to show: None, an empty list, or a value computed at run time."""
    shown = getattr(param, "show_default", None)
    if isinstance(shown, str) and shown:
        return shown
    default = param.default
    if default is None or callable(default) or default in ((), []):
        return ""
    if isinstance(default, bool):
        return "on" if default else "off"
    if isinstance(default, str | int | float):
        return str(default)
    try:
        return json.dumps(default, default=str)
    except (TypeError, ValueError):
        return str(default)


def render(cmd: Command) -> str:
    """A command's page: its usage line, help, arguments and options, and the subcommands of a group."""
    lines = [f"# {cmd.name}", ""]
    if cmd.problem:
        return "\n".join([*lines, f"This command could not be loaded: {code(cmd.problem)}", ""])
    lines += ["```text", cmd.usage, "```", ""]
    if cmd.help:
        lines += [paragraphs(cmd.help), ""]
    arguments = [p for p in cmd.params if p.argument]
    options = [p for p in cmd.params if not p.argument]
    if arguments:
        rows = [[code(p.names[0]), one_line(p.kind), one_line(p.help)] for p in arguments]
        lines += ["## Arguments", "", table(["argument", "value", "what it is"], rows), ""]
    if options:
        title = "Options of the group itself" if cmd.subcommands else "Options"
        rows = [
            [
                " ".join(code(n) for n in p.names),
                one_line(p.kind),
                code(p.default) if p.default else "",
                one_line(p.help),
            ]
            for p in options
        ]
        lines += [f"## {title}", "", table(["option", "value", "default", "what it does"], rows), ""]
    if cmd.subcommands:
        lines += ["## Commands", "", listing(cmd.subcommands, cmd), ""]
    return "\n".join(lines)


def listing(commands: list[Command], here: Command) -> str:
    """A table of commands, each linked to its page (relative to `here`'s page) with its help's first sentence."""
    rows = [[f"[{code(c.name)}]({relative(here.src_uri, c.src_uri)})", one_line(first_sentence(c))] for c in commands]
    return table(["command", "what it does"], rows)


def first_sentence(cmd: Command) -> str:
    """What a listing says of a command: its help's first paragraph (the line `infermeter --help` shows)."""
    if cmd.problem:
        return "could not be loaded"
    return re.split(r"\n\s*\n", cmd.help.strip(), maxsplit=1)[0] if cmd.help else ""


def relative(here: str, there: str) -> str:
    """The link from the page at `here` to the page at `there` (both docs-relative `.md` paths)."""
    return posixpath.relpath(there, posixpath.dirname(here))


def index(root: Command) -> str:
    """commands/index.md: the top-level usage and every command and subcommand, one line each."""
    lines = ["# Commands", "", "```text", root.usage, "```", "", paragraphs(root.help), ""]
    lines += [
        "Every page below is generated from the command-line interface itself when the site is built, so it says",
        "exactly what `--help` says.",
        "",
        listing([c for c in root.walk() if c is not root], root),
        "",
    ]
    return "\n".join(lines)


def pages(root: Command) -> list[Page]:
    """The commands' pages: the index, then one per command and subcommand."""
    out = [Page(root.src_uri, "Commands", index(root))]
    out += [Page(c.src_uri, c.name, render(c)) for c in root.walk() if c is not root]
    return out


def nav(cmd: Command) -> list[Any]:
    """The navigation entries of a group's pages (mkdocs' nav structure): its own page first, then a line per
    command, a group as a section of its own."""
    entries: list[Any] = [cmd.src_uri]
    for sub in cmd.subcommands:
        entries.append({sub.path[-1]: nav(sub) if sub.subcommands else sub.src_uri})
    return entries


def problems(root: Command) -> list[str]:
    """Commands that could not be loaded, each with why: the build warns of each (a strict build fails)."""
    return [f"{c.name}: {c.problem}" for c in root.walk() if c.problem]
