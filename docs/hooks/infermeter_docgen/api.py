"""The Python API's reference: the signature and docstring of every name `infermeter.__all__` exports (a class with
its public methods and properties), in `__all__`'s order, so the page follows the package."""

from __future__ import annotations

import importlib
import inspect
import re
from typing import Any

from pydantic import BaseModel

from infermeter_docgen.contracts import CONTRACTS
from infermeter_docgen.text import name_sources, paragraphs

PACKAGE = "infermeter"
NOT_INSTALLED = "This version of infermeter exports no Python API (its package declares no `__all__`)."


class _Shown:
    """An annotation kept as the source wrote it (a string under `from __future__ import annotations`), shown
    without quotes."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def signature(obj: Any) -> str:
    """`(run_dir: str | Path) -> Run`: the call's parameters and return as the source annotates them."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return "(...)"
    shown = [
        p.replace(annotation=_Shown(p.annotation)) if isinstance(p.annotation, str) else p
        for p in sig.parameters.values()
    ]
    returns = sig.return_annotation
    return str(
        sig.replace(parameters=shown, return_annotation=_Shown(returns) if isinstance(returns, str) else returns)
    )


def docstring(obj: Any) -> str:
    """A docstring as Markdown: prose as paragraphs, a doctest (a block opening with `>>>`) or an indented block as
    Python code."""
    doc = inspect.getdoc(obj) or ""
    out = []
    for block in re.split(r"\n\s*\n", doc.strip()):
        lines = block.splitlines()
        if lines and (lines[0].startswith(">>>") or all(line.startswith("    ") for line in lines)):
            out.append("```python\n" + name_sources(inspect.cleandoc(block)) + "\n```")
        elif block.strip():
            out.append(paragraphs(block))
    return "\n\n".join(out)


def wrapped(head: str, width: int = 100) -> str:
    """A `def name(...)` line past `width` as one parameter a line (split at the parameter list's own commas)."""
    start = head.find("(")
    if len(head) <= width or start < 0:
        return head
    depth, end, cut, parts, quote = 0, start, start + 1, [], ""
    for i in range(start, len(head)):
        if quote:  # inside a string default: nothing counts until it closes
            quote = "" if head[i] == quote and head[i - 1] != "\\" else quote
            continue
        quote = head[i] if head[i] in "'\"" else ""
        depth += head[i] in "([{"
        depth -= head[i] in ")]}"
        if depth == 1 and head[i] == ",":
            parts.append(head[cut:i].strip())
            cut = i + 1
        if depth == 0:
            end = i
            break
    parts.append(head[cut:end].strip())
    inner = "".join(f"    {p},\n" for p in parts if p)
    return f"{head[: start + 1]}\n{inner}{head[end:]}"


def members(cls: type) -> list[tuple[str, Any]]:
    """A class's public methods and properties declared in infermeter, in source order."""
    out = []
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        target = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
        if isinstance(value, property) or inspect.isfunction(target):
            out.append((name, value))
    return out


def heading(name: str, obj: Any) -> str:
    """The code line that heads a name's section: a function's `def` with its signature; a pydantic model or an
    exception by its bases (its fields are a contract's table, its arguments a message); another class with the
    signature it is called with."""
    if inspect.isclass(obj):
        if issubclass(obj, BaseModel | BaseException):
            return f"class {name}({', '.join(base.__name__ for base in obj.__bases__)})"
        return wrapped(f"class {name}{signature(obj)}")
    kind = "async def" if inspect.iscoroutinefunction(obj) else "def"
    return wrapped(f"{kind} {name}{signature(obj)}")


def contract_link(obj: Any) -> str:
    """For a model that is one of the contracts, a line linking to its tables (from api.md)."""
    target = f"{getattr(obj, '__module__', '')}:{getattr(obj, '__qualname__', '')}"
    for file, (root, page) in CONTRACTS.items():
        if root == target:
            return f"Its fields are {file}'s keys: [the {file} tables]({page})."
    return ""


def entry(name: str, obj: Any) -> str:
    """One exported name's section."""
    if not callable(obj):
        return "\n".join([f"## `{name}`", "", f"```python\n{name}: {type(obj).__name__}\n```", ""])
    lines = [f"## `{name}`", "", f"```python\n{heading(name, obj)}\n```", "", docstring(obj), ""]
    if link := contract_link(obj):
        lines += [link, ""]
    if inspect.isclass(obj):
        for member, value in members(obj):
            if isinstance(value, property):
                head = f"{name}.{member}  # property"
                target = value.fget
            else:
                target = getattr(value, "__func__", value)
                prefix = "async def" if inspect.iscoroutinefunction(target) else "def"
                head = wrapped(f"{prefix} {name}.{member}{signature(value)}")
            lines += [f"### `{name}.{member}`", "", f"```python\n{head}\n```", "", docstring(target), ""]
    return "\n".join(lines)


def reference() -> str:
    """Every exported name's section, or a line saying that the package exports no API."""
    package = importlib.import_module(PACKAGE)
    names = getattr(package, "__all__", None)
    if not names:
        return NOT_INSTALLED
    return "\n".join(entry(name, getattr(package, name)) for name in names)
