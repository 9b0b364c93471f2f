"""What prompt text is made of (the IETF draft, Appendix A): random words, English prose, Python source code, or a
document followed by a question.  Servers with speculative decoding or n-gram lookup behave differently on each,
so run.json declares which one a run sent (workload.content).

Each kind is a deterministic stream of units (a word or a piece of code with the whitespace before it), keyed by
seed and request; ExactPrompter cuts it where the prompt reaches its exact token count.  Each request of a run
starts with text of its own, so a server's prefix cache hits only the prefixes the workload shares on purpose.
"""

from __future__ import annotations

import math
import platform
import re
import sysconfig
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from string import Formatter
from typing import Literal, get_args

import numpy as np

from infermeter.errors import UserError

ContentKind = Literal["words", "prose", "code", "document-question"]
KINDS: tuple[str, ...] = get_args(ContentKind)
REQUEST_STREAM, PREFIX_STREAM = 0, 1  # streams keyed by request id, and by shared-prefix id
UNIT = re.compile(r"\s*(?:\w+|[^\w\s]+)")  # a word, or a run of punctuation, with the whitespace before it

# Common English words: one token each, with their leading space, in the usual BPE vocabularies.
# fmt: off
WORDS = np.array(
    [
        "the", "of", "and", "to", "in", "is", "was", "for", "that", "on", "as", "with", "by", "he", "at", "from",
        "his", "it", "an", "were", "are", "which", "this", "be", "or", "had", "not", "but", "first", "one", "their",
        "its", "new", "after", "who", "they", "have", "her", "she", "two", "been", "other", "when", "there", "all",
        "during", "into", "school", "time", "may", "years", "more", "most", "only", "over", "city", "some", "world",
        "would", "where", "later", "up", "such", "used", "many", "can", "state", "about", "national", "out", "known",
        "university", "united", "then", "made", "south", "north", "under", "between", "east", "west", "high", "river",
        "life", "part", "year",
    ],
    dtype=object,
)
# fmt: on
FILLERS = (" the", " of", " and", " a", " to", " in", " is", ".", ",", " it", " on", " as")
CODE_FILLERS = (" x", " y", " i", " n", " =", " 0", " 1", " +", " #", " if", " in", " the")


@dataclass(frozen=True)
class Stream:
    """A prompt's material: units to cut from (joined with ""), text that always ends the prompt (the question),
    the separator after a shared prefix, and single-token fillers that top the count up to exact."""

    units: list[str]
    tail: str = ""
    sep: str = " "
    fillers: tuple[str, ...] = FILLERS


def stream(kind: ContentKind, seed: int, which: int, key: int, tokens: int, room: int | None = None) -> Stream:
    """The material of a `tokens`-token prompt (which=REQUEST_STREAM) or shared prefix (PREFIX_STREAM), `room` of
    those tokens left for it once the template and any shared prefix are counted.

    Words are one token each (tokens + 8 of them); other units are at least one token alone and seldom merge, so
    a quarter more units than the room (code), or as many words (prose), leaves some to spare."""
    if kind == "words":
        rng = np.random.default_rng([seed, 3, which, key])
        words = WORDS[rng.integers(0, len(WORDS), size=tokens + 8)]
        return Stream([words[0], *(" " + w for w in words[1:])])
    room = tokens if room is None else room
    enough = room + room // 4 + 16
    if kind == "code":
        source_words = room + 32  # a word of source is one unit or more
        excerpt = repository_context if which == PREFIX_STREAM else code_excerpt
        while len(units := UNIT.findall(excerpt(seed, key, source_words))) < enough:
            source_words *= 2
        return Stream(units, sep="\n\n", fillers=CODE_FILLERS)
    doc = prose(seed, which, key, tokens, room + 16)  # English runs to over a token a word
    if kind == "prose" or which == PREFIX_STREAM:
        return Stream(UNIT.findall(doc.text))
    return Stream(UNIT.findall(doc.text), tail="\n\n" + question(doc))


def describe(kind: ContentKind) -> str:
    """What run.json's workload.content says the prompts are made of."""
    if kind == "words":
        return f"random words (a list of {len(WORDS)} common English words, one token each)"
    if kind == "prose":
        return "natural English prose (sentences from infermeter's embedded grammar, each request its own)"
    if kind == "document-question":
        return (
            "document + ~100-token question (IETF draft A.5.1): paragraphs of English prose from infermeter's "
            "embedded grammar, then a question about them"
        )
    corpus = code_corpus()
    return (
        f"Python standard library source (excerpts of {len(corpus.modules)} modules of Python "
        f"{platform.python_version()}, read offline: {', '.join(corpus.modules)}); shared prefixes are repository "
        "contexts concatenated from the openings of several modules"
    )


# --- prose -------------------------------------------------------------------------------------------------------

# fmt: off
BANKS: dict[str, tuple[str, ...]] = {
    "name": (
        "Ada", "Bruno", "Clara", "Daniel", "Elena", "Felix", "Greta", "Hugo", "Iris", "Jonah", "Klara", "Leon", "Mira",
        "Nadia", "Oscar", "Priya", "Quentin", "Rosa", "Samuel", "Tessa", "Umar", "Vera", "Walter", "Xenia", "Yusuf",
        "Zoe", "Anton", "Beatrice", "Carlos", "Dora", "Emil", "Fiona", "Gideon", "Hanna", "Ivan", "Julia", "Kofi",
        "Lena", "Marco", "Nora",
    ),
    "verb": (
        "repaired", "visited", "described", "painted", "measured", "cleaned", "studied", "photographed", "restored",
        "inspected", "planned", "designed", "mapped", "guarded", "replaced", "finished", "moved", "closed", "improved",
        "protected", "recorded", "discovered", "explored", "expanded", "decorated", "sketched", "admired", "ignored",
        "noticed", "managed", "renamed", "celebrated", "examined", "watched", "rebuilt", "widened",
    ),
    "adj": (
        "small", "quiet", "busy", "narrow", "modern", "wooden", "crowded", "famous", "forgotten", "broken", "bright",
        "dark", "green", "heavy", "hidden", "large", "long", "muddy", "new", "painted", "peaceful", "plain", "private",
        "public", "red", "rough", "simple", "steep", "stone", "strange", "tall", "tidy", "warm", "wide", "windy",
        "yellow", "broad", "cold", "gentle", "lovely",
    ),
    "noun": (
        "bridge", "library", "orchard", "festival", "factory", "school", "road", "garden", "market", "tower", "chapel",
        "mill", "bakery", "canal", "clock", "fountain", "museum", "park", "railway", "square", "theatre", "well",
        "barn", "boat", "cottage", "fence", "gate", "hall", "lighthouse", "path", "pier", "playground", "pond", "shop",
        "stable", "station", "statue", "street", "tunnel", "wall", "warehouse", "windmill", "workshop", "archive",
        "inn", "observatory", "greenhouse", "harbour",
    ),
    "place": (
        "the harbour", "the northern hills", "the market square", "the railway station", "the river bend",
        "the town hall", "the eastern gate", "the fishing village", "the cathedral", "the edge of the forest",
        "the lower fields", "the lake shore", "the stone quarry", "the crossroads", "the main bridge",
        "the high street", "the western farms", "the city walls", "the valley floor", "the coast road",
        "the churchyard", "the south pier", "the mountain pass", "the grain store", "the village green",
        "the school gates", "the bus depot", "the water tower", "the old mill", "the ferry landing",
    ),
    "time": (
        "in the spring", "last winter", "after the storm", "before the war", "during the harvest",
        "in the early morning", "late in the evening", "in the summer of 1887", "soon after the flood",
        "a few years ago", "at the end of the century", "in the autumn", "one cold morning", "after the festival",
        "before the new road was built", "in the same year", "during the long drought", "on market day",
        "at the start of the decade", "in the middle of the night", "shortly before noon", "after the first snow",
        "in 1902", "twenty years later",
    ),
    "group": (
        "the farmers", "the teachers", "the engineers", "the children", "the fishermen", "the students",
        "the builders", "the merchants", "the volunteers", "the neighbours", "the villagers", "the painters",
        "the nurses", "the miners", "the musicians", "the carpenters", "the gardeners", "the council members",
        "the old residents", "the railway workers", "the shop owners", "the local historians", "the night guards",
        "the young couples",
    ),
    "reason": (
        "because the roads were closed", "so that the water would stay clean", "to make room for the market",
        "after many long debates", "because nobody else would do it", "to attract more visitors",
        "because the old one had collapsed", "with money raised by the school", "to protect it from the storms",
        "as the mayor had promised", "without asking anyone for permission", "because the river kept rising",
        "to honour the founders of the town", "so that the children could play safely",
        "after a letter from the governor", "because the harvest had been good", "to settle an old argument",
        "with help from the neighbouring towns", "before the tourists arrived", "in spite of the cold weather",
    ),
    "adverb": (
        "slowly", "carefully", "quickly", "eventually", "quietly", "proudly", "patiently", "gradually", "reluctantly",
        "happily", "secretly", "thoroughly", "gently", "suddenly", "finally", "twice", "openly", "briefly",
        "repeatedly", "cheerfully",
    ),
    "event": (
        "the end of the summer", "the following spring", "the time the railway opened", "the next election",
        "the winter of 1911", "the day of the festival", "the time the bridge was finished", "the end of the decade",
        "the following year", "the time the mayor retired", "the middle of the century", "the first frost",
    ),
    "number": (
        "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "twelve", "fifteen", "twenty",
    ),
    "town": (
        "Arden", "Bramwell", "Calder", "Dunmore", "Elsworth", "Fenwick", "Glenrock", "Harwood", "Ivybridge",
        "Larkhill", "Millbrook", "Northwick", "Oakhurst", "Pembury", "Queensford", "Redcliff", "Stonehaven",
        "Thornbury", "Upton", "Westmere", "Yarrow", "Ashcombe", "Birchfield", "Kestrel",
    ),
}
# fmt: on
# A request's first sentence: every slot within its first ~16 tokens, so requests with distinct first sentences
# have distinct first cache blocks.
FIRST = "{name} {verb} the {adj} {noun} near {place} {time}."
FIRST_SLOTS = ("name", "verb", "adj", "noun", "place", "time")
TEMPLATES = (
    FIRST,
    "{group} {verb} a new {noun} in {town} {time}, {reason}.",
    "The {noun} in {town} was {adj} and {adj2}, and {group} {verb} it {adverb}.",
    "{time}, {name} and {name2} {verb} the {noun} by {place}.",
    "According to {name}, the {adj} {noun} had been {verb} {adverb} {time}.",
    "Many of {group} {verb} the {noun} {reason}.",
    "Nobody in {town} expected the {noun} to be so {adj}.",
    "It took {number} years before {group} {verb} the {adj} {noun} again.",
    "When {name} arrived at {place}, {group} had already {verb} the {noun2}.",
    "The {adj} {noun} near {place} is still {verb} by {group} every year.",
    "Some say that {name} {verb} the {noun} {adverb}, but {name2} remembers it differently.",
    "By {event}, the {noun} in {town} had become {adj} again.",
    "{group} often talk about the {adj} {noun} and the {noun2} beside it.",
    "Few people outside {town} knew that {name} had {verb} the {noun}.",
    "The council of {town} {verb} the {noun} {reason}.",
    "On the road to {place}, {name} {verb} a {adj} {noun} and a {adj2} {noun2}.",
)
SLOTS: tuple[str, ...] = ("name", "name2", "verb", "adj", "adj2", "noun", "noun2", "place", "time", "group")
SLOTS += ("reason", "adverb", "event", "number")
BANK_OF = {slot: BANKS[slot.rstrip("2")] for slot in SLOTS}
SIZES = np.array([len(BANK_OF[slot]) for slot in SLOTS])
# per template: the slots it fills, each with its column among SLOTS
USED = tuple(
    tuple((name, SLOTS.index(name)) for _, name, _, _ in Formatter().parse(t) if name and name != "town")
    for t in TEMPLATES
)


@dataclass(frozen=True)
class Prose:
    """Paragraphs of sentences about one town, and what the first sentence says (the question asks about it)."""

    text: str
    town: str
    name: str
    adj: str


@lru_cache(maxsize=64)
def _first_sentence_map(seed: int, which: int) -> tuple[int, int, int, int]:
    """(a, b, c, n): the first sentence of stream (key, tokens) is number (a*key + c*tokens + b) mod n of the n
    possible ones; a is prime to n, so no two of n consecutive keys of one length start alike."""
    n = math.prod(len(BANK_OF[s]) for s in FIRST_SLOTS)
    a, b, c = (int(x) for x in np.random.default_rng([seed, 5, which]).integers(1, n, size=3))
    while math.gcd(a, n) != 1:
        a += 1
    return a, b, c, n


def _first_sentence(seed: int, which: int, key: int, tokens: int) -> dict[str, str]:
    a, b, c, n = _first_sentence_map(seed, which)
    index = (a * key + c * tokens + b) % n
    words = {}
    for slot in FIRST_SLOTS:
        index, digit = divmod(index, len(BANK_OF[slot]))
        words[slot] = BANK_OF[slot][digit]
    return words


def prose(seed: int, which: int, key: int, tokens: int, words: int) -> Prose:
    """At least `words` words in paragraphs of 4 to 7 sentences about one town.  The prompt's length is part of
    the key: a longer prompt for the same request does not continue a shorter one (a prefix cache would hit it)."""
    rng = np.random.default_rng([seed, 4, which, key, tokens])
    town = BANKS["town"][int(rng.integers(len(BANKS["town"])))]
    first = _first_sentence(seed, which, key, tokens)
    sentences = [FIRST.format(**first)]
    have, breaks = len(sentences[0].split()), set()
    while have < words:
        n = (words - have) // 10 + 8
        breaks.update((np.cumsum(rng.integers(4, 8, size=n // 4 + 1)) + len(sentences)).tolist())
        picks = rng.integers(0, SIZES, size=(n, len(SLOTS))).tolist()
        for t, row in zip(rng.integers(len(TEMPLATES), size=n).tolist(), picks, strict=True):
            line = TEMPLATES[t].format_map({"town": town, **{name: BANK_OF[name][row[j]] for name, j in USED[t]}})
            sentences.append(line[0].upper() + line[1:])
            have += line.count(" ") + 1
    text = "".join(s + ("\n\n" if i + 1 in breaks else " ") for i, s in enumerate(sentences)).rstrip()
    return Prose(text, town, first["name"], first["adj"])


def question(doc: Prose) -> str:
    """A question of about 100 tokens about the document (A.5.1): the same words every time, but for the town,
    person and adjective the document is about."""
    return (
        f"Question: Using only the document above, explain what happened in {doc.town}. Who are the people the "
        "document names, what did each of them do, and in what order did these events take place? Quote the "
        f"sentence in which {doc.name} is first mentioned, list everything the document describes as {doc.adj}, and "
        "point out any statement that seems to contradict another one. If the document does not say something, "
        "answer that it does not say rather than guessing. Keep the answer short and give the events in the order "
        "in which the document tells them."
    )


# --- code --------------------------------------------------------------------------------------------------------

# Pure-Python modules of the standard library that every CPython from 3.11 on ships as a single file.
# fmt: off
CODE_MODULES = (
    "argparse", "base64", "bisect", "calendar", "cmd", "code", "colorsys", "configparser", "contextlib", "copy", "csv",
    "dataclasses", "difflib", "enum", "filecmp", "fnmatch", "fractions", "functools", "getopt", "gettext", "glob",
    "graphlib", "gzip", "heapq", "hmac", "ipaddress", "linecache", "mimetypes", "numbers", "operator", "optparse",
    "pprint", "queue", "random", "reprlib", "sched", "secrets", "selectors", "shlex", "shutil", "statistics",
    "tabnanny", "tempfile", "textwrap", "threading", "timeit", "tokenize", "trace", "traceback", "types", "uuid",
    "weakref", "zipapp",
)
# fmt: on
HEAD_LINES = 64  # no request's excerpt starts in a module's opening lines: repository contexts start there


@dataclass(frozen=True)
class CodeCorpus:
    """The modules' lines one after another, each module under a '# name.py' line, and where excerpts may start."""

    modules: tuple[str, ...]
    lines: tuple[str, ...]
    module_of: np.ndarray  # int, the module of each line
    first_line: tuple[int, ...]  # each module's '# name.py' line, and len(lines) after the last
    words: np.ndarray  # int64, whitespace-separated words before each line (len(lines) + 1 entries)
    starts: np.ndarray  # int64, lines an excerpt may start at: text found once in the corpus, 16+ characters


@lru_cache(maxsize=1)
def code_corpus() -> CodeCorpus:
    """The standard library's modules, read once per process (offline: they ship with the interpreter); a module
    this Python lacks is left out, and run.json's content names those used."""
    root = Path(sysconfig.get_paths()["stdlib"])
    modules: list[str] = []
    lines: list[str] = []
    module_of: list[int] = []
    first: list[int] = []
    candidates: list[int] = []
    for name in CODE_MODULES:
        path = root / f"{name}.py"
        if not path.is_file():
            continue
        source = [line.rstrip() for line in path.read_text(encoding="utf-8").splitlines()]
        first.append(len(lines))
        candidates += range(len(lines) + 1 + HEAD_LINES, len(lines) + 1 + len(source))
        lines += [f"# {name}.py", *source, ""]
        module_of += [len(modules)] * (len(source) + 2)
        modules.append(name)
    if not modules:
        raise UserError(
            f"code prompts are read from the Python standard library's source, and {root} has none of its modules: "
            "install the interpreter's .py files, or use a workload of other content"
        )
    seen: dict[str, int] = {}
    for line in lines:
        seen[line.strip()] = seen.get(line.strip(), 0) + 1
    starts = [i for i in candidates if len(lines[i].strip()) >= 16 and seen[lines[i].strip()] == 1]
    words = np.concatenate([[0], np.cumsum([len(line.split()) for line in lines])])
    return CodeCorpus(
        tuple(modules), tuple(lines), np.asarray(module_of), (*first, len(lines)), words, np.asarray(starts)
    )


def _lines(corpus: CodeCorpus, start: int, words: int, stop: int) -> list[str]:
    """Consecutive lines from `start` holding at least `words` words, or up to line `stop`."""
    end = min(int(np.searchsorted(corpus.words, corpus.words[start] + words)), stop)
    return list(corpus.lines[start:end])


def code_excerpt(seed: int, key: int, words: int) -> str:
    """A request's own excerpt: its module's name, then consecutive source lines (running on into the next modules)
    from a line no other request of the run starts at, while the corpus has lines left."""
    corpus = code_corpus()
    n = len(corpus.starts)
    a, b = (int(x) for x in np.random.default_rng([seed, 6]).integers(1, n, size=2))
    while math.gcd(a, n) != 1:
        a += 1
    start = int(corpus.starts[(a * key + b) % n])
    out = [f"# {corpus.modules[corpus.module_of[start]]}.py"]
    while words > 0:  # past the last module, on from the first
        taken = _lines(corpus, start, words, len(corpus.lines))
        out += taken
        words -= int(corpus.words[start + len(taken)] - corpus.words[start])
        start = 0
    return "\n".join(out)


def repository_context(seed: int, key: int, words: int) -> str:
    """A shared prefix (A.4.2's repository context): the openings of several modules, an eighth of the words each.
    Context k opens with the k-th module of a seeded order, so no two contexts start alike while modules last."""
    corpus = code_corpus()
    m = len(corpus.modules)
    first = int(np.random.default_rng([seed, 7]).permutation(m)[key % m])
    order = [first, *(int(i) for i in np.random.default_rng([seed, 7, key]).permutation(m) if i != first)]
    section = max(words // 8, 16)
    parts: list[str] = []
    have = 0
    while have < words:
        module = order[len(parts) % m]
        lo, hi = corpus.first_line[module], corpus.first_line[module + 1]
        taken = _lines(corpus, lo, section, hi)
        parts.append("\n".join(taken).rstrip())
        have += int(corpus.words[lo + len(taken)] - corpus.words[lo])
    return "\n\n".join(parts)
