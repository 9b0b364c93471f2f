"""A tokenizer from the vocabulary inside a GGUF model file (the `gguf` package reads it; `tokenizers` runs it).

Supports GGUF's "gpt2" (byte-level BPE) model with the pre-tokenizers llama.cpp names gpt2/default, smollm
(digits split one by one, as SmolLM's tokenizer.json does) and llama-bpe / llama3.  Control and user-defined
tokens are matched whole in text, as llama.cpp does when it tokenizes a chat-formatted prompt.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infermeter.errors import UserError
from infermeter.tokenizers.backed import TokenizersBacked

LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
    r"|\s+(?!\S)|\s+"
)
CONTROL, USER_DEFINED = 3, 4


@dataclass
class GGUFTokenizer(TokenizersBacked):
    path: Path
    _tok: Any = field(repr=False, default=None)
    _template: str | None = None
    _pre: str = ""
    special_strings: dict[str, str] = field(default_factory=dict)
    add_bos: bool = False

    def __post_init__(self) -> None:
        import gguf
        from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

        try:
            fields = gguf.GGUFReader(str(self.path)).fields
        except (ValueError, OSError) as exc:
            raise UserError(f"{self.path} is not a readable GGUF file: {exc}") from None

        def get(key: str, default: Any = None) -> Any:
            return fields[key].contents() if key in fields else default

        model = get("tokenizer.ggml.model")
        if model != "gpt2":
            raise UserError(f"{self.path}: GGUF tokenizer model '{model}' is not supported (byte-level BPE 'gpt2' is)")
        tokens: list[str] = get("tokenizer.ggml.tokens")
        merges: list[str] = get("tokenizer.ggml.merges")
        types: list[int] = get("tokenizer.ggml.token_type", [1] * len(tokens))
        self._pre = str(get("tokenizer.ggml.pre", "default"))
        bpe = models.BPE(
            vocab={t: i for i, t in enumerate(tokens)},
            merges=[(left, right) for left, _, right in (m.partition(" ") for m in merges)],
            ignore_merges=False,
        )
        tok = Tokenizer(bpe)
        byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        if self._pre in ("gpt2", "default", "gpt-2"):
            tok.pre_tokenizer = byte_level
        elif self._pre == "smollm":
            tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
        elif self._pre in ("llama-bpe", "llama3", "llama-v3"):
            tok.pre_tokenizer = pre_tokenizers.Sequence(
                [
                    pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated"),
                    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
                ]
            )
        else:
            raise UserError(f"{self.path}: GGUF pre-tokenizer '{self._pre}' is not supported yet")
        tok.decoder = decoders.ByteLevel()
        specials = [t for t, ty in zip(tokens, types, strict=True) if ty in (CONTROL, USER_DEFINED)]
        tok.add_special_tokens(specials)
        self._tok = tok
        self._vocab = len(tokens)
        self._template = get("tokenizer.chat_template")
        bos, eos = get("tokenizer.ggml.bos_token_id"), get("tokenizer.ggml.eos_token_id")
        self.special_strings = {k: tokens[i] for k, i in (("bos", bos), ("eos", eos)) if i is not None}
        self.add_bos = bool(get("tokenizer.ggml.add_bos_token", False))

    @property
    def name(self) -> str:
        return f"{self.path.name} (GGUF vocabulary)"

    @property
    def vocab_size(self) -> int:
        return self._vocab

    @property
    def source(self) -> str:
        return f"GGUF file {self.path} (tokenizer.ggml.model gpt2, pre-tokenizer {self._pre})"
