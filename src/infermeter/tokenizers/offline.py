"""Offline tokenizers (draft 4.4): tiktoken's cl100k_base / o200k_base from files shipped in the package, a
Hugging Face tokenizer.json by path, or the vocabulary inside a GGUF model file.  Nothing is ever downloaded.

The shipped BPE files are checked against the sha256 tiktoken publishes for them before use.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

from infermeter.errors import UserError
from infermeter.tokenizers.backed import TokenizersBacked

# tiktoken_ext/openai_public.py: the expected_hash of each encoding file
TIKTOKEN_SHA256 = {
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}


class Tokenizer(Protocol):
    """What every offline tokenizer offers; name, vocab_size and source are read-only (properties or fields)."""

    @property
    def name(self) -> str: ...

    @property
    def vocab_size(self) -> int: ...

    @property
    def source(self) -> str: ...

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: list[int]) -> str: ...

    def chat_template(self) -> str | None:
        """A Jinja chat template, when the tokenizer comes with one."""
        ...


def _load_ranks(name: str) -> dict[bytes, int]:
    data_file = resources.files("infermeter.tokenizers") / "data" / f"{name}.tiktoken.gz"
    raw = gzip.decompress(data_file.read_bytes())
    digest = hashlib.sha256(raw).hexdigest()
    if digest != TIKTOKEN_SHA256[name]:
        raise UserError(
            f"the shipped {name} vocabulary is corrupt (sha256 {digest[:12]}..., expected "
            f"{TIKTOKEN_SHA256[name][:12]}...): reinstall infermeter"
        )
    ranks: dict[bytes, int] = {}
    for line in raw.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


@dataclass
class TiktokenTokenizer:
    """An OpenAI encoding, built from the shipped file with tiktoken's own pattern and special tokens."""

    name: str
    _enc: Any = field(repr=False, default=None)

    def __post_init__(self) -> None:
        import tiktoken
        import tiktoken_ext.openai_public as public

        ranks = _load_ranks(self.name)
        original = public.load_tiktoken_bpe
        public.load_tiktoken_bpe = lambda *a, **k: ranks  # the definition without its download
        try:
            params = getattr(public, self.name)()
        finally:
            public.load_tiktoken_bpe = original
        self._enc = tiktoken.Encoding(**params)

    @property
    def vocab_size(self) -> int:
        return int(self._enc.n_vocab)

    @property
    def source(self) -> str:
        return f"tiktoken {self.name} (shipped with infermeter, sha256 verified)"

    def encode(self, text: str) -> list[int]:
        return self._enc.encode(text, disallowed_special=())

    def decode(self, ids: list[int]) -> str:
        return self._enc.decode(ids)

    def chat_template(self) -> str | None:
        return None


def _config_token(value: object) -> str | None:
    """A tokenizer_config.json special token: a string, or {"content": ...}."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) and value else None


@dataclass
class HFTokenizer(TokenizersBacked):
    """A Hugging Face `tokenizer.json`; a `tokenizer_config.json` beside it supplies the chat template and the BOS and
    EOS strings (`special_strings`, as a GGUF vocabulary gives them: the template renders `{{ bos_token }}` with them,
    as a server does)."""

    path: Path
    _tok: Any = field(repr=False, default=None)
    _template: str | None = None
    special_strings: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from tokenizers import Tokenizer as _HF

        self._tok = _HF.from_file(str(self.path))
        config = self.path.with_name("tokenizer_config.json")
        doc = json.loads(config.read_text()) if config.is_file() else {}
        doc = doc if isinstance(doc, dict) else {}
        tpl = doc.get("chat_template")
        self._template = tpl if isinstance(tpl, str) else None
        tokens = {k: _config_token(doc.get(f"{k}_token")) for k in ("bos", "eos")}
        self.special_strings = {k: v for k, v in tokens.items() if v is not None}

    name = property(lambda self: self.path.parent.name or self.path.stem)

    @property
    def vocab_size(self) -> int:
        return int(self._tok.get_vocab_size())

    @property
    def source(self) -> str:
        return f"Hugging Face tokenizer.json at {self.path}"


def check_spec(spec: str) -> str:
    """`spec` when `resolve_tokenizer` can load it, checked without loading it (configuration validation)."""
    if spec in TIKTOKEN_SHA256:
        return spec
    path = Path(spec)
    if path.suffix in (".gguf", ".json") or path.name == "tokenizer.json":
        if not path.is_file():
            raise UserError(f"tokenizer file {path} does not exist (nothing is downloaded): give a local path")
        return spec
    raise UserError(
        f"unknown tokenizer '{spec}': use cl100k_base, o200k_base, a path to tokenizer.json, or a path to a .gguf"
    )


def resolve_tokenizer(spec: str) -> Tokenizer:
    """'cl100k_base', 'o200k_base', a tokenizer.json path, or a .gguf model path; a clear error otherwise."""
    if spec in TIKTOKEN_SHA256:
        return TiktokenTokenizer(spec)
    path = Path(spec)
    if path.suffix == ".gguf" or spec.endswith(".gguf"):
        if not path.is_file():
            raise UserError(f"GGUF file {path} does not exist: give the path of a model file")
        from infermeter.tokenizers.gguf_vocab import GGUFTokenizer

        try:
            return GGUFTokenizer(path)
        except UserError:
            raise
        except Exception as exc:  # a damaged file can fail anywhere in the gguf reader
            raise UserError(f"{path} is not a readable GGUF file ({type(exc).__name__}: {exc})") from None
    if path.suffix == ".json" or path.name == "tokenizer.json":
        if not path.is_file():
            raise UserError(f"tokenizer file {path} does not exist (nothing is downloaded): give a local path")
        try:
            return HFTokenizer(path)
        except Exception as exc:  # the tokenizers library raises a bare Exception for a malformed file
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise UserError(f"{path} is not a Hugging Face tokenizer.json ({reason}): give a valid one") from None
    raise UserError(
        f"unknown tokenizer '{spec}': use cl100k_base, o200k_base, a path to tokenizer.json, or a path to a .gguf"
    )


def declaration(tok: Tokenizer, method: str = "B") -> dict[str, Any]:
    """What run.json says about the tokenizer itself (draft 4.4.1-4.4.2)."""
    return {
        "name": tok.name,
        "vocab_size": tok.vocab_size,
        "source": tok.source,
        "counting_method": method,
        "counting_method_text": "native tokenizer" if method == "A" else "reference tokenizer",
    }  # special tokens depend on the run's options too: load/special_tokens.py declares them
