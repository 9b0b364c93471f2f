"""Prompt text for a requested token count, built from whole words so every word is one token to the emulator.

Requests that share a prefix (workload prefix_id) get the same leading words, so a server's prefix cache can hit;
every other word is unique to its request, so nothing else is shared by accident.  Exact token counts under a
real tokenizer are the tokenizer work's job; until then real servers report their own prompt counts (usage).
"""

from __future__ import annotations

import numpy as np

VOCAB = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
    "mike",
    "november",
    "oscar",
    "papa",
    "quebec",
    "romeo",
    "sierra",
    "tango",
    "uniform",
    "victor",
    "whiskey",
    "xray",
    "yankee",
    "zulu",
    "red",
    "orange",
    "yellow",
    "green",
    "blue",
    "violet",
    "north",
    "south",
    "east",
    "west",
    "river",
    "stone",
    "cloud",
    "field",
    "forest",
    "ocean",
    "island",
    "valley",
    "summit",
    "harbor",
    "meadow",
    "canyon",
]


def _words(rng: np.random.Generator, n: int) -> list[str]:
    return [VOCAB[i] for i in rng.integers(0, len(VOCAB), size=n)]


def build_prompt(request_id: int, tokens: int, prefix_id: int = -1, prefix_tokens: int = 0, seed: int = 0) -> str:
    """`tokens` words: the shared prefix's words (same for every request with this prefix_id), then unique ones."""
    prefix_tokens = min(prefix_tokens, tokens) if prefix_id >= 0 else 0
    shared = _words(np.random.default_rng([seed, 1, prefix_id]), prefix_tokens) if prefix_tokens else []
    own = _words(np.random.default_rng([seed, 2, request_id]), tokens - prefix_tokens)
    return " ".join(shared + own)
