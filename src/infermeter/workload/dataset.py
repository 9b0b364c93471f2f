"""A dataset people already have, read once (workload/datasets/): conversations of verbatim turns, or a trace's
timed rows of lengths and shared blocks.  Readers give this; the run makes its requests from it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, get_args

DatasetFormat = Literal["sharegpt", "jsonl", "csv", "parquet", "hf-disk", "mooncake", "azure", "burstgpt"]
FORMATS: tuple[str, ...] = get_args(DatasetFormat)
DEFAULT_BLOCK_TOKENS = 512  # Mooncake's block: the tokens one hash_id stands for


@dataclass(frozen=True)
class Turn:
    """One user turn: its text sent verbatim, or (a trace without text) a length to build a prompt to."""

    text: str | None  # the user's message; None: built to `input_tokens` (and from `hash_ids` when given)
    input_tokens: int | None = None  # a trace's prompt length; None when there is text (counted under the tokenizer)
    output_tokens: int | None = None  # the row's own output length; None: its reply's length under the tokenizer
    reply: str | None = None  # the dataset's reply to this turn
    hash_ids: tuple[int, ...] = ()  # Mooncake: the prompt's blocks, each `block_tokens` long (the last may be short)
    images: tuple[str, ...] = ()  # image files (relative to the dataset) or data: URLs sent with the turn


@dataclass(frozen=True)
class Session:
    """A conversation (its turns in order), or one row of a single-turn file or trace."""

    key: str  # its session_id or conversation id as the file gives it, else its row number
    turns: tuple[Turn, ...]
    row: int  # the file's row (1-based; a JSON array's element) where it starts, for messages
    timestamp_s: float | None = None  # its first turn's arrival on the file's own clock, seconds
    label: str = ""  # its request class in the report (BurstGPT's model; a file's `request_class`)
    system: str | None = None  # a system message that opens the conversation (chat), when the file gives one


@dataclass(frozen=True)
class Dataset:
    """A dataset file as read: its sessions in file order (a trace's in timestamp order) and what reading it dropped."""

    path: Path
    format: DatasetFormat
    sha256: str
    size_bytes: int
    sessions: tuple[Session, ...]
    rows: int  # rows (or conversations) read from the file
    dropped: dict[str, int] = field(default_factory=dict)  # why rows were left out -> how many
    block_tokens: int | None = None  # a trace with hash_ids: the tokens of one block
    timed: bool = False  # every session has a timestamp: the file can be replayed on its own clock
