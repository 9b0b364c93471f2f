"""A dataset file as bytes and parsed rows, read once, with its identity (sha256, size) and the words that name one
of its rows in a message ("--dataset f.jsonl, row 3")."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import orjson

from infermeter.errors import UserError

BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class Rows:
    """A file's rows as parsed objects, each with the number a message gives it: a file line (JSONL, CSV), an element
    index (a JSON array, from 0 as `jq '.[N]'`) or a table row (Parquet, Arrow, from 1)."""

    path: Path
    items: list[object]
    numbers: Sequence[int]
    unit: str = "row"

    def where(self, i: int) -> str:
        """Message prefix naming the file and item i's row."""
        return f"--dataset {self.path}, {self.unit} {self.numbers[i]}"

    def fail(self, i: int, message: str) -> UserError:
        """The one-line error for item i: `message` says what is wrong with which field and how to fix it."""
        return UserError(f"{self.where(i)}: {message}")


class Source:
    """The dataset path as given: its bytes read once, hashed once, parsed as JSON rows when a reader asks."""

    def __init__(self, path: Path) -> None:
        if not path.exists():
            raise UserError(
                f"--dataset {path} does not exist: give a dataset file, or a directory written by save_to_disk"
            )
        self.path = path

    @cached_property
    def files(self) -> tuple[Path, ...]:
        """What the dataset's identity covers: the file, or a directory's .arrow and .json files in sorted order."""
        if self.path.is_dir():
            return tuple(
                sorted(
                    (p for p in self.path.rglob("*") if p.is_file() and p.suffix in (".arrow", ".json")),
                    key=lambda p: p.relative_to(self.path).as_posix(),
                )
            )
        return (self.path,)

    @cached_property
    def data(self) -> bytes:
        """The file's bytes (not for a directory)."""
        if self.path.is_dir():
            raise self.fail("is a directory, not a file: a directory is read as a Hugging Face dataset (hf-disk)")
        try:
            return self.path.read_bytes()
        except OSError as exc:
            raise UserError(f"--dataset {self.path} cannot be read: {exc.strerror or exc}") from None

    @cached_property
    def sha256(self) -> str:
        digest = hashlib.sha256()
        if self.path.is_dir():
            for file in self.files:
                digest.update(file.read_bytes())
        else:
            digest.update(self.data)
        return digest.hexdigest()

    @cached_property
    def size_bytes(self) -> int:
        return len(self.data) if not self.path.is_dir() else sum(f.stat().st_size for f in self.files)

    def fail(self, message: str) -> UserError:
        """A one-line error about the whole file."""
        return UserError(f"--dataset {self.path}: {message}")

    @cached_property
    def json_rows(self) -> Rows:
        """The objects of a JSON array (numbered by element index) or of JSON lines (numbered by line)."""
        data = self.data.removeprefix(BOM)
        if data.lstrip()[:1] == b"[":
            try:
                parsed = orjson.loads(data)
            except orjson.JSONDecodeError as exc:
                raise self.fail(
                    f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}: fix the file"
                ) from None
            return Rows(self.path, parsed, range(len(parsed)), "element")
        items: list[object] = []
        numbers: list[int] = []
        for n, line in enumerate(data.split(b"\n"), start=1):
            if not line.strip():
                continue
            try:
                items.append(orjson.loads(line))
            except orjson.JSONDecodeError as exc:
                raise UserError(
                    f"--dataset {self.path}, row {n}: not valid JSON: {exc.msg} at column {exc.colno}: "
                    "each line of a JSONL file holds one JSON object"
                ) from None
            numbers.append(n)
        return Rows(self.path, items, numbers)
