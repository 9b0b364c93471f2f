"""Which tokenizer a run counts with, what its records hold, and that prefill curves and deadlines agree on it."""

import asyncio

import numpy as np
import orjson
import pytest

from infermeter.client.openai_sse import ClientConfig
from infermeter.emulator import EmulatorConfig, running_emulator
from infermeter.load.counting import choose_counting, curve_mismatch
from infermeter.metrics import RecordColumns, summarize
from infermeter.metrics.prefill_curve import PrefillCurve
from infermeter.records import read_records, read_run_info
from infermeter.report.console import minimum_report
from infermeter.suites.prefill import profile_prefill
from infermeter.workload.prompts import ExactPrompter
from tests.load.runs import configured, measured
from tests.prompts import cl100k

# a server whose tokenizer counts whitespace-separated words, with a chat template of its own
WORD_TEMPLATE = "{% for m in messages %}<s> {{ m['role'] }} : {{ m['content'] }}{% endfor %}"


@pytest.fixture(scope="module")
def word_tokenizer(tmp_path_factory):
    from tokenizers import Tokenizer, models, pre_tokenizers

    t = Tokenizer(models.WordLevel({"[UNK]": 0, "<s>": 1}, unk_token="[UNK]"))
    t.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    path = tmp_path_factory.mktemp("words") / "tokenizer.json"
    t.save(str(path))
    path.with_name("tokenizer_config.json").write_text(orjson.dumps({"chat_template": WORD_TEMPLATE}).decode())
    return path


@pytest.fixture(scope="module")
def word_server(word_tokenizer):
    with running_emulator(EmulatorConfig(tokenizer=str(word_tokenizer), speed=10)) as url:
        yield url


def test_the_choice_of_tokenizer_and_option(word_tokenizer):
    none = choose_counting(None)
    assert (none.tokenizer.name, none.method) == ("cl100k_base", "B") and "declares none" in none.reason
    assert choose_counting(None, "cl100k_base").method == "A"  # the server says it counts with it: native
    assert choose_counting(None, "o200k_base").tokenizer.name == "o200k_base"
    assert choose_counting("cl100k_base", "o200k_base").method == "B"  # named as reference, not the server's
    assert choose_counting(str(word_tokenizer)).method == "A"  # a model's own vocabulary
    unusable = choose_counting(None, "/on/the/server/tokenizer.json")
    assert (unusable.tokenizer.name, unusable.method) == ("cl100k_base", "B") and "cannot be loaded" in unusable.reason
    curve = PrefillCurve(0, 0, 0, 1, counting_method="B", tokenizer="cl100k_base")
    assert curve_mismatch(curve, none) is None
    assert "option B counts under cl100k_base" in curve_mismatch(curve, choose_counting(None, "cl100k_base"))
    assert "does not say" in curve_mismatch(PrefillCurve(0, 0, 0, 1), none)


def test_option_b_run_keeps_both_counts_and_its_metrics_use_the_reference(word_server, word_tokenizer, tmp_path):
    """Chat prompts of exactly 60 cl100k_base tokens under ChatML; the server counts '<s> user :' and the content's
    words instead.  Records keep both counts; the summary uses the reference ones, as run.json declares."""
    curve = tmp_path / "curve.json"
    PrefillCurve(0.5, 0.0, 0.0, 1.0, counting_method="B", tokenizer="cl100k_base").save(curve)
    out = tmp_path / "run"
    cfg = configured(
        word_server,
        target={"api": "chat", "model": "infermeter-emulator"},
        workload={"input_tokens": 60, "output_tokens": 5, "tokenizer": "cl100k_base"},
        load={"requests": 6, "concurrency": 2, "warmup": 0},
        objectives={"deadlines": f"ttft=@{curve},tbt=1s"},
    )
    result = asyncio.run(measured(cfg, out, word_server))
    info = read_run_info(out)
    block = info.tokenizer
    assert (block.name, block.counting_method, block.server_declares) == (
        "cl100k_base",
        "B",
        str(word_tokenizer),
    )
    assert "ref_input_tokens" in (block.metrics_count or "") and "ChatML" in (block.chat_template or "")
    assert not [n for n in info.notes if "prefill curve" in n]  # fitted on the counts these deadlines use
    check = info.prompt_verification
    assert check is not None and check.mismatches > 0 and "option B" in (check.meaning or "")
    rows = sorted(read_records(out).to_pylist(), key=lambda r: r["request_id"])
    prompter = ExactPrompter(cl100k(), chat=True, seed=42)
    words = [3 + len(prompter.build(60, r["request_id"]).split()) for r in rows]
    assert [r["input_tokens"] for r in rows] == words and min(words) < 50  # the server's own count
    assert [r["ref_input_tokens"] for r in rows] == [60] * 6
    assert [(r["output_tokens"], r["ref_output_tokens"]) for r in rows] == [(5, 5)] * 6
    assert result.summary.input_tokens.mean == 60 and result.summary.input_tokens.n == 6
    a = summarize(RecordColumns.from_table(read_records(out), "A"))
    assert a.input_tokens.mean == pytest.approx(np.mean(words))
    assert "Tokens counted with option B, reference tokenizer: cl100k_base" in minimum_report(result.summary, info)


def test_profile_prefill_fits_on_the_count_its_deadlines_use(word_server, word_tokenizer):
    """Against a server declaring its own tokenizer the curve is fitted on the server's counts (option A); named as
    a reference, cl100k_base gives a curve on reference counts (option B).  Each says so."""

    async def profile(tokenizer):
        cfg = ClientConfig(word_server, model="infermeter-emulator")
        return await profile_prefill(cfg, [64, 128, 256], repeats=1, decode_tokens=2, tokenizer=tokenizer)

    native, reference = asyncio.run(profile(None)), asyncio.run(profile("cl100k_base"))
    assert (native.counting_method, native.tokenizer) == ("A", word_tokenizer.parent.name)
    assert native.lengths == [64, 128, 256]  # built under the server's tokenizer: its usage agrees exactly
    assert (reference.counting_method, reference.tokenizer, reference.lengths) == ("B", "cl100k_base", [64, 128, 256])
