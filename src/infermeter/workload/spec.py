"""Workload specifications (draft 4.3.1) and their deterministic expansion into a list of requests.

A workload is one or more request classes (each with input and output length distributions and a weight)
plus optional prefix sharing.  The same spec and seed always give the same requests, and the seed is kept
in the declaration so a report can state it (draft 4.3.3).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from infermeter.config_files import read_mapping, validate
from infermeter.errors import UserError
from infermeter.workload.content import ContentKind, describe
from infermeter.workload.distributions import Fixed, LengthDist


class RequestClass(BaseModel):
    """A kind of request with its own length distributions, drawn with probability weight / sum(weights)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    name: str = ""
    weight: float = Field(default=1.0, gt=0)
    input: LengthDist
    output: LengthDist


class PrefixSharing(BaseModel):
    """A fraction of requests start with one of `count` shared prefixes (system prompt, repository context).

    The prefix is prepended to the request's own drawn input, so input_tokens = prefix_tokens + body.
    Which prefix a sharing request gets is Zipf(s) over the prefixes' ranks, or uniform when zipf_s is None.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    fraction: float = Field(ge=0, le=1)
    count: int = Field(default=1, ge=1, le=1_000_000)
    length: LengthDist = Field(default_factory=lambda: Fixed(value=200))
    zipf_s: float | None = Field(default=None, gt=0)

    def probabilities(self) -> np.ndarray:
        ranks = np.arange(1, self.count + 1, dtype=float)
        w = np.ones(self.count) if self.zipf_s is None else ranks ** (-self.zipf_s)
        return w / w.sum()


class WorkloadSpec(BaseModel):
    """A fully specified workload: what a report must declare to make a run reproducible."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    name: str
    purpose: str = ""
    content: ContentKind = "words"  # what the prompts' text is made of (workload/content.py)
    classes: list[RequestClass] = Field(min_length=1)
    prefix: PrefixSharing | None = None
    temperature: float = Field(default=0.0, ge=0)
    notes: list[str] = Field(default_factory=list)
    # each class gets exactly its share of the requests (largest remainder), in a seeded order, instead of each
    # request drawing its class: a class's count is then known before the run (the draft's 5.6.2 >= 500 per class)
    stratified: bool = False

    @model_validator(mode="after")
    def _unique_classes(self) -> WorkloadSpec:
        names = [c.name for c in self.classes]
        if len(set(names)) != len(names):
            raise ValueError(f"class names must be unique, got {names}")
        return self

    def declaration(self, seed: int) -> dict[str, Any]:
        """What run.json records about the workload (draft 4.3.1 and 4.3.3)."""
        return {
            "name": self.name,
            "seed": seed,
            "spec": self.model_dump(mode="json"),
            "classes": [
                {"name": c.name, "weight": c.weight, "input": c.input.describe(), "output": c.output.describe()}
                for c in self.classes
            ],
            "prefix_sharing": None
            if self.prefix is None
            else {
                "fraction": self.prefix.fraction,
                "count": self.prefix.count,
                "length": self.prefix.length.describe(),
                "zipf_s": self.prefix.zipf_s,
            },
            "output_control": "max_tokens",
            "content": describe(self.content),
            "notes": list(self.notes),
        }


@dataclass
class Requests:
    """Columns of a generated workload, one entry per request, in send order.  Treat them as read-only: a column
    holding one value throughout (one class, no shared prefix) is that value broadcast."""

    request_class: np.ndarray  # str objects
    input_tokens: np.ndarray  # int64, prefix included
    output_tokens: np.ndarray  # int64, the max_tokens cap
    prefix_id: np.ndarray  # int64, -1 when the request shares no prefix
    prefix_tokens: np.ndarray  # int64, 0 when the request shares no prefix
    arrival_s: np.ndarray = field(default_factory=lambda: np.zeros(0))  # send offsets, seconds
    content: ContentKind = "words"  # what the prompts are made of (the workload's)
    # a dataset's requests (workload/dataset.py); None for a generated workload, whose prompts are built to length
    texts: np.ndarray | None = None  # str objects: the user message sent verbatim; None entries are built to length
    hash_ids: tuple[tuple[int, ...], ...] | None = None  # a trace's blocks per request (Mooncake), else None
    block_tokens: int = 512  # the tokens of one hash_ids block
    session: np.ndarray | None = None  # int64: a multi-turn session's index per request (turns in order), else None
    turn: np.ndarray | None = None  # int64: the turn's index in its session, from 0
    replies: np.ndarray | None = None  # str objects or None: the dataset's reply to each turn (--history dataset)
    models: np.ndarray | None = None  # str objects: the model each request names (--model-mix), else None
    systems: np.ndarray | None = None  # str objects or None: a dataset's system message opening the conversation
    images: tuple[tuple[str, ...], ...] | None = None  # a dataset's image files or data: URLs per request, else None

    def __len__(self) -> int:
        return len(self.input_tokens)

    def head(self, n: int) -> Requests:
        """The first n requests (all of them when there are fewer)."""
        return self._sliced(slice(None, n))

    def tail(self, start: int) -> Requests:
        """The requests from `start` on (a dataset's rows a run does not measure)."""
        return self._sliced(slice(start, None))

    def _sliced(self, part: slice) -> Requests:
        """These requests' rows `part`, every per-request column cut alike (an empty arrival column, the scalars and
        absent columns kept as they are)."""
        cut: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            per_request = isinstance(value, np.ndarray | tuple) and len(value) == len(self)
            cut[f.name] = value[part] if per_request else value
        return Requests(**cut)

    def rows(self) -> list[dict[str, Any]]:
        arrivals = self.arrival_s if len(self.arrival_s) == len(self) else np.zeros(len(self))
        return [
            {
                "request_id": i,
                "request_class": str(self.request_class[i]),
                "input_tokens": int(self.input_tokens[i]),
                "output_tokens": int(self.output_tokens[i]),
                "prefix_id": int(self.prefix_id[i]),
                "prefix_tokens": int(self.prefix_tokens[i]),
                "arrival_s": float(arrivals[i]),
            }
            for i in range(len(self))
        ]


# the random streams a workload draws from, one per quantity (each seeded with [seed, tag, ...])
CLASS_STREAM, INPUT_STREAM, OUTPUT_STREAM, PREFIX_LENGTHS, PREFIX_SHARES, PREFIX_CHOICE = range(6)


def _stream(seed: int, *tag: int) -> np.random.Generator:
    return np.random.default_rng([seed, *tag])


def generate(spec: WorkloadSpec, n: int, seed: int) -> Requests:
    """Draw n requests from the spec; the same (spec, n, seed) always gives the same requests, and the first k of
    them are the same for any n >= k (each quantity draws from its own stream, a class's lengths in order of its
    members): a run bounded by time, or each system's level of a suite, sends a head of one sequence (the draft's
    6.1 "same requests in same order").  Stratified classes are the exception: their order depends on n."""
    if n < 0:
        raise UserError(f"request count must be >= 0, got {n}")
    weights = np.asarray([c.weight for c in spec.classes], dtype=float)
    classes = _stream(seed, CLASS_STREAM)
    if spec.stratified:
        cls_idx = classes.permutation(np.repeat(np.arange(len(spec.classes)), class_counts(weights, n)))
    else:
        cls_idx = classes.choice(len(spec.classes), size=n, p=weights / weights.sum())
    labels = np.asarray([c.name for c in spec.classes], dtype=object)
    if len(spec.classes) == 1:  # every request is a member: the same draws, without n indexes to place them
        only = spec.classes[0]
        inputs = only.input.sample(_stream(seed, INPUT_STREAM, 0), n).astype(np.int64)
        outputs = only.output.sample(_stream(seed, OUTPUT_STREAM, 0), n).astype(np.int64)
        names = np.broadcast_to(labels, (n,))  # one value throughout: broadcast, no memory for n copies of it
    else:
        inputs = np.zeros(n, dtype=np.int64)
        outputs = np.zeros(n, dtype=np.int64)
        for k, c in enumerate(spec.classes):
            members = np.flatnonzero(cls_idx == k)
            inputs[members] = c.input.sample(_stream(seed, INPUT_STREAM, k), len(members))
            outputs[members] = c.output.sample(_stream(seed, OUTPUT_STREAM, k), len(members))
        names = labels[cls_idx]
    del cls_idx

    prefix_id: np.ndarray = np.broadcast_to(np.int64(-1), (n,))
    prefix_tokens: np.ndarray = np.broadcast_to(np.int64(0), (n,))
    if spec.prefix is not None and spec.prefix.fraction > 0:
        p = spec.prefix
        lengths = p.length.sample(_stream(seed, PREFIX_LENGTHS), p.count)
        shares = _stream(seed, PREFIX_SHARES).random(n) < p.fraction
        chosen = _stream(seed, PREFIX_CHOICE).choice(p.count, size=int(shares.sum()), p=p.probabilities())
        prefix_id = np.full(n, -1, dtype=np.int64)
        prefix_tokens = np.zeros(n, dtype=np.int64)
        prefix_id[shares] = chosen
        prefix_tokens[shares] = lengths[chosen]
        inputs = inputs + prefix_tokens
    return Requests(names, inputs, outputs, prefix_id, prefix_tokens, content=spec.content)


def class_counts(weights: np.ndarray, n: int) -> np.ndarray:
    """n requests shared out in proportion to the weights, by largest remainder (ties to the earlier class)."""
    exact = n * weights / weights.sum()
    counts = np.floor(exact).astype(np.int64)
    order = np.argsort(-(exact - counts), kind="stable")
    counts[order[: n - int(counts.sum())]] += 1
    return counts


def load_spec_file(path: Path) -> WorkloadSpec:
    """Read a custom workload from YAML or JSON, with a one-line error for anything malformed."""
    data = read_mapping(path, "workload file")
    data.setdefault("name", path.stem)
    return validate(WorkloadSpec, data, path, "workload file")
