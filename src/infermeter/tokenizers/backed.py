"""The shared base of tokenizers run by the `tokenizers` library (a Hugging Face tokenizer.json, a GGUF vocabulary)."""

from __future__ import annotations

from typing import Any


class TokenizersBacked:
    """encode / decode / chat_template over a `tokenizers.Tokenizer` held in `_tok` and `_template`."""

    _tok: Any
    _template: str | None

    def encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: list[int]) -> str:
        return str(self._tok.decode(ids, skip_special_tokens=False))

    def chat_template(self) -> str | None:
        return self._template
