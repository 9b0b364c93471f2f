"""What a tokenizer does with special tokens (the IETF draft, 4.4.3): its BOS and EOS, and the tokens a server's default
encoding adds around a prompt (a Hugging Face post-processor's, a GGUF file's add_bos_token), which infermeter's own
encoding (add_special_tokens off) leaves out of the built prompt's length."""

from __future__ import annotations

from dataclasses import dataclass

from infermeter.tokenizers.offline import HFTokenizer, TiktokenTokenizer, Tokenizer

TIKTOKEN_EOS = "<|endoftext|>"  # the OpenAI encodings' end of text; they have no BOS


@dataclass(frozen=True)
class Specials:
    """A tokenizer's BOS and EOS (None: it has none, or does not say), and what a server's encoding adds."""

    bos: str | None
    eos: str | None
    added: tuple[str, ...]  # tokens a server's default encoding puts around a prompt (add_special_tokens)
    known: bool = True  # False: a tokenizer whose special tokens infermeter cannot read


def _hf(tok: HFTokenizer) -> Specials:
    plain = tok._tok.encode("a", add_special_tokens=False).tokens
    full = tok._tok.encode("a", add_special_tokens=True).tokens
    at = next((k for k in range(len(full) - len(plain) + 1) if full[k : k + len(plain)] == plain), 0)
    added = tuple(full[:at]) + tuple(full[at + len(plain) :])
    return Specials(tok.special_strings.get("bos"), tok.special_strings.get("eos"), added)


def specials(tok: Tokenizer) -> Specials:
    """The special tokens of the run's tokenizer: tiktoken's encodings, a tokenizer.json (and its config), a GGUF."""
    if isinstance(tok, TiktokenTokenizer):
        return Specials(None, TIKTOKEN_EOS, ())
    if isinstance(tok, HFTokenizer):
        return _hf(tok)
    strings = getattr(tok, "special_strings", None)  # a GGUF vocabulary (gguf_vocab, imported only with the package)
    if isinstance(strings, dict):
        bos = strings.get("bos")
        return Specials(bos, strings.get("eos"), (bos,) if bos and getattr(tok, "add_bos", False) else ())
    return Specials(None, None, (), known=False)
