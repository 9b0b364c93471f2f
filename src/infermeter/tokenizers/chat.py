"""Chat templates: a tokenizer's own (Hugging Face, GGUF), or ChatML for the tiktoken encodings, which carry none.

Rendered as transformers renders them (sandboxed Jinja, trimmed blocks), so the prompt infermeter builds and the
prompt its emulator counts are the same text under the same template.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jinja2 import TemplateError

from infermeter.errors import UserError
from infermeter.tokenizers.offline import TiktokenTokenizer, Tokenizer

CHATML = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CHATML_ORIGIN = "ChatML markup as plain text (infermeter's reference template: tiktoken encodings carry none)"
SENTINEL = "\x00infermeter-content\x00"

Message = dict[str, Any]


@dataclass(frozen=True)
class ChatTemplate:
    """A compiled chat template and where it came from (run.json declares it)."""

    source: str
    origin: str
    _template: Any = field(repr=False, compare=False)
    _specials: dict[str, str] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, tok: Tokenizer) -> ChatTemplate | None:
        """The tokenizer's own template; ChatML for a tiktoken encoding; None when a model vocabulary has none."""
        if isinstance(tok, TiktokenTokenizer):
            source, origin = CHATML, CHATML_ORIGIN
        else:
            own = tok.chat_template()
            if own is None:
                return None
            source, origin = own, f"the chat template that comes with {tok.name}"
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)

        def raise_exception(message: str) -> None:
            raise UserError(f"chat template error: {message}")

        env.globals["raise_exception"] = raise_exception
        try:
            compiled = env.from_string(source)
        except TemplateError as exc:
            raise UserError(
                f"{origin} is not a valid Jinja template ({exc}): give a tokenizer with a valid one"
            ) from None
        return cls(source, origin, compiled, dict(getattr(tok, "special_strings", {})))

    def render(self, messages: list[Message]) -> str:
        """The prompt text for these messages, with the assistant's turn opened (add_generation_prompt)."""
        try:
            return str(
                self._template.render(
                    messages=messages,
                    add_generation_prompt=True,
                    bos_token=self._specials.get("bos", ""),
                    eos_token=self._specials.get("eos", ""),
                )
            )
        except TemplateError as exc:
            raise UserError(f"{self.origin} failed to render a user message ({exc})") from None

    def user_renderer(self) -> Callable[[str], str]:
        """render([one user message]) as a function of its content; plain concatenation around the content when
        the template inserts it verbatim once (checked), which is much faster than Jinja per call."""

        def slow(content: str) -> str:
            return self.render([{"role": "user", "content": content}])

        head, sep, tail = slow(SENTINEL).partition(SENTINEL)
        if not sep or SENTINEL in tail or slow("a b") != f"{head}a b{tail}":
            return slow
        return lambda content: head + content + tail
