"""The emulator's tokenizer: a prompt's tokens (completions, and chat under the template it declares), and the
text of every token it streams, each piece one token so that a reply counts as many tokens as were sent."""

from __future__ import annotations

from typing import Any

import orjson

from infermeter.errors import UserError
from infermeter.tokenizers import ChatTemplate, resolve_tokenizer

# the words a reply is made of, cycled; one token each (with the leading space) in cl100k_base and o200k_base
REPLY_WORDS = (
    "the",
    "model",
    "streams",
    "tokens",
    "at",
    "a",
    "steady",
    "pace",
    "while",
    "batches",
    "form",
    "and",
    "drain",
    "under",
    "load",
    "from",
    "many",
    "clients",
    "across",
    "time",
)


class EmulatorTokenizer:
    """Counts prompts with the tokenizer named in the emulator's configuration."""

    def __init__(self, spec: str) -> None:
        self.spec = spec
        self.tok = resolve_tokenizer(spec)
        self.template = ChatTemplate.of(self.tok)
        self.pieces = [f" {w}" for w in REPLY_WORDS if len(self.tok.encode(f" {w}")) == 1]
        if not self.pieces:
            raise UserError(f"tokenizer {spec} has none of the emulator's reply words as a single token")
        self.pieces_json = [orjson.dumps(p) for p in self.pieces]
        self.piece_ids = [self.tok.encode(p)[0] for p in self.pieces]

    def completion(self, prompt: str) -> list[int]:
        return self.tok.encode(prompt)

    def chat(self, messages: list[Any]) -> list[int]:
        """The tokens of the messages under the chat template, the assistant's turn opened; ValueError without one."""
        if self.template is None:
            raise ValueError(f"the emulator's tokenizer {self.tok.name} has no chat template: use /v1/completions")
        return self.tok.encode(self.template.render([_message(m) for m in messages]))

    def reply(self, k: int) -> str:
        """The k-th token of every reply."""
        return self.pieces[k % len(self.pieces)]

    def reply_json(self, k: int) -> bytes:
        """The k-th token of every reply as a JSON string (encoded once: a stream writes one per token)."""
        return self.pieces_json[k % len(self.pieces_json)]

    def reply_id(self, k: int) -> int:
        """The k-th token's id (TGI streams it)."""
        return self.piece_ids[k % len(self.piece_ids)]

    def declaration(self) -> dict[str, Any]:
        """What /v1/models says about how this server counts tokens."""
        return {"tokenizer": self.spec, "chat_template": self.template.origin if self.template else None}


def _message(m: Any) -> dict[str, str]:
    """A chat message as the template takes it: role and content as text (OpenAI content parts joined)."""
    if not isinstance(m, dict):
        raise ValueError("every message must be an object with a role and content")
    content = m.get("content") or ""
    if isinstance(content, list):
        content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return {"role": str(m.get("role", "user")), "content": str(content)}
