"""Prompt text for a requested token count.

`build_prompt` uses whole words, each one token to the emulator; `ExactPrompter` hits an exact count under a
real tokenizer and chat template.  The first is for the emulator's word counting, the second for real servers.

Requests that share a prefix (workload prefix_id) get the same leading words, so a server's prefix cache can hit;
every other word is unique to its request, so nothing else is shared by accident.
"""

from __future__ import annotations

import numpy as np

from infermeter.errors import UserError
from infermeter.workload.tokenizers import Tokenizer

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


# Common English words: one token each, with their leading space, in the usual BPE vocabularies.
WORDS = [
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
]
REQUEST_STREAM, PREFIX_STREAM = 0, 1  # word streams keyed by request id, and by shared-prefix id
FILLERS = (" the", " of", " and", " a", " to", " in", " is", ".", ",", " it", " on", " as")


class ExactPrompter:
    """Prompts that tokenize to exactly N tokens after the chat template is applied (seeds/003).

    The template's own tokens are measured once; then, per request, a binary search over how many words of a
    deterministic word stream fit, and single-token fillers top it up to exactly N.  Every prompt's count is
    verified before it is returned.
    """

    def __init__(self, tokenizer: Tokenizer, chat: bool = False, seed: int = 0) -> None:
        self.tok = tokenizer
        self.seed = seed
        self.template = _compile_template(tokenizer) if chat else None
        if chat and self.template is None:
            raise UserError(f"tokenizer {tokenizer.name} has no chat template: build completions prompts (drop --chat)")
        self.overhead = self.count("")

    def render(self, content: str) -> str:
        if self.template is None:
            return content
        return self.template(content)

    def count(self, content: str) -> int:
        return len(self.tok.encode(self.render(content)))

    def _stream(self, kind: int, key: int, n: int) -> list[str]:
        rng = np.random.default_rng([self.seed, 3, kind, key])
        return [WORDS[i] for i in rng.integers(0, len(WORDS), size=n)]

    def build_prefix(self, tokens: int, prefix_id: int) -> str:
        """A shared prefix of exactly `tokens` tokens (under this prompter's template, if any) from a word stream no
        request uses."""
        return self.build(tokens, prefix_id, _kind=PREFIX_STREAM)

    def build(self, tokens: int, request_id: int = 0, prefix: str = "", _kind: int = REQUEST_STREAM) -> str:
        """The content (user message) whose rendered prompt is exactly `tokens` tokens."""
        if tokens <= self.overhead + (self.count(prefix) - self.overhead if prefix else 0):
            raise UserError(
                f"cannot build a {tokens}-token prompt: the template alone takes {self.overhead} "
                f"tokens (and the shared prefix {self.count(prefix) - self.overhead if prefix else 0})"
            )
        words = self._stream(_kind, request_id, tokens + 8)

        def text(k: int) -> str:
            body = " ".join(words[:k])
            return f"{prefix} {body}" if prefix and body else (prefix or body)

        # the words are one token each, so the answer is near tokens - overhead: bracket it there, then bisect
        guess = max(0, min(len(words) - 1, tokens - self.count(prefix)))
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


def _compile_template(tok: Tokenizer):  # type: ignore[no-untyped-def]
    """A Hugging Face chat template rendered the way transformers does (sandboxed Jinja, trimmed blocks)."""
    source = tok.chat_template()
    if source is None:
        return None
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)

    def raise_exception(message: str) -> None:
        raise UserError(f"chat template error: {message}")

    env.globals["raise_exception"] = raise_exception
    template = env.from_string(source)
    specials = getattr(tok, "special_strings", {})

    def render(content: str) -> str:
        return template.render(
            messages=[{"role": "user", "content": content}],
            add_generation_prompt=True,
            bos_token=specials.get("bos", ""),
            eos_token=specials.get("eos", ""),
        )

    return render
