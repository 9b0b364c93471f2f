"""The special-token declaration (the IETF draft, 4.4.3) is computed for each run from its tokenizer, chat template,
workload and request options: BOS/EOS, the chat template's own tokens, the system prompt, tool/function-call tokens."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from infermeter.load.counting import TokenCounting, choose_counting
from infermeter.load.prompts import tokenizer_block
from infermeter.load.special_tokens import special_tokens
from infermeter.run_info import SpecialTokens
from infermeter.workload.prompts import ExactPrompter
from infermeter.workload_declaration import PrefixSharing, WorkloadDeclaration

PLAIN = WorkloadDeclaration(name="synthetic-uniform", seed=1)
SHARED = WorkloadDeclaration(
    name="conversation",
    seed=1,
    prefix_sharing=PrefixSharing(fraction=0.5, count=1, length="fixed 200"),
)
TOOLS = {"tools": [{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "g"}}]}


def declare(
    counting: TokenCounting,
    chat: bool = False,
    workload: WorkloadDeclaration = PLAIN,
    ignore_eos: bool = True,
    extra_body: dict[str, Any] | None = None,
) -> SpecialTokens:
    prompter = ExactPrompter(counting.tokenizer, chat=chat)
    return special_tokens(counting, prompter, workload, ignore_eos=ignore_eos, extra_body=extra_body or {})


@pytest.fixture(scope="module")
def bos_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tokenizer.json whose post-processor adds <s> to every prompt, as Llama's does, with its config's BOS/EOS."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    vocab = {"[UNK]": 0, "<s>": 1, "</s>": 2, **{w: i + 3 for i, w in enumerate(["user", ":", "a", "the", "of"])}}
    t = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    t.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    t.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    path = tmp_path_factory.mktemp("bos") / "tokenizer.json"
    t.save(str(path))
    config = {"bos_token": "<s>", "eos_token": {"content": "</s>"}, "chat_template": "{% for m in messages %}"
              "{{ m['role'] }} : {{ m['content'] }}{% endfor %}"}  # fmt: skip
    path.with_name("tokenizer_config.json").write_text(orjson.dumps(config).decode())
    return path


def test_the_reference_tokenizer_on_completions_declares_each_part() -> None:
    s = declare(choose_counting(None))
    assert "reference cl100k_base has no BOS" in s.bos_eos and "ignore_eos" in s.bos_eos
    assert s.chat_template.startswith("none: the completions API")
    assert s.system_prompt.startswith("none is sent") and s.tool_calls.startswith("none: no tools")


def test_each_option_changes_what_is_declared() -> None:
    """Not one sentence for every run: the chat template, a shared prefix, tools and EOS each show."""
    ref = choose_counting(None)
    base = declare(ref)
    chat = declare(ref, chat=True)
    assert "ChatML" in chat.chat_template and f"its {ExactPrompter(ref.tokenizer, chat=True).overhead} tokens" in (
        chat.chat_template
    )
    shared = declare(ref, workload=SHARED)
    assert (
        "1 distinct, fixed 200 tokens long, on 50% of requests" in shared.system_prompt
        and "counted" in shared.system_prompt
    )
    assert "opens the user message" in declare(ref, chat=True, workload=SHARED).system_prompt
    tools = declare(ref, chat=True, extra_body={**TOOLS, "tool_choice": "auto"})
    assert "2 definition(s)" in tools.tool_calls and "tool_choice" in tools.tool_calls
    assert "formats them into the prompt with its template's tool tokens" in tools.tool_calls
    assert "excluded" in tools.tool_calls
    native = declare(choose_counting(None, "cl100k_base"), chat=True, extra_body=TOOLS)
    assert "option A): included" in native.tool_calls
    eos = declare(ref, ignore_eos=False)
    assert "<|endoftext|>" in eos.bos_eos and "ignore_eos" not in eos.bos_eos
    assert len({str(s) for s in (base, chat, shared, tools, native, eos)}) == 6


def test_tools_on_the_completions_api_are_not_said_to_be_formatted_by_a_template() -> None:
    """The completions API has no chat template: nothing formats tool definitions into the prompt there (a mutant
    keeping the chat sentence says the server formats them with its template)."""
    plain = declare(choose_counting(None), extra_body=TOOLS)
    assert "2 definition(s)" in plain.tool_calls and "completions API" in plain.tool_calls
    assert "no chat template" in plain.tool_calls and "template's tool tokens" not in plain.tool_calls
    native = declare(choose_counting(None, "cl100k_base"), extra_body=TOOLS)
    assert "option A" in native.tool_calls and "template's tool tokens" not in native.tool_calls


@pytest.fixture(scope="module")
def bos_template_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tokenizer.json whose chat template opens with {{ bos_token }}, as Llama 3's does, its config naming <s>."""
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers

    words = ["user", ":", "a", "the", "of", "hello", "."]
    vocab = {"[UNK]": 0, "<s>": 1, "</s>": 2, **{w: i + 3 for i, w in enumerate(words)}}
    t = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    t.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    t.add_special_tokens([AddedToken("<s>", special=True), AddedToken("</s>", special=True)])
    path = tmp_path_factory.mktemp("bos-template") / "tokenizer.json"
    t.save(str(path))
    config = {"bos_token": {"content": "<s>"}, "eos_token": "</s>", "chat_template": "{{ bos_token }}"
              "{% for m in messages %} {{ m['role'] }} : {{ m['content'] }}{% endfor %}"}  # fmt: skip
    path.with_name("tokenizer_config.json").write_text(orjson.dumps(config).decode())
    return path


def test_a_hugging_face_template_renders_its_bos_as_a_server_does(bos_template_tokenizer: Path) -> None:
    """`{{ bos_token }}` renders <s> from tokenizer_config.json (it rendered empty, while servers render and count
    it), the built prompts still have exactly the asked length with it, and the declaration says the template writes
    it (a mutant without HFTokenizer.special_strings renders no BOS)."""
    from infermeter.tokenizers.offline import resolve_tokenizer

    tok = resolve_tokenizer(str(bos_template_tokenizer))
    assert tok.special_strings == {"bos": "<s>", "eos": "</s>"}  # type: ignore[attr-defined]
    p = ExactPrompter(tok, chat=True)
    assert p.render("").startswith("<s>") and p.overhead == 3  # "<s>", "user", ":"
    for n in (8, 20, 57):
        content = p.build(n, n)
        assert p.count(content) == n and len(tok.encode(p.render(content))) == n
    s = declare(choose_counting(str(bos_template_tokenizer)), chat=True)
    assert "BOS <s> is written by the chat template" in s.bos_eos


def test_a_tokenizer_that_adds_bos_says_so_and_which_count_holds_it(bos_tokenizer: Path) -> None:
    native = choose_counting(str(bos_tokenizer))  # a model's own vocabulary: option A
    s = declare(native)
    assert "adds <s>" in s.bos_eos and "option A): included" in s.bos_eos
    eos = declare(native, ignore_eos=False)
    assert "</s>" in eos.bos_eos and "completion_tokens (option A)" in eos.bos_eos
    chat = declare(native, chat=True)
    assert "the chat template that comes with" in chat.chat_template


def test_the_tokenizer_block_carries_the_declaration_and_its_line() -> None:
    counting = choose_counting(None)
    prompter = ExactPrompter(counting.tokenizer)
    special = special_tokens(counting, prompter, SHARED, ignore_eos=True, extra_body={})
    block = tokenizer_block(counting, prompter, "one token per event", special)
    assert block.special == special
    assert block.special_tokens is not None and "System prompt: the workload's shared prefix" in block.special_tokens
    assert tokenizer_block(counting, prompter, "one token per event").special is None  # nothing given: not declared
