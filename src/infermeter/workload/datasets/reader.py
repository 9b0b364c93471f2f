"""What one format's reader gives back before the file's identity is attached: its sessions and what it dropped."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from infermeter.workload.dataset import Session
from infermeter.workload.datasets.source import Source


@dataclass
class Read:
    """A reader's findings: the sessions it kept in order, how many rows it read, and why it left the others out."""

    sessions: list[Session] = field(default_factory=list)
    rows: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    block_tokens: int | None = None  # a trace with hash_ids: the tokens one block stands for


Reader = Callable[[Source, int], Read]  # (the file, --block-tokens) -> what it holds
