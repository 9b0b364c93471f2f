"""Moved to `infermeter.tokenizers` (the emulator counts with them too); the CLI still imports these names here."""

from infermeter.tokenizers import TIKTOKEN_SHA256, resolve_tokenizer

__all__ = ["TIKTOKEN_SHA256", "resolve_tokenizer"]
