"""ShareGPT conversations (`conversations` of from/value, or `messages` of role/content), one Session each: every
user message a Turn sent verbatim, the assistant's answer after it that turn's reply.

Rows that cannot make a conversation (no user turn, an empty user message) are dropped with a reason, as ShareGPT
dumps hold such; a row that is not a conversation at all is an error."""

from __future__ import annotations

from dataclasses import dataclass

from infermeter.workload.dataset import Session, Turn
from infermeter.workload.datasets.fields import show
from infermeter.workload.datasets.reader import Read
from infermeter.workload.datasets.source import Rows, Source
from infermeter.workload.datasets.tables import parquet_table, table_rows

USER = frozenset({"human", "user"})
ASSISTANT = frozenset({"gpt", "assistant", "chatgpt", "bard", "bing", "model"})
SYSTEM = "system"
SHAREGPT_KEYS = ("from", "value")  # a message's speaker and text
OPENAI_KEYS = ("role", "content")
NO_USER_TURN = "no user turn"
EMPTY_USER_TEXT = "empty user text"
NOT_TEXT = "content that is not text (images, audio)"


@dataclass(frozen=True)
class Conversation:
    """A conversation's opening system message and its turns."""

    system: str | None
    turns: tuple[Turn, ...]


def read_sharegpt(source: Source, block_tokens: int) -> Read:
    """A ShareGPT JSON array (or JSONL) of conversations, or a Parquet file with a `conversations` column."""
    if source.path.suffix.lower() == ".parquet":
        return sharegpt_sessions(table_rows(source.path, parquet_table(source.path)))
    return sharegpt_sessions(source.json_rows)


def sharegpt_sessions(rows: Rows) -> Read:
    """Rows of conversation objects as sessions; key = the row's `id`, else its number."""
    read = Read(rows=len(rows.items))
    for i, obj in enumerate(rows.items):
        if not isinstance(obj, dict):
            raise rows.fail(i, f'{show(obj)} is not an object: each conversation is {{"conversations": [...]}}')
        name = "conversations" if obj.get("conversations") is not None else "messages"
        if obj.get(name) is None:
            raise rows.fail(
                i, "has no conversations (nor messages): give conversations: [{from, value}, ...] on every row"
            )
        conv = conversation(rows, i, name, obj[name])
        if isinstance(conv, str):
            read.dropped[conv] += 1
            continue
        key = obj.get("id")
        row = rows.numbers[i]
        read.sessions.append(Session(str(row if key is None else key), conv.turns, row, system=conv.system))
    return read


def conversation(rows: Rows, i: int, name: str, messages: object) -> Conversation | str:
    """Row i's `name` list as a conversation, or why it is dropped.

    Leading assistant messages (before the first user one) are skipped; consecutive user messages are turns with no
    reply; consecutive assistant messages are one reply, joined by a blank line."""
    if not isinstance(messages, list):
        raise rows.fail(i, f"{name} {show(messages)} is not a list: give a list of messages")
    system: str | None = None
    turns: list[Turn] = []
    user: str | None = None
    replies: list[str] = []
    for k, message in enumerate(messages):
        speaker, content = _message(rows, i, name, k, message)
        if content is None:
            return NOT_TEXT
        if speaker in USER:
            if not content.strip():
                return EMPTY_USER_TEXT
            if user is not None:
                turns.append(Turn(user, reply="\n\n".join(replies) if replies else None))
            user, replies = content, []
        elif speaker in ASSISTANT:
            if user is not None:
                replies.append(content)
        elif speaker == SYSTEM:
            if k > 0:
                return "system message inside the conversation"
            system = content
        else:
            return f"speaker {speaker!r} (neither user nor assistant)"
    if user is None:
        return NO_USER_TURN
    turns.append(Turn(user, reply="\n\n".join(replies) if replies else None))
    return Conversation(system, tuple(turns))


def _message(rows: Rows, i: int, name: str, k: int, message: object) -> tuple[str, str | None]:
    """A message's speaker (lower case) and text (None: not text); an entry without from/value (role/content) is an
    error."""
    if not isinstance(message, dict):
        raise rows.fail(i, f'{name}[{k}] {show(message)} is not an object: give {{"from": ..., "value": ...}}')
    speaker_key, text_key = SHAREGPT_KEYS if "from" in message or "value" in message else OPENAI_KEYS
    try:
        speaker, content = message[speaker_key], message[text_key]
    except KeyError as exc:
        raise rows.fail(
            i, f"{name}[{k}].{exc.args[0]} is missing: each message needs from and value (or role and content)"
        ) from None
    if not isinstance(speaker, str):
        raise rows.fail(i, f"{name}[{k}].{speaker_key} {show(speaker)} is not a string: give human, gpt or system")
    if not isinstance(content, str):
        content = _text(rows, i, f"{name}[{k}].{text_key}", content)
    return speaker.lower(), content


def _text(rows: Rows, i: int, where: str, content: object) -> str | None:
    """A message's text: a string, nothing (""), or OpenAI's list of text parts joined; None for other parts (images,
    audio), which cannot be sent as text."""
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if isinstance(content, list) and all(isinstance(p, dict) for p in content):
        if all(p.get("type") == "text" and isinstance(p.get("text"), str) for p in content):
            return "\n".join(p["text"] for p in content)
        return None
    raise rows.fail(i, f"{where} {show(content)} is not a string: give the message's text")
