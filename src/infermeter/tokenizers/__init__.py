"""Tokenizers that run offline (tiktoken encodings shipped in the package, tokenizer.json, GGUF vocabularies) and
their chat templates: prompts are built under them and the emulator counts with them."""

from infermeter.tokenizers.chat import ChatTemplate
from infermeter.tokenizers.offline import (
    TIKTOKEN_SHA256,
    TiktokenTokenizer,
    Tokenizer,
    check_spec,
    declaration,
    resolve_tokenizer,
)

REFERENCE = "cl100k_base"  # the shipped reference tokenizer (the IETF draft's option B) when none is named

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
