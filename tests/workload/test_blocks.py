"""Mooncake block prompts: equal leading hash_ids give an identical prefix of exactly k blocks (text and tokens),
different first hash_ids differ from the first token, and every prompt is exactly its length."""

import pytest

from infermeter.tokenizers import resolve_tokenizer
from infermeter.workload.blocks import BlockPrompter, one_token_words

TOKENIZERS = ["cl100k_base", "o200k_base"]


@pytest.fixture(scope="module", params=TOKENIZERS)
def tok(request):
    return resolve_tokenizer(request.param)


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def test_the_word_table_is_one_token_words_with_their_space(tok):
    table = one_token_words(tok)
    assert len(table) > 10_000  # M: 24,648 under cl100k_base, 47,424 under o200k_base
    assert len(set(table)) == len(table)
    for word in table[:: len(table) // 500]:
        assert word.startswith(" ") and word[1:].isalpha()
        assert len(tok.encode(word)) == 1
    assert one_token_words(tok) is table  # read once per tokenizer


def test_blocks_share_an_exact_prefix_and_differ_from_the_first_token(tok):
    bp = BlockPrompter(tok, block_tokens=16, seed=7)
    a = bp.build((1, 2, 3, 40), 60, request_id=0)
    b = bp.build((1, 2, 9, 41), 64, request_id=1)
    c = bp.build((5, 2, 3), 48, request_id=2)
    ta, tb, tc = tok.encode(a), tok.encode(b), tok.encode(c)
    assert (len(ta), len(tb), len(tc)) == (60, 64, 48)
    assert common_prefix(ta, tb) == 32  # two blocks of 16 shared, then blocks 3 and 9 open differently
    assert ta[:32] == tb[:32]
    two_blocks = tok.decode(ta[:32])
    assert a.startswith(two_blocks) and b.startswith(two_blocks)  # the same text, byte for byte
    assert ta[0] != tc[0] and a.split()[0] != c.split()[0]  # a different first hash_id: different from token one
    assert tc[16:32] == ta[16:32] and tc[32:48] == ta[32:48]  # the same blocks later on are the same tokens


def test_a_block_is_keyed_by_seed_and_hash_id_only(tok):
    one = BlockPrompter(tok, block_tokens=32, seed=3)
    other_run = BlockPrompter(tok, block_tokens=32, seed=3)
    assert one.build((11, 12), 64, request_id=5) == other_run.build((11, 12), 64, request_id=999)
    assert one.build((11,), 32, 0) != BlockPrompter(tok, block_tokens=32, seed=4).build((11,), 32, 0)


def test_first_tokens_differ_for_every_hash_id_below_the_modulus(tok):
    bp = BlockPrompter(tok, block_tokens=4, seed=1)
    firsts = [tok.encode(bp.build((h,), 4, 0))[0] for h in range(3000)]
    assert len(set(firsts)) == 3000
    m = bp.first_tokens
    assert m == len(one_token_words(tok))
    assert bp.block(5)[0] == bp.block(5 + m)[0]  # the documented modulus: beyond it two ids may open alike


@pytest.mark.parametrize("length", [1, 7, 100, 511, 512, 513, 1300, 2049])
def test_the_prompt_is_exactly_its_length_cut_from_the_blocks_then_its_own_words(tok, length):
    bp = BlockPrompter(tok, block_tokens=512, seed=0)
    hash_ids = (100, 101, 102)
    text = bp.build(hash_ids, length, request_id=length)
    ids = tok.encode(text)
    assert len(ids) == length
    blocks = tok.encode("".join(bp.block(h)[i] for h in hash_ids for i in range(512)))
    assert ids[: min(length, 1536)] == blocks[: min(length, 1536)]
    if length > 1536:  # beyond the blocks: the request's own words, different for another request
        other = tok.encode(bp.build(hash_ids, length, request_id=length + 1))
        assert other[:1536] == ids[:1536] and other[1536] != ids[1536]


def test_concatenated_blocks_add_up_under_random_draws(tok):
    bp = BlockPrompter(tok, block_tokens=64, seed=12)
    for key in range(40):
        hash_ids = tuple(range(key * 10, key * 10 + key % 5 + 1))
        assert len(tok.encode(bp.build(hash_ids, 64 * len(hash_ids) + key, key))) == 64 * len(hash_ids) + key
