"""Automatic prefix caching by chained block hashes (vLLM's scheme), over the prompt's token ids."""

from __future__ import annotations

from collections import OrderedDict


class PrefixCache:
    """LRU set of full-block hashes; a prompt's leading blocks that are present are cache hits."""

    def __init__(self, capacity_blocks: int, block_size: int = 16) -> None:
        self.capacity = capacity_blocks
        self.block_size = block_size
        self._blocks: OrderedDict[int, None] = OrderedDict()
        self.queries = 0  # tokens looked up
        self.hits = 0  # tokens found

    def _hashes(self, tokens: list[int]) -> list[int]:
        out, h = [], 0
        for i in range(len(tokens) // self.block_size):
            h = hash((h, tuple(tokens[i * self.block_size : (i + 1) * self.block_size])))
            out.append(h)
        return out

    def lookup_and_insert(self, tokens: list[int]) -> int:
        """Cached leading tokens of this prompt (at most len - 1: the last token is always computed); then the
        prompt's blocks become the most recently used."""
        hashes = self._hashes(tokens)
        hit = 0
        for h in hashes:
            if h not in self._blocks:
                break
            hit += 1
        for h in hashes:
            self._blocks[h] = None
            self._blocks.move_to_end(h)
        while len(self._blocks) > self.capacity:
            self._blocks.popitem(last=False)
        cached = min(hit * self.block_size, max(len(tokens) - 1, 0))
        self.queries += len(tokens)
        self.hits += cached
        return cached
