"""A read dataset (workload/dataset.py) as the run's requests: one per conversation (its first turn, as vLLM's and
SGLang's ShareGPT loaders send), or with --multi-turn every turn of each conversation, session by session; lengths
counted under the run's tokenizer, rows filtered and sampled, and run.json's declaration of what was used."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from infermeter.errors import UserError
from infermeter.tokenizers import Tokenizer
from infermeter.workload.blocks import one_token_words
from infermeter.workload.dataset import DEFAULT_BLOCK_TOKENS, Dataset, Session, Turn
from infermeter.workload.spec import Requests
from infermeter.workload_declaration import DatasetDeclaration

SAMPLE_STREAM = 0x5A3  # the random stream --dataset-sample draws from: [seed, SAMPLE_STREAM]
OVER_INPUT = "prompt over --max-input-tokens"
OVER_OUTPUT = "reply over --max-output-tokens"
NO_OUTPUT = "no output length (give --output-tokens)"
NO_REPLY = "a turn without a reply for --history dataset"
NO_TURNS = "no user turn"
NOT_DRAWN = "not drawn by --dataset-sample"
OutputSource = Literal["reply", "field", "fallback"]


@dataclass(frozen=True)
class DatasetChoice:
    """What the run asks of its dataset: the filters (under the run's tokenizer), a sample, the output length of
    rows that carry none (--output-tokens), and whether conversations are sent whole (--multi-turn)."""

    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    sample: int | None = None  # sessions drawn at random (= requests without multi_turn; whole sessions with it)
    fallback_output_tokens: int | None = None
    multi_turn: bool = False
    history: Literal["replies", "dataset"] = "replies"


@dataclass(frozen=True)
class _Resolved:
    """One turn as a request: its counted lengths and where its output length came from."""

    turn: Turn
    input_tokens: int
    output_tokens: int
    source: OutputSource


Outcome = list[_Resolved] | str  # a kept session's requests, or why it was dropped


def dataset_requests(
    ds: Dataset, tokenizer: Tokenizer, choice: DatasetChoice, seed: int
) -> tuple[Requests, DatasetDeclaration]:
    """The requests `ds` gives under `choice`, in file order, and run.json's declaration of them.

    Text is counted under `tokenizer` as content alone (the chat template is counted when prompts are rendered); a
    trace's row gives its input length.  Output length: the row's own, else its reply counted (at least 1), else
    --output-tokens (the user's choice: not filtered), else the row is dropped.  With multi_turn a session is kept
    whole or dropped whole: one turn over a filter drops every turn of it.  `choice.sample` draws that many
    sessions (requests, without multi_turn) at random from those the filters keep, with [seed, SAMPLE_STREAM]:
    sessions are looked at in a random order until enough pass, so a large file is not tokenized whole, and what
    was not looked at is declared "not drawn".  Arrivals are the sessions' timestamps less the first used one's
    (every turn carries its session's) when the dataset is timed; none otherwise."""
    dropped: Counter[str] = Counter()
    outcome = _outcome(tokenizer, choice)
    if choice.sample is None:
        kept = _kept(ds.sessions, range(len(ds.sessions)), outcome, None, dropped)
    else:
        order = np.random.default_rng([seed, SAMPLE_STREAM]).permutation(len(ds.sessions))
        kept = _kept(ds.sessions, (int(i) for i in order), outcome, choice.sample, dropped)
        if len(kept) < choice.sample:
            raise UserError(
                f"--dataset-sample {choice.sample}: {ds.path.name} has {len(kept)} "
                f"{'sessions' if choice.multi_turn else 'rows'} that the filters keep ({_reasons(ds, dropped)})"
            )
        dropped[NOT_DRAWN] = len(ds.sessions) - len(kept) - sum(dropped.values())
    if not kept:
        raise UserError(f"{ds.path.name}: no requests left ({_reasons(ds, dropped)})")
    chosen = sorted(kept)
    requests = _columns(ds, [(ds.sessions[i], kept[i]) for i in chosen], choice.multi_turn)
    return requests, _declaration(ds, tokenizer, choice, requests, [r for i in chosen for r in kept[i]], dropped)


def _outcome(tok: Tokenizer, choice: DatasetChoice) -> Callable[[Session], Outcome]:
    """The function that resolves one session (its first turn, or all of them with multi_turn)."""
    bare = len(tok.encode(""))

    def count(text: str) -> int:
        return len(tok.encode(text)) - bare

    def turn_outcome(turn: Turn, last: bool) -> _Resolved | str:
        n = count(turn.text) if turn.text is not None else turn.input_tokens
        if n is None:
            raise ValueError("a dataset turn has neither text nor input_tokens")  # the readers' contract
        if choice.max_input_tokens is not None and n > choice.max_input_tokens:
            return OVER_INPUT
        if choice.multi_turn and choice.history == "dataset" and not last and turn.reply is None:
            return NO_REPLY
        source: OutputSource
        if turn.output_tokens is not None:
            out, source = turn.output_tokens, "field"
        elif turn.reply is not None:
            out, source = max(1, count(turn.reply)), "reply"
        elif choice.fallback_output_tokens is not None:
            return _Resolved(turn, n, choice.fallback_output_tokens, "fallback")
        else:
            return NO_OUTPUT
        if choice.max_output_tokens is not None and out > choice.max_output_tokens:
            return OVER_OUTPUT
        return _Resolved(turn, n, out, source)

    def session_outcome(session: Session) -> Outcome:
        turns = session.turns if choice.multi_turn else session.turns[:1]
        if not turns:
            return NO_TURNS
        resolved: list[_Resolved] = []
        for k, turn in enumerate(turns):
            got = turn_outcome(turn, k == len(turns) - 1)
            if isinstance(got, str):
                return got
            resolved.append(got)
        return resolved

    return session_outcome


def _kept(
    sessions: Sequence[Session],
    order: Iterable[int],
    outcome: Callable[[Session], Outcome],
    wanted: int | None,
    dropped: Counter[str],
) -> dict[int, list[_Resolved]]:
    """Sessions resolved in `order` until `wanted` are kept (all of them when None): index -> its requests."""
    kept: dict[int, list[_Resolved]] = {}
    for i in order:
        if wanted is not None and len(kept) >= wanted:
            break
        got = outcome(sessions[i])
        if isinstance(got, str):
            dropped[got] += 1
        else:
            kept[i] = got
    return kept


def _reasons(ds: Dataset, dropped: Counter[str]) -> str:
    merged = _merged(ds, dropped)
    return "dropped: " + ", ".join(f"{why} ({n})" for why, n in merged.items()) if merged else "nothing dropped"


def _merged(ds: Dataset, dropped: Counter[str]) -> dict[str, int]:
    """The reader's drops, then the filters', each reason once."""
    merged = dict(ds.dropped)
    for why, n in dropped.items():
        if n:
            merged[why] = merged.get(why, 0) + n
    return merged


def _objects(values: list[str | None]) -> np.ndarray:
    column = np.empty(len(values), dtype=object)
    column[:] = values
    return column


def _columns(ds: Dataset, used: list[tuple[Session, list[_Resolved]]], multi_turn: bool) -> Requests:
    """The Requests columns of the kept sessions' turns, session-major."""
    rows = [(j, s, k, r) for j, (s, turns) in enumerate(used) for k, r in enumerate(turns)]
    n = len(rows)
    texts = _objects([r.turn.text for _, _, _, r in rows])
    hash_ids = tuple(r.turn.hash_ids for _, _, _, r in rows)
    images = tuple(r.turn.images for _, _, _, r in rows)
    systems = _objects([s.system if k == 0 else None for _, s, k, _ in rows])  # it opens the conversation
    arrivals = np.zeros(0)
    if ds.timed:
        stamps = np.asarray([s.timestamp_s for _, s, _, _ in rows], dtype=float)
        arrivals = stamps - stamps[0]
    return Requests(
        request_class=_objects([s.label for _, s, _, _ in rows]),
        input_tokens=np.asarray([r.input_tokens for _, _, _, r in rows], dtype=np.int64),
        output_tokens=np.asarray([r.output_tokens for _, _, _, r in rows], dtype=np.int64),
        prefix_id=np.broadcast_to(np.int64(-1), (n,)),
        prefix_tokens=np.broadcast_to(np.int64(0), (n,)),
        arrival_s=arrivals,
        texts=None if all(t is None for t in texts) else texts,
        hash_ids=hash_ids if any(hash_ids) else None,
        block_tokens=ds.block_tokens or DEFAULT_BLOCK_TOKENS,
        session=np.asarray([j for j, _, _, _ in rows], dtype=np.int64) if multi_turn else None,
        turn=np.asarray([k for _, _, k, _ in rows], dtype=np.int64) if multi_turn else None,
        replies=_objects([r.turn.reply for _, _, _, r in rows]) if multi_turn else None,
        systems=None if all(x is None for x in systems) else systems,
        images=images if any(images) else None,
    )


def _declaration(
    ds: Dataset,
    tok: Tokenizer,
    choice: DatasetChoice,
    requests: Requests,
    used: list[_Resolved],
    dropped: Counter[str],
) -> DatasetDeclaration:
    """run.json's dataset block (time_scale is the run plan's to set)."""
    sources = Counter(r.source for r in used)
    lengths = [
        f"the dataset's replies counted under {tok.name} ({sources['reply']})",
        f"its output_tokens field ({sources['field']})",
    ]
    if choice.fallback_output_tokens is not None:
        lengths.append(f"--output-tokens {choice.fallback_output_tokens} ({sources['fallback']})")
    blocks = requests.hash_ids is not None
    return DatasetDeclaration(
        file=ds.path.name,
        path=str(ds.path.resolve()),
        sha256=ds.sha256,
        size_bytes=ds.size_bytes,
        format=ds.format,
        rows=ds.rows,
        used=len(requests),
        dropped=_merged(ds, dropped),
        max_input_tokens=choice.max_input_tokens,
        max_output_tokens=choice.max_output_tokens,
        sample=choice.sample,
        counted_with=tok.name,
        output_lengths=", ".join(lengths),
        block_tokens=requests.block_tokens if blocks else None,
        block_first_tokens=len(one_token_words(tok)) if blocks else None,
        time_scale=None,
    )
