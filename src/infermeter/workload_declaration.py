"""run.json's workload block (a part of run_info.py): the workload's classes and shared prefixes, its arrival process,
the dataset the requests came from, and a multi-turn run's sessions.  A leaf, as run_info is."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from infermeter.run_block import Block


class Arrivals(Block):
    """The arrival process (workload.arrivals.ArrivalSpec) with its one-line description."""

    kind: str
    rate: float | None = None
    burstiness: float = 1.0
    time_scale: float = 1.0
    description: str = ""


class WorkloadClass(Block):
    """One request class: its share of requests and its length distributions, described in words."""

    name: str = ""
    weight: float = 1.0
    input: str
    output: str


class PrefixSharing(Block):
    """Shared prompt prefixes: the share of requests with one, how many distinct ones, their length."""

    fraction: float
    count: int
    length: str
    zipf_s: float | None = None


class DatasetDeclaration(Block):
    """A dataset the requests came from: the file (name, sha256, size), its format, the filters, and how many of its
    rows were used and dropped and why."""

    file: str
    path: str
    sha256: str
    size_bytes: int
    format: str
    rows: int  # rows (conversations) read from the file
    used: int  # requests (turns, with --multi-turn) the run drew from it
    dropped: dict[str, int] = Field(default_factory=dict)  # why rows were left out -> how many
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    sample: int | None = None  # --dataset-sample N: drawn at random with the run's seed
    counted_with: str | None = None  # the tokenizer the filters and reply lengths were counted with
    output_lengths: str | None = None  # where each request's max_tokens came from
    block_tokens: int | None = None  # a trace with hash_ids: the tokens of one block
    block_first_tokens: int | None = None  # M: blocks open with distinct tokens; hash_ids equal mod M may open alike
    time_scale: float | None = None  # a timed dataset replayed on its clock: compressed this many times


class SessionsDeclaration(Block):
    """Multi-turn sessions (--multi-turn): how a turn's history is made and how long a user thinks between turns."""

    sessions: int  # sessions the run's requests belong to
    turns: int  # requests (turns) in them
    history: str  # "replies": the server's actual replies; "dataset": the dataset's own
    think_time: str
    loop: str  # closed: N users each running sessions one after another; open: sessions arriving at a rate


class MediaDeclaration(Block):
    """Images and audio the requests carried (--images, --image-dir, a dataset's image column, --audio): where they
    came from, and what the measured requests sent held (counted as each request's media were made, over the requests
    the records show were sent; the warm-up's are not counted)."""

    images_per_request: int | None = None  # None: as many as each dataset row gives
    image_source: str | None = None
    image_sizes: list[str] = Field(default_factory=list)  # the distinct WxH sent
    images_sent: int = 0
    image_bytes: int = 0  # the files' bytes (a data URL carries them base64: 4/3 as many)
    audio_seconds_per_request: float | None = None
    audio_format: str | None = None
    audio_sent: int = 0
    audio_bytes: int = 0
    requests: int = 0  # measured requests sent with media
    bytes_per_request: float | None = None  # mean media bytes (images and audio) per such request
    sent_as: str = ""  # how each kind goes in the request body (images and audio differ)
    made_ahead: int = 0  # requests whose media were made before the measured load began
    media_waits: int = 0  # measured requests whose media were not made yet when due: the event loop waited
    media_wait_ms: float = 0.0  # the event loop's wait for them in all
    media_wait_max_ms: float = 0.0  # and the longest one


class WorkloadDeclaration(Block):
    """What run.json declares about the workload (draft 4.3.1, 4.3.3); `spec` is the WorkloadSpec as JSON."""

    name: str | None = None
    seed: int | None = None
    spec: dict[str, Any] | None = None
    source: str | None = None  # a replayed trace's file
    classes: list[WorkloadClass] = Field(default_factory=list)
    prefix_sharing: PrefixSharing | None = None
    output_control: str | None = None
    content: str | None = None  # what the prompts' text is: n-gram and speculative decoders behave by it (A.5)
    notes: list[str] = Field(default_factory=list)
    arrivals: Arrivals | None = None
    dataset: DatasetDeclaration | None = None
    sessions: SessionsDeclaration | None = None
    rerank_query_tokens: int | None = None  # --api rerank: each query's exact length (documents: the drawn length)
    media: MediaDeclaration | None = None
