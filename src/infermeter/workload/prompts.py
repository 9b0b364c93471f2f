"""Prompt text of an exact token count under a tokenizer, after its chat template when the API is chat.

Requests that share a prefix (workload prefix_id) get the same leading text, so a server's prefix cache can hit;
everything else is drawn for its request alone, so nothing else is shared by accident.  What the text is made of
(words, prose, code, a document and a question) is the workload's content (workload/content.py).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from infermeter.errors import UserError
from infermeter.tokenizers import ChatTemplate, Tokenizer
from infermeter.workload.content import PREFIX_STREAM, REQUEST_STREAM, ContentKind, stream


class ExactPrompter:
    """Prompts that tokenize to exactly N tokens after the chat template is applied (seeds/003).

    The template's own tokens are measured once.  Per request, a deterministic stream of units (one-token words,
    or the words and code of the workload's content) is cut where the count should land; one encoding confirms it
    (the usual case), else a search over how many units fit and single-token fillers reach exactly N.  A question
    that ends the prompt is kept whole (or left out when there is no room for it).  Every prompt's count is
    verified before it is returned.
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
        self._unit_counts: dict[str, int] = {}
        self._seams: dict[tuple[str, str], int] = {}
        self._bare = len(tokenizer.encode(""))  # what the tokenizer adds to any text (a BOS token, for some)

    def render(self, content: str) -> str:
        """The prompt as the tokenizer sees it: the content inside the chat template, when there is one."""
        return self._render(content)

    def count(self, content: str) -> int:
        return len(self.tok.encode(self._render(content)))

    def shortest(self, prefix: str = "") -> int:
        """The shortest prompt this prompter builds after `prefix`: the template, the prefix and one token of content
        (workload/template_floor.py raises shorter drawn inputs to it)."""
        return self.overhead + (self._prefix_count(prefix) if prefix else 0) + 1

    def _prefix_count(self, prefix: str) -> int:
        """Tokens the shared prefix adds to the rendered prompt (counted once per prefix)."""
        if prefix not in self._prefix_counts:
            self._prefix_counts[prefix] = self.count(prefix) - self.overhead
        return self._prefix_counts[prefix]

    def _seam(self, prefix: str, lead: str) -> int:
        """Tokens a prefix and what follows it lose to a merge across the seam (0 or 1, mostly), once per prefix and
        opening unit."""
        key = (prefix, lead)
        if key not in self._seams:
            apart = self._prefix_count(prefix) + self.overhead + len(self.tok.encode(lead)) - self._bare
            self._seams[key] = apart - self.count(prefix + lead)
        return self._seams[key]

    def _cumulative(self, units: list[str]) -> np.ndarray:
        """Tokens of the first 1, 2, ... units, each unit counted alone (once per distinct unit): an estimate, as
        neighbouring units can merge into one token."""
        cache, encode, bare = self._unit_counts, self.tok.encode, self._bare
        for unit in set(units).difference(cache):
            cache[unit] = len(encode(unit)) - bare
        return np.cumsum([cache[unit] for unit in units])

    def build_prefix(self, tokens: int, prefix_id: int, content: ContentKind = "words") -> str:
        """A shared prefix of exactly `tokens` tokens (under this prompter's template, if any) from a stream no
        request uses (a code workload's prefixes are repository contexts)."""
        return self.build(tokens, prefix_id, content=content, _kind=PREFIX_STREAM)

    def build(
        self,
        tokens: int,
        request_id: int = 0,
        prefix: str = "",
        content: ContentKind = "words",
        _kind: int = REQUEST_STREAM,
    ) -> str:
        """The content (user message) whose rendered prompt is exactly `tokens` tokens, made of `content`."""
        fixed = self.overhead + (self._prefix_count(prefix) if prefix else 0)
        if tokens <= fixed:
            raise UserError(
                f"cannot build a {tokens}-token prompt: the template alone takes {self.overhead} "
                f"tokens (and the shared prefix {fixed - self.overhead})"
            )
        material = stream(content, self.seed, _kind, request_id, tokens, tokens - fixed)
        tail = material.tail
        tail_tokens = len(self.tok.encode(tail)) - self._bare if tail else 0
        if tail and tokens - fixed < tail_tokens + 2:  # no room for the question: the document alone
            tail, tail_tokens = "", 0
        units, sep, fillers = material.units, material.sep, material.fillers

        def text(k: int) -> str:
            body = "".join(units[:k])
            return f"{prefix}{sep}{body}" if prefix and body else (prefix or body)

        def whole(body: str) -> int:
            return self.count(body + tail)

        if content == "words":  # one-token words: the cut at tokens - fixed words is usually exact at once
            cut = max(0, min(len(units) - 1, tokens - fixed))
            return self._search(tokens, len(units), text, (cut, whole(text(cut))), whole, fillers) + tail
        if prefix:  # fit what follows the prefix alone (cheaper), plus what merges across the seam; check the whole

            def after(k: int) -> str:
                return sep + "".join(units[:k])

            def alone(body: str) -> int:
                return len(self.tok.encode(body + tail)) - self._bare

            target = tokens - fixed + self._seam(prefix, sep + units[0])
            guess = self._settle(units, lambda k: alone(after(k)), target, tail_tokens)
            prompt = prefix + self._search(target, len(units), after, guess, alone, fillers) + tail
            if self.count(prompt) == tokens:
                return prompt
            guess = (guess[0], whole(text(guess[0])))
        else:
            guess = self._settle(units, lambda k: whole(text(k)), tokens, self.overhead + tail_tokens)
        return self._search(tokens, len(units), text, guess, whole, fillers) + tail

    def _settle(self, units: list[str], measure: Callable[[int], int], target: int, other: int) -> tuple[int, int]:
        """A cut of the units whose measure(k) (`other` tokens besides the units') is `target`, and its measure:
        first where the units' own counts reach it, then moved by the units that make up what the measure still
        misses, scaled by how far the units' own counts were off (neighbouring units can merge into one token)."""
        cum = self._cumulative(units)

        def cut(want: float) -> int:
            return max(0, min(len(units) - 1, int(np.searchsorted(cum, want, side="right"))))

        k = cut(target - other)
        have = measure(k)
        for _ in range(4):
            own = int(cum[k - 1]) if k else 0
            moved = cut(own + (target - have) * (own / (have - other) if have > other and own else 1.0))
            if have == target or moved == k:
                break
            k, have = moved, measure(moved)
        return k, have

    def _search(
        self,
        tokens: int,
        n: int,
        text: Callable[[int], str],
        guess: tuple[int, int],
        count: Callable[[str], int],
        fillers: tuple[str, ...],
    ) -> str:
        """The text of count `tokens`: bracket the cut around the guess (a cut and its count), bisect it, then top up
        with single-token fillers."""
        lo, have = guess
        if have == tokens:
            return text(lo)
        hi, step = lo + 1, 4
        while lo > 0 and have > tokens:
            hi, lo = lo, max(0, lo - step)
            have = count(text(lo))
            step *= 2
        while hi < n and (at := count(text(hi))) <= tokens:
            lo, have, hi = hi, at, min(n, hi + step)
            step *= 2
        while hi - lo > 1:  # count(text(lo)) <= tokens < count(text(hi))
            mid = (lo + hi) // 2
            if (at := count(text(mid))) <= tokens:
                lo, have = mid, at
            else:
                hi = mid
        body = text(lo)
        for _ in range(64):
            if have == tokens:
                return body
            for filler in fillers:
                if (at := count(body + filler)) <= tokens:
                    body, have = body + filler, at
                    break
            else:  # every filler overshoots: give back a word and try again
                body = body.rsplit(" ", 1)[0] if " " in body else body
                have = count(body)
        raise UserError(f"could not build an exact {tokens}-token prompt under {self.tok.name}")
