"""What prompts are made of (IETF draft, Appendix A): exact lengths for every content kind, real standard-library
source for code, English sentences for prose, a ~100-token question after a document, and run.json's declaration."""

from __future__ import annotations

import re
import sysconfig
from pathlib import Path

import pytest

from infermeter.errors import UserError
from infermeter.records import read_run_info
from infermeter.suites.long_context import LongContextParams, LongContextSuite
from infermeter.tokenizers import resolve_tokenizer
from infermeter.workload import STANDARD, generate
from infermeter.workload.build import build_requests
from infermeter.workload.content import KINDS, WORDS, code_corpus, describe
from infermeter.workload.prompts import ExactPrompter
from infermeter.workload.spec import load_spec_file
from tests.cli import infermeter

CL100K = resolve_tokenizer("cl100k_base")
NEW_KINDS = ("prose", "code", "document-question")
STDLIB = Path(sysconfig.get_paths()["stdlib"])


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
@pytest.mark.parametrize("kind", NEW_KINDS)
def test_every_kind_builds_exact_lengths_with_and_without_template_and_prefix(name: str, kind: str) -> None:
    tok = resolve_tokenizer(name)
    for chat in (False, True):
        p = ExactPrompter(tok, chat=chat, seed=11)
        prefix = ExactPrompter(tok, seed=11).build_prefix(300, 4, kind)
        assert len(tok.encode(prefix)) == 300
        for n in [p.overhead + 1, p.overhead + 5, 64, 101, 150, 257, 640, 1999]:
            prompt = p.build(n, n, content=kind)
            assert p.count(prompt) == n, (chat, n)
        for n in (p.overhead + 301, 333, 1024):
            prompt = p.build(n, n, prefix, kind)
            assert prompt.startswith(prefix) and p.count(prompt) == n, (chat, n)


def test_long_documents_are_exact() -> None:
    p = ExactPrompter(CL100K, seed=3)
    for n in (8192, 32768):
        assert len(CL100K.encode(p.build(n, 1, content="document-question"))) == n


def test_the_word_list_default_is_unchanged() -> None:
    """Synthetic workloads keep the prompts of earlier releases (values from the word-list builder before content
    kinds existed), so their numbers do not move."""
    p = ExactPrompter(CL100K, seed=7)
    prefix = p.build_prefix(6, 0)
    assert prefix == "up during which in its about"
    assert p.build(16, 3) == "east would her been who an river known at made they but when or east about"
    assert p.build(12, 3, prefix) == "up during which in its about east would her been who an"


def test_code_is_consecutive_lines_of_the_named_standard_library_module() -> None:
    p = ExactPrompter(CL100K, seed=5)
    for rid in range(20):
        prompt = p.build(400, rid, content="code")
        header, *lines = prompt.split("\n")
        assert re.fullmatch(r"# \w+\.py", header)
        source = (STDLIB / header[2:]).read_text(encoding="utf-8")
        own = next((i for i, line in enumerate(lines) if re.fullmatch(r"# \w+\.py", line)), len(lines))
        run = "\n".join(lines[: min(own, len(lines) - 1, 6)])  # its own module's lines; the last may be cut short
        assert run.strip() and run in "\n".join(line.rstrip() for line in source.splitlines()), rid
    joined = "".join(p.build(2000, rid, content="code") for rid in range(5))
    assert "def " in joined and "return" in joined and "self" in joined


def test_repository_contexts_open_several_modules_and_differ() -> None:
    p = ExactPrompter(CL100K, seed=5)
    contexts = [p.build_prefix(768, k, "code") for k in range(10)]
    for ctx in contexts:
        assert len(CL100K.encode(ctx)) == 768
        sections = ctx.split("\n\n# ")
        names = re.findall(r"^# (\w+)\.py$", ctx, re.MULTILINE)
        assert len(names) >= 2 and len(set(names)) == len(names)
        opening = sections[0].split("\n", 1)[1]  # the first module, from its first line
        source = (STDLIB / f"{names[0]}.py").read_text(encoding="utf-8")
        assert "\n".join(line.rstrip() for line in source.splitlines()).startswith(opening.rsplit("\n", 1)[0])
    assert len({ctx.split("\n")[0] for ctx in contexts}) == 10  # ten contexts open ten different modules


def test_prose_is_sentences_not_the_word_list() -> None:
    p = ExactPrompter(CL100K, seed=2)
    text = p.build(600, 9, content="prose")
    sentences = re.split(r"(?<=\.)\s+", text)
    assert len(sentences) > 20
    for s in sentences[:-1]:  # the last one is cut where the count lands
        assert re.fullmatch(r"[A-Z][A-Za-z0-9 ,]+\.", s), s
    assert "\n\n" in text  # paragraphs
    vocabulary = {w.strip(".,") for w in text.split()}
    assert len(vocabulary - set(WORDS)) > 50


def test_the_question_follows_the_document_and_is_about_100_tokens() -> None:
    p = ExactPrompter(CL100K, seed=4)
    prompt = p.build(3000, 1, content="document-question")
    document, question = prompt.rsplit("\n\nQuestion: ", 1)
    assert 90 <= len(CL100K.encode("\n\nQuestion: " + question)) <= 115
    town = re.search(r"happened in (\w+)\.", question)
    assert town is not None and town.group(1) in document
    assert len(CL100K.encode(document)) > 2800  # the document fills the rest
    named = re.search(r"sentence in which (\w+) is first", question)
    assert named is not None and document.startswith(named.group(1))


def test_a_prompt_too_short_for_the_question_is_the_document_alone() -> None:
    p = ExactPrompter(CL100K, seed=4)
    prompt = p.build(40, 1, content="document-question")
    assert "Question" not in prompt and prompt[0].isupper() and len(CL100K.encode(prompt)) == 40


@pytest.mark.parametrize("kind", KINDS)
def test_same_seed_same_prompts_other_seed_other_prompts(kind: str) -> None:
    a, b, c = (ExactPrompter(CL100K, seed=s) for s in (1, 1, 2))
    assert [a.build(300, i, content=kind) for i in range(5)] == [b.build(300, i, content=kind) for i in range(5)]
    assert a.build(300, 0, content=kind) != c.build(300, 0, content=kind)


@pytest.mark.parametrize("kind", NEW_KINDS)
def test_no_two_requests_share_a_first_cache_block(kind: str) -> None:
    """Without a shared prefix, the first 16 tokens (a vLLM cache block) of 400 requests are all different, so a
    prefix cache hits only what the workload shares on purpose."""
    p = ExactPrompter(CL100K, seed=8)
    firsts = {tuple(CL100K.encode(p.build(250 + i % 7, i, content=kind))[:16]) for i in range(400)}
    assert len(firsts) == 400


def test_standard_workloads_name_their_content() -> None:
    kinds = {name: spec.content for name, spec in STANDARD.items()}
    assert kinds == {
        "synthetic-uniform": "words",
        "synthetic-skewed": "words",
        "conversation": "prose",
        "code-completion": "code",
        "long-context": "document-question",
        "fairness-mix": "words",
    }
    reqs = generate(STANDARD["code-completion"], 10, 0)
    assert reqs.content == "code" and reqs.head(3).content == "code"
    _, declaration = build_requests(5, 0, workload="long-context")
    assert declaration["content"] == describe("document-question")
    assert declaration["content"].startswith("document + ~100-token question")
    _, declaration = build_requests(5, 0, input_tokens=10, output_tokens=5)
    assert declaration["content"].startswith("random words")
    assert describe("code").startswith("Python standard library source")
    assert all(m in describe("code") for m in code_corpus().modules)


def test_a_trace_declares_word_prompts(tmp_path: Path) -> None:
    trace = tmp_path / "b.csv"
    trace.write_text(
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n0,M,30,5,35,x\n1,M,40,5,45,x\n"
    )
    reqs, declaration = build_requests(2, 0, trace=trace)
    assert reqs.content == "words" and declaration["content"].startswith("random words")


def test_an_unknown_content_kind_is_a_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(
        "name: w\ncontent: poetry\nclasses:\n  - {input: {kind: fixed, value: 9}, output: {kind: fixed, value: 1}}\n"
    )
    with pytest.raises(UserError) as e:
        load_spec_file(path)
    assert "content" in str(e.value) and "'prose'" in str(e.value) and "\n" not in str(e.value)


def test_the_long_context_test_sends_documents_and_questions() -> None:
    spec = LongContextSuite().workload(4096, LongContextParams())
    assert spec.content == "document-question"
    assert spec.classes[0].input.describe() == "fixed 4096" and spec.classes[0].output.describe() == "fixed 256"


def test_run_json_declares_the_content(tmp_path: Path) -> None:
    out = tmp_path / "run"
    p = infermeter(
        "run", "--workload", "conversation", "--requests", "3", "--concurrency", "3", "--warmup", "off",
        "--out", out, "--no-progress",
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    workload = read_run_info(out).workload
    assert workload.content == describe("prose") and workload.content.startswith("natural English prose")
    assert workload.spec is not None and workload.spec["content"] == "prose"
