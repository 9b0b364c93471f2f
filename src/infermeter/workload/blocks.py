"""The prompt text of a Mooncake trace's row: each hash_id is one block of exactly `block_tokens` tokens, keyed only
by (seed, hash_id), so rows with equal leading hash_ids share an identical prefix (text and tokens) and a server's
prefix cache hits as it did where the trace was recorded; rows whose first hash_ids differ differ from the first token.

Every unit is a word that is one token with its leading space (" river"), found once per tokenizer by checking its
vocabulary's words: such words never merge with their neighbours, so a block's count is its words' and blocks
concatenate with counts adding up (each prompt is still verified).  A block opens with word number
(hash_id + offset) mod M of that table, M = `first_tokens` (24,648 under cl100k_base, 47,424 under o200k_base):
hash_ids that differ by less than M open with different tokens; beyond M two may open alike (and then differ later).
"""

from __future__ import annotations

import re
from collections import OrderedDict

import numpy as np

from infermeter.errors import UserError
from infermeter.tokenizers import Tokenizer
from infermeter.workload.content import WORDS

BLOCK_STREAM, TAIL_STREAM, OFFSET_STREAM = 0x6B0, 0x6B1, 0x6B2  # random streams of blocks, tails, the first-word offset
CANDIDATE = re.compile(r" ?[a-z]{2,}")
CACHED_BLOCKS = 4096  # blocks kept built (a trace reuses its hash_ids; each block is a few kB of text)
_TABLES: dict[int, tuple[Tokenizer, tuple[str, ...]]] = {}  # id(tokenizer) -> (it, its one-token words)


def one_token_words(tok: Tokenizer) -> tuple[str, ...]:
    """The words (lower-case letters, with their leading space) that are one token each under `tok`, in token-id
    order; read from its vocabulary once per tokenizer (a fraction of a second) and kept."""
    held = _TABLES.get(id(tok))
    if held is not None and held[0] is tok:
        return held[1]
    bare = len(tok.encode(""))
    candidates = {" " + w for w in WORDS}
    for i in range(tok.vocab_size):
        try:
            piece = tok.decode([i])
        except Exception:  # ids a vocabulary leaves unused (tiktoken's gaps) or cannot decode alone
            continue
        if CANDIDATE.fullmatch(piece):
            candidates.add(" " + piece.lstrip(" "))
    found: dict[int, str] = {}
    for word in candidates:
        ids = tok.encode(word)[bare:]
        if len(ids) == 1:
            found.setdefault(ids[0], word)
    table = tuple(found[i] for i in sorted(found))
    if len(table) < 2:
        raise UserError(
            f"tokenizer {tok.name} has no words that are one token with their leading space: trace block prompts "
            "(hash_ids) cannot be built under it; use cl100k_base, o200k_base or a byte-level BPE tokenizer"
        )
    _TABLES[id(tok)] = (tok, table)
    return table


class BlockPrompter:
    """Prompts of hash_id blocks under one tokenizer and seed (one per run: it keeps the blocks it built)."""

    def __init__(self, tokenizer: Tokenizer, block_tokens: int, seed: int = 0) -> None:
        if block_tokens < 1:
            raise UserError(f"--block-tokens must be >= 1, got {block_tokens}")
        self.tok = tokenizer
        self.block_tokens = block_tokens
        self.seed = seed
        self.words = np.asarray(one_token_words(tokenizer), dtype=object)
        self.first_tokens = len(self.words)  # M: hash_ids equal modulo M open with the same token
        self._offset = int(np.random.default_rng([seed, OFFSET_STREAM]).integers(0, self.first_tokens))
        self.bare = len(tokenizer.encode(""))
        self._blocks: OrderedDict[int, list[str]] = OrderedDict()

    def block(self, hash_id: int) -> list[str]:
        """The block's `block_tokens` one-token words: the first picked by hash_id, the rest drawn for it alone."""
        units = self._blocks.get(hash_id)
        if units is not None:
            self._blocks.move_to_end(hash_id)
            return units
        m = self.first_tokens
        rng = np.random.default_rng([self.seed, BLOCK_STREAM, int(hash_id < 0), abs(hash_id)])
        units = [self.words[(hash_id + self._offset) % m], *self.words[rng.integers(0, m, self.block_tokens - 1)]]
        self._blocks[hash_id] = units
        if len(self._blocks) > CACHED_BLOCKS:
            self._blocks.popitem(last=False)
        return units

    def tail(self, request_id: int, tokens: int) -> list[str]:
        """`tokens` words of the request's own: the first two spell its id (distinct for M^2 ids), the rest drawn."""
        m = self.first_tokens
        rng = np.random.default_rng([self.seed, TAIL_STREAM, request_id])
        spelled = [self.words[request_id % m], self.words[(request_id // m) % m]]
        return [*spelled, *self.words[rng.integers(0, m, max(tokens - 2, 0))]][:tokens]

    def units(self, hash_ids: tuple[int, ...], tokens: int, request_id: int) -> list[str]:
        """The prompt's words: its blocks in order, cut at `tokens`; beyond them, the request's own words."""
        out: list[str] = []
        for h in hash_ids:
            if len(out) >= tokens:
                break
            out.extend(self.block(h))
        del out[tokens:]
        if len(out) < tokens:
            out.extend(self.tail(request_id, tokens - len(out)))
        return out

    def build(self, hash_ids: tuple[int, ...], tokens: int, request_id: int) -> str:
        """The text of exactly `tokens` tokens under the tokenizer (plus what it adds to any text, a BOS for some):
        the blocks of `hash_ids` then the request's own words; verified."""
        text = "".join(self.units(hash_ids, tokens, request_id))
        got = len(self.tok.encode(text)) - self.bare
        if got != tokens:
            raise UserError(
                f"tokenizer {self.tok.name} merged one-token words across their seams ({got} tokens for {tokens}): "
                "trace block prompts cannot be built exactly under it; use cl100k_base or o200k_base"
            )
        return text
