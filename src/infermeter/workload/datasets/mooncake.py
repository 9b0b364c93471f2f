"""Mooncake traces (JSONL): each line a timed request of lengths, its prompt made of shared blocks.

`timestamp` is in milliseconds, `input_length`/`output_length` in tokens, and each `hash_ids` entry stands for one
block of `block_tokens` tokens (512 in Mooncake's traces): requests with equal leading hash_ids share that prefix.
A row may list fewer blocks than its prompt holds (the rest is its own text), never more."""

from __future__ import annotations

from infermeter.workload.dataset import Session, Turn
from infermeter.workload.datasets.fields import NonDecreasing, number, positive_int, show, whole
from infermeter.workload.datasets.reader import Read
from infermeter.workload.datasets.source import Rows, Source

FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")


def read_mooncake(source: Source, block_tokens: int) -> Read:
    rows = source.json_rows
    read = Read(rows=len(rows.items), block_tokens=block_tokens)
    clock = NonDecreasing(rows, "timestamp")
    for i, obj in enumerate(rows.items):
        if not isinstance(obj, dict):
            raise rows.fail(i, f"{show(obj)} is not an object: each line of a Mooncake trace is one request")
        if obj.get("timestamp") is None:
            raise rows.fail(i, "timestamp is missing: give each request's arrival in milliseconds")
        timestamp_s = number(rows, i, "timestamp", obj["timestamp"], "milliseconds") / 1000.0
        clock.check(i, timestamp_s)
        input_length = positive_int(rows, i, "input_length", obj.get("input_length"))
        output_length = positive_int(rows, i, "output_length", obj.get("output_length"))
        hash_ids = _hash_ids(rows, i, obj.get("hash_ids"), input_length, block_tokens)
        turn = Turn(None, input_tokens=input_length, output_tokens=output_length, hash_ids=hash_ids)
        read.sessions.append(Session(str(rows.numbers[i]), (turn,), rows.numbers[i], timestamp_s))
    return read


def _hash_ids(rows: Rows, i: int, value: object, input_length: int, block_tokens: int) -> tuple[int, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise rows.fail(i, f"hash_ids {show(value)} is not a list: give the prompt's block ids, [1, 2, ...]")
    ids: list[int] = []
    for entry in value:
        n = whole(entry)
        if n is None:
            raise rows.fail(i, f"hash_ids entry {show(entry)} is not an integer: give block ids as integers from 0")
        if n < 0:
            raise rows.fail(i, f"hash_ids entry {n} is negative: give block ids as integers from 0")
        ids.append(n)
    most = -(-input_length // block_tokens)
    if len(ids) > most:
        raise rows.fail(
            i,
            f"hash_ids holds {len(ids)} blocks but input_length {input_length} fills at most {most} of "
            f"{block_tokens} tokens: give the trace's block size with --block-tokens",
        )
    return tuple(ids)
