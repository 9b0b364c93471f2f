"""The contracts' tables (run.json, summary.json, suite.json, the records) from the types that read and write them:
a table per pydantic model, the model first and then every block it holds, each field with its JSON key, type,
default and description.

A field's description is its `Field(description=...)` where it has one; otherwise the comment the source gives it
(on its line, or the comment lines right above it), read from the class's source with `inspect` and `tokenize`,
since pydantic keeps no comments; the class docstring heads each table."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import io
import json
import textwrap
import tokenize
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from infermeter_docgen.text import code, one_line, paragraphs, slug, table

# each contract file: its root model ("module:Model") and its page, docs-relative
CONTRACTS = {
    "run.json": ("infermeter.run_info:RunInfo", "contracts/run-json.md"),
    "summary.json": ("infermeter.metrics.summary_model:Summary", "contracts/summary-json.md"),
    "suite.json": ("infermeter.suite_result:SuiteResult", "contracts/suite-json.md"),
}
JSON_NAMES = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}


@dataclass(frozen=True)
class Row:
    """One field: its JSON key (or column), type (Markdown, blocks linked), default and description."""

    key: str
    type: str
    default: str
    description: str


@dataclass(frozen=True)
class ModelTable:
    """One model's table, headed by its name (with an anchor the type column's links point at) and docstring."""

    name: str
    anchor: str
    doc: str
    rows: list[Row]


def field_comments(cls: type) -> dict[str, str]:
    """The comment the source gives each field of a class body: the one ending its line, else the comment lines
    right above it (a blank line or another statement in between breaks the link).  Empty when the source cannot
    be read."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    comments: dict[str, str] = {}
    above: list[str] = []
    line: list[tokenize.TokenInfo] = []
    trailing: list[str] = []
    depth = 0
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.INDENT:
            depth += 1
        elif tok.type == tokenize.DEDENT:
            depth -= 1
        elif tok.type == tokenize.COMMENT:
            text = tok.string.lstrip("#").strip()
            (trailing if line else above).append(text)
        elif tok.type == tokenize.NL and not line and not above:
            continue
        elif tok.type == tokenize.NL and not line:
            above = [] if tok.line.strip() == "" else above
        elif tok.type == tokenize.NEWLINE:
            is_field = depth == 1 and len(line) > 1 and line[0].type == tokenize.NAME and line[1].string == ":"
            if is_field and (trailing or above):
                comments[line[0].string] = " ".join(trailing or above)
            line, trailing, above = [], [], []
        else:
            line.append(tok)
    return comments


def inherited_comments(cls: type) -> dict[str, str]:
    """Field comments of a class and the classes it inherits from (the class that declares a field wins)."""
    out: dict[str, str] = {}
    for base in reversed(cls.__mro__[:-1]):
        if base.__module__.startswith(("pydantic", "builtins")):
            continue
        out.update(field_comments(base))
    return out


def type_text(annotation: Any, link: Callable[[type[BaseModel]], str]) -> str:
    """A field's type in the JSON document's words: `string`, `number or null`, `list[` a linked block `]`, ..."""
    origin = get_origin(annotation)
    args = get_args(annotation)
    if annotation is Any:
        return "any"
    if origin is Literal:
        values = [code(json.dumps(a)) for a in args]
        return values[0] if len(values) == 1 else "one of " + ", ".join(values)
    if origin in (Union, types.UnionType):
        return " or ".join(type_text(a, link) for a in args)
    if origin is not None and hasattr(annotation, "__metadata__"):  # Annotated[T, ...]
        return type_text(args[0], link)
    if isinstance(origin, type) and issubclass(origin, Mapping):
        return f"dict[{type_text(args[0], link)}, {type_text(args[1], link)}]" if args else "dict"
    if isinstance(origin, type) and issubclass(origin, Sequence | set | frozenset):
        return f"list[{type_text(args[0], link)}]" if args else "list"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return link(annotation)
    if annotation in JSON_NAMES:
        return JSON_NAMES[annotation]
    if annotation is dict:
        return "dict"
    if annotation is list:
        return "list"
    return getattr(annotation, "__name__", str(annotation))


def models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models a field's type holds, in the order they appear in it."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for arg in get_args(annotation) for model in models_in(arg)]


def model_tree(root: type[BaseModel]) -> list[type[BaseModel]]:
    """A model and every model its fields hold, at any depth, each once, breadth first."""
    seen: list[type[BaseModel]] = [root]
    for model in seen:  # grows as it goes
        for info in model.model_fields.values():
            seen += [m for m in models_in(info.annotation) if m not in seen]
    return seen


def anchors(models: list[type[BaseModel]]) -> dict[type[BaseModel], str]:
    """An anchor per model, unique on its page (a name two modules share gets its module's name too)."""
    out: dict[type[BaseModel], str] = {}
    for model in models:
        anchor = slug(model.__name__)
        if anchor in out.values():
            anchor = slug(f"{model.__module__.rsplit('.', 1)[-1]}-{model.__name__}")
        out[model] = anchor
    return out


def default_text(info: FieldInfo, left_out: bool) -> str:
    """What a field holds when not given: `required`, `left out` (the block leaves it out of the JSON), or its
    default as JSON."""
    if left_out:
        return "left out"
    if info.is_required():
        return "required"
    factory = info.default_factory
    if factory is not None:
        if factory in (list, dict, set):
            return code(json.dumps(factory()))
        if isinstance(factory, type) and issubclass(factory, BaseModel):
            return "an empty block"
        return "set when written"
    if info.default is PydanticUndefined:
        return "required"
    try:
        return code(json.dumps(info.default))
    except (TypeError, ValueError):
        return code(str(info.default))


def model_table(model: type[BaseModel], link: Callable[[type[BaseModel]], str], anchor: str) -> ModelTable:
    """One model's table; a block's OPTIONAL fields (summary.json) are "left out" unless given."""
    comments = inherited_comments(model)
    optional: frozenset[str] = getattr(model, "OPTIONAL", frozenset())
    rows = []
    for name, info in model.model_fields.items():
        key = info.serialization_alias or info.alias or name
        described = info.description or comments.get(name, "")
        left_out = name in optional
        rows.append(Row(key, type_text(info.annotation, link), default_text(info, left_out), described))
    return ModelTable(model.__name__, anchor, inspect.getdoc(model) or "", rows)


def model_tables(root: type[BaseModel]) -> list[ModelTable]:
    """The tables of a contract: its root model's, then each block's, every type linked to its block's table."""
    models = model_tree(root)
    names = anchors(models)
    return [model_table(m, lambda b: f"[{b.__name__}](#{names[b]})", names[m]) for m in models]


def record_table(record: type, schema: Any) -> ModelTable:
    """The records' table: each column of the Arrow schema (records.parquet), with the record field it holds,
    its default and the source's comment.  A record field missing from the schema is listed too, as not stored."""
    comments = field_comments(record)
    fields = {f.name: f for f in dataclasses.fields(record)}
    rows = []
    for column in schema:
        f = fields.get(column.name)
        default = "" if f is None else _dataclass_default(f)
        rows.append(Row(column.name, code(str(column.type)), default, comments.get(column.name, "")))
    for name in fields.keys() - set(schema.names):
        rows.append(Row(name, "not stored", _dataclass_default(fields[name]), comments.get(name, "")))
    return ModelTable(record.__name__, slug(record.__name__), inspect.getdoc(record) or "", rows)


def _dataclass_default(f: dataclasses.Field[Any]) -> str:
    """A record field's default as JSON (`required` where it has none)."""
    if f.default is not dataclasses.MISSING:
        return code(json.dumps(f.default))
    if f.default_factory is not dataclasses.MISSING:
        return code(json.dumps(f.default_factory()))
    return "required"


def contract_tables(file: str) -> list[ModelTable]:
    """The tables of one of CONTRACTS by its file name, the root model imported when asked for."""
    module, _, name = CONTRACTS[file][0].partition(":")
    return model_tables(getattr(importlib.import_module(module), name))


def render(tables: list[ModelTable], heading: str = "###") -> str:
    """The tables as Markdown, each under its own heading and anchor."""
    out = []
    for t in tables:
        rows = [[code(r.key), r.type, r.default, one_line(r.description)] for r in t.rows]
        out += [f"{heading} {t.name} {{#{t.anchor}}}", ""]
        if t.doc:
            out += [paragraphs(t.doc), ""]
        out += [table(["key", "type", "default", "description"], rows), ""]
    return "\n".join(out)
