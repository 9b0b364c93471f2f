"""Build, offline, the model directory the second tier's vLLM serves: a random-weight Llama and a word-level tokenizer.

usage: python vllm_model.py OUT_DIR   (with torch, transformers and tokenizers: the vLLM venv's python)

Nothing is downloaded.  The tokenizer is word-level over infermeter's own prompt words and the Python standard
library's source, so that every id decodes on its own to one non-empty piece of text: a random-weight model emits
arbitrary ids, and with a byte-level BPE some would be partial UTF-8 that a streaming detokenizer holds back (fewer
events than tokens).  Here the server streams exactly one event per generated token.  No BOS/EOS anywhere, so the
server's prompt_tokens is infermeter's exact prompt length and generation always runs to max_tokens.  The tokenizer
config carries a chat template, so the chat API renders prompts infermeter can count exactly.
"""

from __future__ import annotations

import collections
import json
import re
import sys
import sysconfig
import time
from pathlib import Path

VOCAB = 32000
PRE = re.compile(r"\w+|[^\w\s]+")  # the split of tokenizers' Whitespace pre-tokenizer
# role markers of the chat template below: each one word-level token
CHAT_TEMPLATE = (
    "{% for message in messages %}<| {{ message['role'] }} |> {{ message['content'] }} "
    "{% endfor %}{% if add_generation_prompt %}<| assistant |> {% endif %}"
)
MARKERS = ["<|", "|>", "system", "user", "assistant"]
# ~11 M parameters: 4 layers of 256 (GQA 4/2), MLP 768, embeddings tied
SHAPE = {
    "hidden_size": 256,
    "intermediate_size": 768,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "tie_word_embeddings": True,
}


def vocabulary() -> dict[str, int]:
    """infermeter's prompt words and fillers first (always in), then the standard library's commonest pre-tokens."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
    from infermeter.workload import content

    must = [*map(str, content.WORDS), *(f.strip() for f in content.FILLERS), *(f.strip() for f in content.CODE_FILLERS)]
    words = [w for text in must for w in PRE.findall(text)]
    counts: collections.Counter[str] = collections.Counter()
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(stdlib.glob("*.py")) + sorted(stdlib.glob("*/*.py")):
        try:
            counts.update(PRE.findall(path.read_text(encoding="ascii", errors="ignore")))
        except OSError:
            continue
    vocab: dict[str, int] = {}
    for tok in ["unk", *MARKERS, *words, *(t for t, _ in counts.most_common())]:
        if tok and tok not in vocab and PRE.fullmatch(tok) and tok.isascii():
            vocab[tok] = len(vocab)
        if len(vocab) >= VOCAB:
            break
    if len(vocab) != VOCAB:
        raise SystemExit(f"only {len(vocab)} distinct pre-tokens found")
    return vocab


def build_tokenizer(out: Path) -> int:
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = vocabulary()
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="unk"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(out / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": 8192,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=1))
    bad = [i for i in range(len(vocab)) if tok.encode(tok.decode([i]), add_special_tokens=False).ids != [i]]
    if bad:
        raise SystemExit(f"{len(bad)} ids do not decode and encode back to themselves alone, e.g. {bad[:5]}")
    return len(vocab)


def build_model(out: Path, vocab_size: int) -> int:
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=vocab_size, bos_token_id=None, eos_token_id=None, pad_token_id=None, max_position_embeddings=8192,
        rope_theta=500000.0, rms_norm_eps=1e-5, attention_bias=False, mlp_bias=False, **SHAPE,
    )  # fmt: skip
    config.dtype = torch.float32
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(torch.float32)
    model.generation_config = GenerationConfig(do_sample=False, eos_token_id=None, bos_token_id=None,
                                               pad_token_id=None)  # fmt: skip
    model.save_pretrained(out)
    return sum(p.numel() for p in model.parameters())


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    vocab = build_tokenizer(out)
    params = build_model(out, vocab)
    print(f"{out}: random-weight Llama, {params / 1e6:.1f} M parameters, float32, word-level vocabulary of {vocab}, "
          f"built in {time.monotonic() - t0:.1f} s")  # fmt: skip


if __name__ == "__main__":
    main()
