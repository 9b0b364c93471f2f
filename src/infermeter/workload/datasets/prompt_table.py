"""Prompt tables (JSONL, CSV, Parquet): one row one turn, its `prompt` sent verbatim, or a `messages` row that is a
whole conversation; rows sharing a `session_id` are one multi-turn session (in file order, or by `turn`).  An `image`
or `images` column names images sent with the row (its last turn): files relative to the dataset, or data: URLs."""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, field

from infermeter.errors import UserError
from infermeter.workload.dataset import Session, Turn
from infermeter.workload.datasets.fields import NonDecreasing, number, optional_text, positive_int, show, text, whole
from infermeter.workload.datasets.reader import Read
from infermeter.workload.datasets.sharegpt import conversation
from infermeter.workload.datasets.source import Rows, Source
from infermeter.workload.datasets.tables import csv_rows, csv_table, parquet_table, table_rows

REPLY_FIELDS = ("reply", "completion", "response")
IMAGE_FIELDS = ("image", "images")
TEXT_COLUMNS = ("prompt", *REPLY_FIELDS, "session_id", "request_class", *IMAGE_FIELDS)
NUMBER_COLUMNS = ("output_tokens", "timestamp", "turn")
EMPTY_PROMPT = "empty prompt"


@dataclass
class _Part:
    """One row's share of a session."""

    index: int  # its position among the rows
    turn: int | None
    turns: tuple[Turn, ...]
    whole: bool  # a messages row: a conversation on its own


@dataclass
class _Group:
    """The rows of one session, gathered in file order."""

    key: str
    timestamp_s: float | None
    label: str
    system: str | None
    parts: list[_Part] = field(default_factory=list)


def read_jsonl(source: Source, block_tokens: int) -> Read:
    """A JSONL file (or a JSON array) of prompt rows."""
    return table_sessions(source.json_rows)


def read_csv(source: Source, block_tokens: int) -> Read:
    """A CSV of prompt rows (no `messages`: a CSV cell holds no list)."""
    rows = csv_rows(source.path, csv_table(source.path, TEXT_COLUMNS))
    for item in rows.items:
        assert isinstance(item, dict)
        for name in NUMBER_COLUMNS:
            if isinstance(value := item.get(name), str):
                item[name] = _number_from_text(value)
        for name in ("session_id", *REPLY_FIELDS, *IMAGE_FIELDS):
            if item.get(name) == "":
                item[name] = None  # an empty cell: no reply; a session of its own
    return table_sessions(rows)


def read_parquet(source: Source, block_tokens: int) -> Read:
    """A Parquet file of prompt rows."""
    return table_sessions(table_rows(source.path, parquet_table(source.path)))


def table_sessions(rows: Rows) -> Read:
    """Prompt rows as sessions, in the order each session's first row comes."""
    read = Read(rows=len(rows.items))
    clock = NonDecreasing(rows, "timestamp")
    groups: list[_Group] = []
    by_id: dict[str, _Group] = {}
    for i, obj in enumerate(rows.items):
        if not isinstance(obj, dict):
            raise rows.fail(i, f'{show(obj)} is not an object: each row is {{"prompt": ...}}')
        timestamp = obj.get("timestamp")
        timestamp_s = None if timestamp is None else number(rows, i, "timestamp", timestamp, "seconds")
        clock.check(i, timestamp_s)
        session_id = _session_id(rows, i, obj.get("session_id"))
        turn = obj.get("turn")
        if turn is not None and whole(turn) is None:
            raise rows.fail(i, f"turn {show(turn)} is not a whole number: give each turn's place in its session")
        made = _turns(rows, i, obj)
        if isinstance(made, str):
            read.dropped[made] += 1
            continue
        turns, system, is_whole = made
        part = _Part(i, whole(turn), turns, is_whole)
        group = by_id.get(session_id) if session_id is not None else None
        if group is None:
            label = optional_text(rows, i, "request_class", obj.get("request_class")) or ""
            key = session_id if session_id is not None else str(rows.numbers[i])
            group = _Group(key, timestamp_s, label, system)
            groups.append(group)
            if session_id is not None:
                by_id[session_id] = group
        elif is_whole or group.parts[0].whole:
            first = rows.numbers[group.parts[0].index]
            raise rows.fail(
                i,
                f"session_id {session_id!r} is also on row {first}, and a messages row is a whole conversation: "
                "give it a session_id of its own",
            )
        group.parts.append(part)
    read.sessions = [_session(rows, g) for g in groups]
    return read


def _turns(rows: Rows, i: int, obj: dict[str, object]) -> tuple[tuple[Turn, ...], str | None, bool] | str:
    """Row i's turns, the system message opening them, and whether it is a whole conversation; or why it is
    dropped."""
    prompt, messages = obj.get("prompt"), obj.get("messages")
    if prompt is None and messages is None:
        raise rows.fail(i, "prompt is missing: give each row a prompt (the user's text) or messages (a conversation)")
    if prompt is not None and messages is not None:
        raise rows.fail(i, "has both prompt and messages: give one of them")
    raw_output = obj.get("output_tokens")
    output_tokens = None if raw_output is None else positive_int(rows, i, "output_tokens", raw_output)
    reply_field = next((name for name in REPLY_FIELDS if obj.get(name) is not None), None)
    reply = None if reply_field is None else text(rows, i, reply_field, obj[reply_field])
    images = _images(rows, i, obj)
    if prompt is not None:
        if not text(rows, i, "prompt", prompt).strip():
            return EMPTY_PROMPT
        return (Turn(str(prompt), output_tokens=output_tokens, reply=reply, images=images),), None, False
    conv = conversation(rows, i, "messages", messages)
    if isinstance(conv, str):
        return conv
    last = conv.turns[-1]  # the row's own output_tokens and reply answer its last user message
    last = dataclasses.replace(
        last,
        output_tokens=output_tokens if output_tokens is not None else last.output_tokens,
        reply=last.reply if last.reply is not None else reply,
        images=images,
    )
    return (*conv.turns[:-1], last), conv.system, True


def _images(rows: Rows, i: int, obj: dict[str, object]) -> tuple[str, ...]:
    """Row i's images: an `image` cell or an `images` list (a CSV cell holds one), each a file (relative to the
    dataset's folder) that must exist, or a data: URL."""
    given = [name for name in IMAGE_FIELDS if obj.get(name) is not None]
    if not given:
        return ()
    if len(given) > 1:
        raise rows.fail(i, "has both image and images: give one of them")
    value = obj[given[0]]
    cells = [value] if isinstance(value, str) else value
    if not isinstance(cells, list) or not all(isinstance(c, str) and c for c in cells):
        raise rows.fail(i, f"{given[0]} {show(value)} is not an image path or a list of them: give files or data: URLs")
    for cell in cells:
        if cell.startswith("data:"):
            _check_data_url(rows, i, cell)
        elif not (rows.path.parent / cell).is_file():
            raise rows.fail(i, f"image {show(cell)} is not a file: give paths relative to the dataset, or data: URLs")
    return tuple(cells)


def _check_data_url(rows: Rows, i: int, url: str) -> None:
    """Row i's data: URL decoded and its image header read now, so that a bad one is named before the run, not
    when its row is sent."""
    from infermeter.workload.media import data_url_image  # Pillow and numpy: loaded only for a dataset with images

    try:
        data_url_image(url)
    except UserError as exc:
        raise rows.fail(i, str(exc)) from None


def _session_id(rows: Rows, i: int, value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise rows.fail(i, f"session_id {show(value)} is neither a string nor a whole number: give the session's name")
    return str(value)


def _session(rows: Rows, group: _Group) -> Session:
    """A group's session: its parts ordered by `turn` when its rows give one (all must), else in file order."""
    parts = group.parts
    numbered = [p for p in parts if p.turn is not None]
    if numbered and len(numbered) < len(parts):
        bad = next(p for p in parts if p.turn is None)
        raise rows.fail(
            bad.index, f"turn is missing, but other rows of session {group.key!r} give one: give turn on all or none"
        )
    if numbered:
        parts = sorted(parts, key=lambda p: (p.turn, p.index))
        for before, after in itertools.pairwise(parts):
            if before.turn == after.turn:
                raise rows.fail(
                    after.index,
                    f"turn {after.turn} of session {group.key!r} is also on row {rows.numbers[before.index]}: "
                    "give each turn of a session once",
                )
    turns = tuple(t for p in parts for t in p.turns)
    return Session(group.key, turns, rows.numbers[group.parts[0].index], group.timestamp_s, group.label, group.system)


def _number_from_text(value: str) -> object:
    """A CSV cell in a column pyarrow read as text: its number when it holds one (so the bad cell is the one named),
    nothing when empty."""
    if not value.strip():
        return None
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value
