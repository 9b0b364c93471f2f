"""Tokenizers that run offline (tiktoken encodings shipped in the package, tokenizer.json, GGUF vocabularies) and
their chat templates: prompts are built under them and the emulator counts with them.

Its modules load on first use: naming the reference tokenizer does not import them.
"""

import importlib
from typing import Any

REFERENCE = "cl100k_base"  # the shipped reference tokenizer (the IETF draft's option B) when none is named

_FROM = {
    "ChatTemplate": "chat",
    "TIKTOKEN_SHA256": "offline",
    "TiktokenTokenizer": "offline",
    "Tokenizer": "offline",
    "check_spec": "offline",
    "declaration": "offline",
    "resolve_tokenizer": "offline",
}

__all__ = [
    "REFERENCE",
    "TIKTOKEN_SHA256",
    "ChatTemplate",
    "TiktokenTokenizer",
    "Tokenizer",
    "check_spec",
    "declaration",
    "resolve_tokenizer",
]


def __getattr__(name: str) -> Any:
    if name in _FROM:
        return getattr(importlib.import_module(f"infermeter.tokenizers.{_FROM[name]}"), name)
    raise AttributeError(f"module 'infermeter.tokenizers' has no attribute {name!r}")
