"""Prompt text of an exact token count under a tokenizer, after its chat template when the API is chat.

Requests that share a prefix (workload prefix_id) get the same leading words, so a server's prefix cache can hit;
every other word is drawn for its request alone, so nothing else is shared by accident.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from infermeter.errors import UserError
from infermeter.tokenizers import ChatTemplate, Tokenizer

# Common English words: one token each, with their leading space, in the usual BPE vocabularies.
WORDS = np.array(
    [
        "the",
        "of",
        "and",
        "to",
        "in",
        "is",
        "was",
        "for",
        "that",
        "on",
        "as",
        "with",
        "by",
        "he",
        "at",
        "from",
        "his",
        "it",
        "an",
        "were",
        "are",
        "which",
        "this",
        "be",
        "or",
        "had",
        "not",
        "but",
        "first",
        "one",
        "their",
        "its",
        "new",
        "after",
        "who",
        "they",
        "have",
        "her",
        "she",
        "two",
        "been",
        "other",
        "when",
        "there",
        "all",
        "during",
        "into",
        "school",
        "time",
        "may",
        "years",
        "more",
        "most",
        "only",
        "over",
        "city",
        "some",
        "world",
        "would",
        "where",
        "later",
        "up",
        "such",
        "used",
        "many",
        "can",
        "state",
        "about",
        "national",
        "out",
        "known",
        "university",
        "united",
        "then",
        "made",
        "south",
        "north",
        "under",
        "between",
        "east",
        "west",
        "high",
        "river",
        "life",
        "part",
        "year",
    ],
    dtype=object,
)
REQUEST_STREAM, PREFIX_STREAM = 0, 1  # word streams keyed by request id, and by shared-prefix id
FILLERS = (" the", " of", " and", " a", " to", " in", " is", ".", ",", " it", " on", " as")


class ExactPrompter:
    """Prompts that tokenize to exactly N tokens after the chat template is applied (seeds/003).

    The template's own tokens are measured once.  Per request, a deterministic stream of one-token words is cut
    where the count should land; one encoding confirms it (the usual case), else a search over how many words
    fit and single-token fillers reach exactly N.  Every prompt's count is verified before it is returned.
    """

    def __init__(self, tokenizer: Tokenizer, chat: bool = False, seed: int = 0) -> None:
        self.tok = tokenizer
        self.seed = seed
        self.template = ChatTemplate.of(tokenizer) if chat else None
        if chat and self.template is None:
            raise UserError(f"tokenizer {tokenizer.name} has no chat template: build completions prompts (drop --chat)")
        self._render: Callable[[str], str] = self.template.user_renderer() if self.template else str
        self.overhead = self.count("")
        self._prefix_counts: dict[str, int] = {}

    def render(self, content: str) -> str:
        """The prompt as the tokenizer sees it: the content inside the chat template, when there is one."""
        return self._render(content)

    def count(self, content: str) -> int:
        return len(self.tok.encode(self._render(content)))

    def _stream(self, kind: int, key: int, n: int) -> list[str]:
        rng = np.random.default_rng([self.seed, 3, kind, key])
        return list(WORDS[rng.integers(0, len(WORDS), size=n)])

    def _prefix_count(self, prefix: str) -> int:
        """Tokens the shared prefix adds to the rendered prompt (counted once per prefix)."""
        if prefix not in self._prefix_counts:
            self._prefix_counts[prefix] = self.count(prefix) - self.overhead
        return self._prefix_counts[prefix]

    def build_prefix(self, tokens: int, prefix_id: int) -> str:
        """A shared prefix of exactly `tokens` tokens (under this prompter's template, if any) from a word stream no
        request uses."""
        return self.build(tokens, prefix_id, _kind=PREFIX_STREAM)

    def build(self, tokens: int, request_id: int = 0, prefix: str = "", _kind: int = REQUEST_STREAM) -> str:
        """The content (user message) whose rendered prompt is exactly `tokens` tokens."""
        fixed = self.overhead + (self._prefix_count(prefix) if prefix else 0)
        if tokens <= fixed:
            raise UserError(
                f"cannot build a {tokens}-token prompt: the template alone takes {self.overhead} "
                f"tokens (and the shared prefix {fixed - self.overhead})"
            )
        words = self._stream(_kind, request_id, tokens + 8)

        def text(k: int) -> str:
            body = " ".join(words[:k])
            return f"{prefix} {body}" if prefix and body else (prefix or body)

        # the words are one token each: the cut at tokens - fixed words is usually exact at once
        guess = max(0, min(len(words) - 1, tokens - fixed))
        content = text(guess)
        if self.count(content) == tokens:
            return content
        return self._search(tokens, words, text, guess)

    def _search(self, tokens: int, words: list[str], text: Callable[[int], str], guess: int) -> str:
        """Bracket the cut around the guess, bisect it, then top up with single-token fillers."""
        lo, hi = guess, guess + 1
        step = 4
        while lo > 0 and self.count(text(lo)) > tokens:
            hi, lo = lo, max(0, lo - step)
            step *= 2
        while hi < len(words) and self.count(text(hi)) <= tokens:
            lo, hi = hi, min(len(words), hi + step)
            step *= 2
        while hi - lo > 1:  # count(text(lo)) <= tokens < count(text(hi))
            mid = (lo + hi) // 2
            if self.count(text(mid)) <= tokens:
                lo = mid
            else:
                hi = mid
        content = text(lo)
        for _ in range(64):
            have = self.count(content)
            if have == tokens:
                return content
            for filler in FILLERS:
                if self.count(content + filler) <= tokens:
                    content += filler
                    break
            else:  # every filler overshoots: give back a word and try again
                content = content.rsplit(" ", 1)[0] if " " in content else content
        raise UserError(f"could not build an exact {tokens}-token prompt under {self.tok.name}")
