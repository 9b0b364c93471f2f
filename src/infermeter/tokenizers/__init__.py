"""Tokenizers that run offline (tiktoken encodings shipped in the package, tokenizer.json, GGUF vocabularies) and
their chat templates: prompts are built under them and the emulator counts with them.

Its modules load on first use: naming the reference tokenizer does not import them.
"""

from infermeter.lazy import lazy_exports

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

__all__ = ["REFERENCE", *_FROM]

__getattr__ = lazy_exports(__name__, _FROM)
