"""Which tokenizer a run builds its prompts with and counts with, and which count its metrics use.

The IETF LLM benchmarking draft names two token counting methods: option A counts with the model's native
tokenizer, option B with a declared reference tokenizer.  A run counts with the tokenizer the user names; without
one, with the tokenizer the server declares (infermeter's emulator does, in /v1/models), else with the shipped
cl100k_base as the reference.  A model's own vocabulary (tokenizer.json, GGUF), or the tokenizer the server
declares, is native: option A, and the metrics use the server's usage counts.  Otherwise option B: the metrics use
the reference counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import aiohttp
import orjson

from infermeter.client.urls import endpoint
from infermeter.errors import UserError
from infermeter.metrics.prefill_curve import PrefillCurve
from infermeter.run_info import Tokenizer as TokenizerBlock
from infermeter.tokenizers import REFERENCE, TiktokenTokenizer, Tokenizer, declaration, resolve_tokenizer

Method = Literal["A", "B"]


@dataclass(frozen=True)
class TokenCounting:
    """The run's tokenizer, its counting option, and why (run.json's tokenizer block says all three)."""

    tokenizer: Tokenizer
    method: Method
    reason: str
    server_declares: str | None = None

    def count_text(self, text: str) -> int:
        """Tokens of a reply's text under this tokenizer (the records' ref_output_tokens)."""
        return len(self.tokenizer.encode(text)) if text else 0

    def block(self) -> TokenizerBlock:
        """run.json's tokenizer block, before the prompts' own part (load/prompts.py adds it)."""
        name = self.tokenizer.name
        metrics = (
            "server-reported counts (records' input_tokens, output_tokens)"
            if self.method == "A"
            else f"reference counts under {name} (records' ref_input_tokens, ref_output_tokens; else the server's)"
        )
        return TokenizerBlock(
            **declaration(self.tokenizer, self.method),
            method=f"IETF LLM benchmarking draft, token counting option {self.method}",
            chosen_because=self.reason,
            server_declares=self.server_declares,
            metrics_count=metrics,
            record_counts={
                "input_tokens": "the server's usage prompt_tokens, else the built prompt's length",
                "output_tokens": "the server's usage completion_tokens, else the tokens of the streamed events",
                "ref_input_tokens": f"the built prompt's exact length under {name}",
                "ref_output_tokens": f"the received text counted under {name} when its stream ended",
            },
        )


def choose_counting(spec: str | None, server_declares: str | None = None) -> TokenCounting:
    """The tokenizer named (`spec`), else the one the server declares, else the shipped reference; and its option."""
    unusable = ""
    if spec is None and server_declares:
        try:
            tok = resolve_tokenizer(server_declares)
        except UserError as exc:  # a path on the server's machine, say: count with the reference instead
            unusable = f"; the server declares {server_declares}, which cannot be loaded here ({exc})"
        else:
            why = f"no tokenizer named; the server declares it counts with {server_declares}: its native tokenizer"
            return TokenCounting(tok, "A", why, server_declares)
    chosen = spec or REFERENCE
    tok = resolve_tokenizer(chosen)
    if not isinstance(tok, TiktokenTokenizer):
        why = f"{chosen} is a model's own vocabulary, named as the server's tokenizer"
        return TokenCounting(tok, "A", why, server_declares)
    if server_declares == chosen:
        why = f"the server declares it counts with {chosen} too: its native tokenizer"
        return TokenCounting(tok, "A", why, server_declares)
    if spec:
        why = f"{chosen} named as the reference tokenizer"
    else:
        why = f"no tokenizer named{unusable or ' and the server declares none'}: the shipped reference {chosen}"
    return TokenCounting(tok, "B", why, server_declares)


async def declared_tokenizer(base_url: str | None, model: str, headers: dict[str, str]) -> str | None:
    """The tokenizer a server declares for `model` in its /v1/models listing (infermeter's emulator does), or None."""
    if not base_url:
        return None
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as s,
            s.get(endpoint(base_url, "/v1/models"), headers=headers) as r,
        ):
            if r.status != 200:
                return None
            data = orjson.loads(await r.read())
    except (aiohttp.ClientError, TimeoutError, orjson.JSONDecodeError, ValueError):
        return None
    models = data.get("data") if isinstance(data, dict) else None
    for entry in models if isinstance(models, list) else []:
        if isinstance(entry, dict) and entry.get("id") == model and isinstance(entry.get("tokenizer"), str):
            return str(entry["tokenizer"])
    return None


def curve_mismatch(curve: PrefillCurve, counting: TokenCounting) -> str | None:
    """Why a prefill curve's prompt lengths are not the counts this run's deadlines are evaluated on, or None."""
    if not curve.counting_method:
        return (
            "the prefill curve does not say which token count it was fitted on (made before infermeter recorded "
            f"it): its deadlines are evaluated on option {counting.method} counts under {counting.tokenizer.name}"
        )
    if curve.counting_method != counting.method or curve.tokenizer != counting.tokenizer.name:
        return (
            f"the prefill curve was fitted on option {curve.counting_method} counts under {curve.tokenizer}, but "
            f"this run's deadlines are evaluated on option {counting.method} counts under {counting.tokenizer.name}"
        )
    return None
