"""Bad input to any `infermeter` subcommand: exit code 2, one line on stderr naming the option, no traceback, and
nothing written over an existing run directory (README, "Exit codes").

Commands and options are found by introspecting the typer app, so an option added later is fuzzed too: `KINDS` says
how each option's values are checked, and `test_every_option_is_classified` fails for an option it does not know.
Every case runs `main()` in-process (a subprocess costs a second of imports) in a fresh working directory.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import shutil
import signal
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import typer.main
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from infermeter import cli
from infermeter.errors import ExitCode
from infermeter.records import RECORDS, RUN_JSON, RequestRecord, RunInfo, write_records
from infermeter.suites.registry import SUITES
from infermeter.workload.standard import STANDARD

RUN = "{run}"  # stands for the existing run directory in values and baseline arguments
UNSET_ENV = "INFERMETER_TEST_UNSET_VARIABLE"

# ----- invalid values


@dataclass(frozen=True)
class Bad:
    """One invalid value, and the files it needs in the working directory (bytes: a file, None: a directory)."""

    value: str
    files: tuple[tuple[str, bytes | None], ...] = ()

    def make(self, cwd: Path) -> None:
        for name, content in self.files:
            path = cwd / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if content is None:
                path.mkdir(exist_ok=True)
            else:
                path.write_bytes(content)


@dataclass(frozen=True)
class Kind:
    """How an option's values are checked: invalid values always tried (`listed`), and a strategy drawing more."""

    listed: tuple[Bad, ...]
    drawn: st.SearchStrategy[Bad] | None = None


def bad(*values: str) -> tuple[Bad, ...]:
    return tuple(Bad(v) for v in values)


def file(name: str, content: bytes | str | None, value: str | None = None) -> Bad:
    """A value naming a file made for it (a directory for content None); `value` when it is not the name."""
    data = content.encode() if isinstance(content, str) else content
    return Bad(name if value is None else value, ((name, data),))


def files(name: str, *contents: bytes | str) -> tuple[Bad, ...]:
    return tuple(file(name, c) for c in contents)


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


TEXT = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=10)  # argv-able
WORD = st.text("abcdefghijklmnopqrstuvwxyz_-.", min_size=1, max_size=10).map(lambda s: "zz" + s)  # names no file
NOT_A_NUMBER = TEXT.filter(lambda s: not _is_float(s))
CELL = NOT_A_NUMBER.filter(lambda s: s.strip() and not any(c in s for c in ',"\r\n'))  # one CSV cell
NEGATIVE = st.floats(max_value=-1e-9).map(repr)  # -inf included
HUGE = st.floats(min_value=1e7, exclude_min=True).map(repr)  # above every numeric option's upper bound, inf included
FRACTION = st.floats(0.001, 1e6).filter(lambda x: not x.is_integer()).map(repr)
NON_FINITE = ("nan", "NaN", "-nan", "inf", "-inf", "Infinity", "1e400")
WRONG_TYPE = ("abc", "", " ", "1,5", "5ms", "0x10", "[1]", "true")


def number(zero_ok: bool = False) -> Kind:
    """A float option: lower bound 0 (excluded unless zero_ok), upper bound below 1e7."""
    zero = () if zero_ok else ("0", "0.0", "-0", "1e-400")
    return Kind(
        bad(*NON_FINITE, *WRONG_TYPE, *zero, "-1", "-0.001", "1e300"),
        st.one_of(NEGATIVE, HUGE, NOT_A_NUMBER, *([] if zero_ok else [st.just("0")])).map(Bad),
    )


def integer(zero_ok: bool = False) -> Kind:
    """A whole-number option: lower bound 1 (0 with zero_ok), upper bound below 1e13."""
    zero = () if zero_ok else ("0", "-0", "0.0")
    return Kind(
        bad(*NON_FINITE, *WRONG_TYPE, *zero, "-1", "1.5", "9" * 30, "18446744073709551617"),
        st.one_of(
            st.integers(max_value=-1).map(str), st.integers(min_value=10**13).map(str), FRACTION, NOT_A_NUMBER
        ).map(Bad),
    )


INT_LIST = Kind(
    (
        *bad("", ",", " , ", "1;2", "a,b", "nan", "inf", "1e400", "1,1e30"),
        *bad("0", "-1", "1,-2", "1,0", "1.5", "1,2.5"),
    ),
    st.tuples(st.lists(st.integers(1, 1000).map(str), max_size=3), st.one_of(NEGATIVE, HUGE, FRACTION, CELL)).map(
        lambda t: Bad(",".join([*t[0], t[1]]))
    ),
)
CHOICE = Kind(bad("", " ", "nan", "-1", "0", "bogus", "NONE", "Poisson", "CONTINUOUS", "Chat", "a"), WORD.map(Bad))
WARMUP = Kind(bad("", "-1", "0", "1.5", "nan", "inf", "1e400", "9" * 30, "on", "yes"), WORD.map(Bad))
URL = Kind(
    (
        *bad("", "nan", "localhost", "127.0.0.1:8000", "//127.0.0.1", "ftp://127.0.0.1", "file:///etc/passwd"),
        *bad("http://", "http://:80", "http://a b", "http://[::1"),
        *bad("http://127.0.0.1:0", "http://127.0.0.1:99999", "http://127.0.0.1:-1", "http://127.0.0.1:abc"),
    ),
    st.one_of(WORD, st.integers(65536, 10**9).map(lambda p: f"http://127.0.0.1:{p}")).map(Bad),
)
ENV_NAME = Kind(
    bad("", "1ABC", "A-B", "A B", "$HOME", "A=B", UNSET_ENV),
    st.from_regex(r"[0-9][A-Z0-9_]{0,8}", fullmatch=True).map(Bad),
)
JSON_OBJECT = Kind(
    (
        *bad("", "{", "{'a': 1}", "NaN", '{"a": NaN}', '{"a": Infinity}'),  # not JSON
        *bad("[1]", "1", "null", '"s"'),  # not an object
        *bad('{"stream": false}', '{"model": "x"}', '{"max_tokens": 5}', '{"prompt": "x"}', '{"messages": []}'),
    ),
    st.one_of(st.lists(st.integers(), max_size=3).map(json.dumps), TEXT.map(json.dumps), NOT_A_NUMBER).map(Bad),
)
HOST = Kind(
    bad("", " ", "a b", "http://127.0.0.1", "127.0.0.1:8000", "999.1.1.1", "1.2.3.4.5", "-bad", "bad_host!", "::1::"),
    TEXT.filter(lambda s: any(not (c.isascii() and (c.isalnum() or c in ".-:")) for c in s)).map(Bad),
)
FREE_TEXT = Kind(())  # any text is valid (a model name): nothing to refuse
DESCRIPTION = Kind(bad("", " ", "\t", "two\nlines"))  # a disclosure: any one line that says something
SOFTWARE = Kind(bad("", " ", "vllm", "=0.11.0", "vllm=", "vllm 0.11.0", "v llm=1", "vllm=0.11=0", "a=two\nlines"))

GOODPUT_SLO = Kind(
    (
        *bad("", ",", "ttft", "ttft=", "ttft=abc", "ttft=5h", "ttft=5ms;tpot=5ms", "bogus=5ms"),
        *bad("ttft=-5ms", "ttft=0ms", "ttft=0", "ttft=nanms", "ttft=infms", f"ttft={'9' * 400}ms"),
    ),
    st.tuples(st.sampled_from(["ttft", "tpot", "itl", "e2e"]), st.one_of(NEGATIVE, NOT_A_NUMBER, st.just("0"))).map(
        lambda t: Bad(f"{t[0]}={t[1]}ms")
    ),
)

CURVE = '{"a": 0.01, "b": 1e-05, "c": 0.0, "r2": 1.0}'


def curve(content: str | bytes | None) -> Bad:
    """Deadlines whose TTFT deadline is a prefill curve file holding `content`."""
    return file("c.json", content, "tbt=25ms,ttft=@c.json")


DEADLINES = Kind(
    (
        *bad("", "tbt", "tbt=", "ttft=300ms", "tbt=25ms,bogus=1", "tbt=-1ms", "tbt=0ms", "tbt=nanms"),
        *bad(f"tbt={'9' * 400}ms", "tbt=25ms,slack=-5ms", "tbt=25ms,ttft=@missing.json"),
        *bad(*(f"tbt=25ms,target={t}" for t in ("nan", "inf", "0", "1.5", "-1"))),
        curve(None),
        curve("{"),
        curve("[1, 2, 3]"),
        curve(b"\xff\xfe{"),
        curve(CURVE[:-1] + ', "bogus": 1}'),
        curve(CURVE.replace("0.01", '"x"')),
        curve(CURVE.replace("0.01", "1e999")),
    ),
    st.one_of(NEGATIVE, NOT_A_NUMBER, st.just("0")).map(lambda v: Bad(f"tbt={v}ms")),
)
CAPACITY_SLO = Kind(
    (
        *bad("", "ttft", "ttft:p99", "ttft:p99<=", "bogus:p99<=5ms", "ttft:p42<=5ms", "ttft:p99>=5ms"),
        *bad("ttft:p99<=-5ms", "ttft:p99<=0ms", f"ttft:p99<={'9' * 400}ms"),
        *bad("fluidity:", "fluidity:share=0.9", "fluidity:tbt=25ms,bogus=1"),
        *bad(*(f"fluidity:tbt=25ms,share={v}" for v in ("abc", "nan", "1.5", "0"))),
        *bad("goodput:", "goodput:fraction=0.9", "goodput:ttft=-5ms", "goodput:bogus=5ms"),
        *bad(*(f"goodput:ttft=200ms,fraction={v}" for v in ("abc", "nan", "2"))),
    ),
    st.one_of(
        st.one_of(NEGATIVE, NOT_A_NUMBER, st.just("0")).map(lambda v: f"ttft:p99<={v}ms"),
        st.one_of(NEGATIVE, HUGE, NOT_A_NUMBER).map(lambda v: f"fluidity:tbt=25ms,share={v}"),
        st.one_of(NEGATIVE, HUGE, NOT_A_NUMBER).map(lambda v: f"goodput:ttft=200ms,fraction={v}"),
    ).map(Bad),
)


def missing_or_malformed(stem: str) -> tuple[Bad, ...]:
    """A config file not there, a directory, malformed YAML and JSON, not a mapping, not UTF-8."""
    return (
        Bad(f"missing-{stem}.yaml"),
        file(f"{stem}.yaml", None),
        file(f"{stem}.json", '{"a": '),
        *files(f"{stem}.yaml", "a: [1, 2\n", "- 1\n- 2\n", "just text\n", b"bins: \xff\xfe\n"),
    )


def json_field(fields: list[str]) -> st.SearchStrategy[Bad]:
    """A JSON config setting one (dotted) field to a value no field takes: negative, non-finite, beyond int64."""

    def doc(field: str, value: float | int) -> Bad:
        tree: Any = value
        for key in reversed(field.split(".")):
            tree = {key: tree}
        return file("c.json", json.dumps(tree))

    values = st.one_of(st.floats(max_value=-1e-9), st.sampled_from([float("nan"), float("inf")]), st.integers(2**63))
    return st.builds(doc, st.sampled_from(fields), values)


ENGINE_INTEGERS = ("bins", "b_max", "b_min", "static_batch", "block_size", "max_num_seqs", "token_budget")
ENGINE_FLOATS = ("d_sla_token", "d_sla_request", "kv_capacity_tokens", "m_max_gb", "m_model_gb", "kv_gb_per_token")
LATENCY_FIELDS = ("batch_model.alpha", "batch_model.beta", "iteration_model.fixed", "iteration_model.per_prefill_token")
ENGINE_CONFIG = Kind(
    (
        *missing_or_malformed("engine"),
        *files("c.yaml", "bogus: 1", "batch_model: {bogus: 1}", "bins: many", "scheduler: fifo"),
        *files("c.yaml", "kv_capacity_tokens: -5", "m_max_gb: -1.0", "batch_model: {alpha: -1.0}"),
        *files("c.yaml", "d_sla_token: 0", "kv_gb_per_token: 0", "d_sla_request: .nan", "epsilon: .inf"),
        *files("c.yaml", "iteration_model: {fixed: .nan}", "bins: 1000000000000000000000000", "m_model_gb: 100.0"),
    ),
    json_field([*ENGINE_INTEGERS, *ENGINE_FLOATS, *LATENCY_FIELDS]),
)
EMULATOR_CONFIG = Kind(
    (
        *missing_or_malformed("emulator"),
        *files("c.yaml", "bogus: 1", "engine: {bogus: 1}", "speed: fast", "faults: 5", "faults: [{bogus: 1}]"),
        *files("c.yaml", "speed: 0", "speed: -1.0", "speed: .nan", "speed: .inf", "max_model_len: 0", "seed: -1"),
        *files("c.yaml", "max_model_len: 1000000000000000000000000", "input_filter_ms: -1.0"),
        *files("c.yaml", "output_filter_ms: .inf", "engine: {bins: 0}", "engine: {m_model_gb: 100.0}"),
    ),
    json_field(["speed", "max_model_len", "input_filter_ms", "output_filter_ms", "seed"]),
)

SPEC = "name: w\nclasses:\n  - input: {kind: fixed, value: 10}\n    output: {kind: fixed, value: 5}\n"


def spec(old: str, new: str) -> str:
    return SPEC.replace(old, new, 1)


INPUT = "{kind: fixed, value: 10}"
WORKLOAD = Kind(
    (
        *bad("", "nope", "synthetic_uniform", "Synthetic-Uniform", " synthetic-uniform"),
        *missing_or_malformed("workload"),
        *files("c.yaml", SPEC + "bogus: 1", spec("value: 5}", "value: 5}\n    bogus: 1")),
        *files("c.yaml", "name: w\nclasses: []", "name: w\nclasses: 5", spec("value: 10", "value: ten")),
        *files("c.yaml", spec("value: 10", "value: -5"), spec("value: 10", "value: 1000000000000")),
        *files("c.yaml", spec("value: 10", "value: 1000000000000000000000000000000")),
        *files("c.yaml", *(spec("- input", f"- weight: {w}\n    input") for w in ("0", ".nan", ".inf"))),
        *files("c.yaml", spec(INPUT, "{kind: normal, mean: .nan, std: 1.0}"), spec(INPUT, "{kind: uniform, max: 0}")),
        *files("c.yaml", spec(INPUT, "{kind: empirical, csv: missing.csv, column: n}")),
        *files("c.yaml", spec(INPUT, "{kind: quantiles, points: {50: 100, 95: 50}}")),
        *files("c.yaml", SPEC + "prefix: {fraction: 2.0}", SPEC + "prefix: {fraction: 0.5, count: 1000000000000}"),
        *files("c.yaml", SPEC + "prefix: {fraction: 0.5, zipf_s: .inf}", SPEC + "temperature: -1.0"),
    ),
    st.one_of(WORD.filter(lambda s: s not in STANDARD).map(Bad), json_field(["temperature", "prefix.count"])),
)
TOKENIZER = Kind(
    (
        *bad("", "nope", "gpt2", "cl100k", "missing.json", "missing.gguf"),
        file("d.json", None),
        file("tokenizer.json", None),
        *files("bad.json", "{", "{}", b"\xff\xfe{"),
        *files("bad.gguf", b"", b"GGUF" + bytes(range(60))),
    ),
    WORD.map(Bad),
)

TRACE_HEADER = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
TRACE_ROWS = "".join(f"{t},ChatGPT,{100 + t},{20 + t},{120 + 2 * t},Conversation log\n" for t in range(5))


def trace(rows: str) -> Bad:
    """A BurstGPT trace with these rows."""
    return file("t.csv", TRACE_HEADER + rows)


def trace_row(timestamp: str = "5", tokens: str = "10") -> Bad:
    """The valid trace plus a row with this timestamp and prompt length."""
    return trace(TRACE_ROWS + f"{timestamp},ChatGPT,{tokens},20,30,Conversation log\n")


TRACE = Kind(
    (
        Bad("missing.csv"),
        file("t.csv", None),
        *files("t.csv", "", "a,b\n1,2\n", "Timestamp,Model\n1,2,3,4\n", TRACE_HEADER.encode() + b"\xff\xfe,\x80\n"),
        trace(""),
        trace(TRACE_ROWS[:40]),  # a row cut short
        trace("".join(TRACE_ROWS.splitlines(keepends=True)[:2])),  # fewer rows than --requests 3
        *(trace_row(tokens=v) for v in ("ten", "1e30", "1.5", "-5")),
        *(trace_row(timestamp=v) for v in ("nan", "inf", "yesterday")),
    ),
    st.one_of(
        st.one_of(NEGATIVE, st.floats(min_value=2e7).map(repr), FRACTION, CELL).map(lambda v: trace_row(tokens=v)),
        CELL.map(lambda v: trace_row(timestamp=v)),
    ),
)

GRID_HEADER = "batch_size,max_seq_len,mean_latency_sec\n"
GRID_ROWS = ("1,128,0.8", "2,128,1.0", "4,256,1.9", "8,512,4.0")


def grid(*rows: str) -> Bad:
    """A latency grid CSV with these rows."""
    return file("g.csv", GRID_HEADER + "".join(r + "\n" for r in rows))


def grid_row(column: int, value: str) -> Bad:
    """The valid grid plus a row with `value` in one column."""
    cells = ["16", "1024", "8.0"]
    cells[column] = value
    return grid(*GRID_ROWS, ",".join(cells))


GRID_CSV = Kind(
    (
        Bad("missing.csv"),
        file("g.csv", None),
        *files(
            "g.csv", "", "a,b\n1,2\n", GRID_HEADER + "1,128\n2,128,1.0,7\n", GRID_HEADER.encode() + b"\xff,\xfe,1\n"
        ),
        grid(),
        grid(*GRID_ROWS[:2]),  # too few rows to fit
        grid("1,128,1.0", "2,256,1.0", "4,512,1.0"),  # constant latency: nothing to fit
        grid_row(0, "-1"),
        grid_row(1, "0"),
        grid_row(1, "abc"),
        *(grid_row(2, v) for v in ("nan", "inf", "1e300", "-1")),
    ),
    st.builds(
        grid_row,
        st.integers(0, 2),
        st.one_of(st.floats(max_value=-1e-9).map(repr), st.sampled_from(["nan", "inf", "-inf"]), CELL),
    ),
)

RUN_INFO = orjson.dumps(RunInfo(kind="test").model_dump(mode="json"))
_parquet = io.BytesIO()
pq.write_table(pa.table({"x": [1, 2]}), _parquet)
WRONG_SCHEMA = _parquet.getvalue()


def run_dir(run_json: bytes | None = RUN_INFO, records: bytes | str | None = "absent") -> Bad:
    """A directory `r` with this run.json and records.parquet ("absent": no file; None: a directory)."""
    made: tuple[tuple[str, bytes | None], ...] = (("r", None), (f"r/{RUN_JSON}", run_json))
    return Bad("r", made if records == "absent" else (*made, (f"r/{RECORDS}", records)))  # type: ignore[arg-type]


FINISHED_SUITE = Kind(  # --from: the directory of a finished test suite
    (Bad(""), Bad("zz-missing"), Bad(RUN), file("empty", None), file("s/suite.json", None, "s"))
)
RUN_DIRS = Kind(
    (
        Bad("missing"),
        file("f", "not a directory"),
        Bad("r", (("r", None),)),
        *(run_dir(j) for j in (b"{", b"[]", b'{"kind": 5}', b'{"itl_option": "Z"}', None)),
        *(run_dir(records=r) for r in ("absent", b"", b"not parquet", None, WRONG_SCHEMA)),
    ),
    WORD.map(Bad),
)

REPORT_OUT = Kind(bad("", RUN, f"{RUN}/{RUN_JSON}", f"{RUN}/{RECORDS}", f"{RUN}/{RUN_JSON}/report.html"))
RUN_OUT = Kind(bad("", RUN, f"{RUN}/{RUN_JSON}", f"{RUN}/{RUN_JSON}/sub", f"{RUN}/{RECORDS}"))
CURVE_OUT = Kind(bad("", RUN, f"{RUN}/{RUN_JSON}", f"{RUN}/{RECORDS}", f"{RUN}/{RUN_JSON}/curve.json"))
WORKLOAD_OUT = Kind(
    bad("", RUN, f"{RUN}/{RUN_JSON}", f"{RUN}/{RUN_JSON}/w.csv", "w.txt", "w", f"{RUN}/{RECORDS}"),
    WORD.map(lambda s: Bad(s + ".txt")),
)

# what each option's values are checked as, by parameter name; PER_COMMAND where a command's option differs
KINDS: dict[str, Kind] = {
    **dict.fromkeys(("rate", "burstiness", "rps_scale", "duration", "timeout", "first_token_timeout"), number()),
    **dict.fromkeys(("sla_token_ms", "sla_request_s", "start_rate", "max_rate", "tolerance"), number()),
    **dict.fromkeys(("prediction_noise", "scrape_interval", "telemetry_interval", "gpu_price"), number(zero_ok=True)),
    "min_success": number(zero_ok=True),
    **dict.fromkeys(("requests", "engines", "bins", "kv_tokens", "concurrency", "gpus", "tokens"), integer()),
    **dict.fromkeys(("input_tokens", "output_tokens", "max_probes", "repeats", "decode_tokens"), integer()),
    **dict.fromkeys(("seed", "port"), integer(zero_ok=True)),
    **dict.fromkeys(
        ("arrival", "scheduler", "bin_key", "bin_edges", "latency", "token_times", "step", "api", "backend"), CHOICE
    ),
    "itl_option": CHOICE,
    "lengths": INT_LIST,
    "warmup": WARMUP,
    "url": URL,
    "api_key_env": ENV_NAME,
    "extra_body": JSON_OBJECT,
    "host": HOST,
    "model": FREE_TEXT,
    "slo": GOODPUT_SLO,
    "deadlines": DEADLINES,
    "workload": WORKLOAD,
    "tokenizer": TOKENIZER,
    "trace": TRACE,
    "config": ENGINE_CONFIG,
    "emulator_config": EMULATOR_CONFIG,
    "grid_csv": GRID_CSV,
    "run_dirs": RUN_DIRS,
    "dirs": RUN_DIRS,
    **dict.fromkeys(("html", "markdown"), REPORT_OUT),
    "baseline": Kind(bad("", "zz-missing", f"{RUN}/{RUN_JSON}")),  # compare --baseline: one of the compared runs
    "out": RUN_OUT,
    **dict.fromkeys(("boundary", "prefix_caching", "search", "isolated_load"), CHOICE),
    **dict.fromkeys(("hardware", "guardrails", "clock_sync"), DESCRIPTION),
    "software": SOFTWARE,
    **dict.fromkeys(("ttft_slo", "tpot_slo", "start", "max_load", "saturation", "capacity", "ttft_p99"), number()),
    **dict.fromkeys(("short_share",), number()),
    "sharing": number(zero_ok=True),
    **dict.fromkeys(("max_context", "initial_concurrency", "max_concurrency", "completions_per_slot"), integer()),
    **dict.fromkeys(("isolated_requests", "prefix_tokens", "prefixes", "repeat"), integer()),
    **dict.fromkeys(("levels", "pp", "tg", "loads"), INT_LIST),
    "max_prompt": integer(),
    "workers": integer(),
    "cluster": Kind(bad("", "nohost", "http://h:8786", "tcp://h", "tcp://h:0", "h:99999", "tcp://:8786")),
    "engine": ENGINE_CONFIG,
    "set_": Kind(bad("x", "=1", "x=", "nosuch=1", "max_num_seqs=-1", "scheduler=zzz", "iteration_model.fixed=abc")),
    **dict.fromkeys(("url_disabled", "url_enabled", "url_baseline", "url_input_filter"), URL),
    **dict.fromkeys(("url_output_filter", "url_full"), URL),
    "from_": FINISHED_SUITE,
    "warmup_workload": WORKLOAD,
    "min_duration": number(),
    "throughput_concurrency": INT_LIST,
    **dict.fromkeys(("capacity_concurrency", "capacity_requests"), integer()),
}
MOONCAKE_ROW = '{"timestamp": %s, "input_length": 10, "output_length": 2, "hash_ids": %s}\n'
DATASET = Kind(
    (
        Bad("missing.jsonl"),
        file("d", None),  # a directory that is no saved dataset
        *files("d.jsonl", "", "\n", "not json\n", '{"text": "no prompt field"}\n', '["a list"]\n'),
        *files("d.json", "{", "[]", '[{"conversations": 5}]', '[{"conversations": [{"from": "human"}]}]'),
        file("d.txt", "plain text\n"),
        file("d.csv", "a,b\n1,2\n"),
        file("d.jsonl", MOONCAKE_ROW % ("5", "[1]") + MOONCAKE_ROW % ("3", "[1]")),  # time goes back
        file("d.jsonl", MOONCAKE_ROW % ("0", '[1, "a"]')),  # a hash_id that is no integer
        file("d.jsonl", MOONCAKE_ROW % ("0", "[true]")),
        file("d.jsonl", MOONCAKE_ROW % ("0", "[1, 2, 3]")),  # more blocks than its input length holds
        file("d.jsonl", '{"timestamp": 0, "input_length": -4, "output_length": 2}\n'),
    )
)
THINK_TIME = Kind(bad("", "exp", "exp:", "exp:-1s", "fixed:abc", "uniform:3s-1s", "uniform:1s", "gamma:2s", "exp:1-2"))
MODEL_MIX = Kind(bad("", "a", "a=", "a=0", "a=-1", "a=nan", "a=inf", "a=1,a=2", "=1", "a=x", "a=1,,b=1"))
HEADER = Kind(bad("", "nocolon", ": v", "a b: v", "X: two\nlines", "(x): v"))
REQUEST_ID_PREFIX = Kind(bad("", "a b", "x" * 65, "caf\u00e9", "tab\there"))
KINDS.update(
    {
        "dataset": DATASET,
        "dataset_format": CHOICE,
        "history": CHOICE,
        **dict.fromkeys(("max_input_tokens", "max_output_tokens", "dataset_sample", "block_tokens"), integer()),
        "think_time": THINK_TIME,
        "ramp_up": number(),
        "model_mix": MODEL_MIX,
        "header": HEADER,
        "request_id_prefix": REQUEST_ID_PREFIX,
    }
)
PEM_FILE = Kind((Bad("missing.pem"), file("d", None)))  # read as PEM only over https: what can be refused up front
KINDS.update(
    {
        "batch_inputs": integer(),
        **dict.fromkeys(("rerank_shape", "image_format", "metrics_dialect"), CHOICE),
        **dict.fromkeys(("ca_bundle", "client_cert", "client_key"), PEM_FILE),
        "images": integer(zero_ok=True),
        "image_size": Kind(bad("", "0x0", "0x512", "100000x100000", "512", "axb", "512x", "-1x5", "512x512x3")),
        "image_dir": Kind((Bad("missing-dir"), file("f.png", "not a folder"), file("empty", None))),
        "audio": number(zero_ok=True),
        "dcgm_url": URL,
    }
)
KINDS.update(
    {
        "export": Kind(
            bad("", "bogus", "otlp", "prometheus", "mlflow:", "otlp:", "otlp:ftp://h", "prometheus:no/dir/f")
        ),
        "sql": Kind(bad("", " ", "selec", "select * from nope")),
        "metric": Kind(bad("", "zz", "ttft", "ttft.p42")),
        "by": Kind(bad("", "zz", "ttft_p99_ms")),
        "group": CHOICE,
        "max_regression": Kind(bad("", "5", "abc%", "-1%", "nan%", "inf%", "2000%")),
        "format": CHOICE,
        "run_dir": RUN_DIRS,
    }
)
EXPORT_OUT = Kind(bad("", RUN, f"{RUN}/{RUN_JSON}", f"{RUN}/{RECORDS}", f"{RUN}/{RUN_JSON}/r.csv", "r.txt", "no/r.csv"))
SUITE_OUT = Kind(bad("", RUN, f"{RUN}/{RUN_JSON}", f"{RUN}/{RECORDS}"))  # a run, a file: not a suite's directory
SCENARIO = Kind(
    (
        *missing_or_malformed("scenario"),
        *files("s.yaml", "bogus: 1", "load: 5", "load: {rat: 1}", "load: {burstiness: -1}", "monitors: {gpus: .nan}"),
        *files("s.yaml", "load: {arrival: zipf}", "workload: {seed: -1}", "target: {url: 'ftp://x'}"),
        *files("s.yaml", "emulator: {speed: 0}", "target: {timeout: 1, first_token_timeout: 2}"),
        *files("s.yaml", "workload: {trace: missing.csv}", "workload: {workload: no-such-workload}"),
        file("old-run.json", '{"schema_version": "infermeter.run/1", "kind": "live"}'),
    )
)
PER_COMMAND: dict[tuple[str, str], Kind] = {
    ("run", "config"): SCENARIO,
    ("workload", "name"): WORKLOAD,
    ("workload", "out"): WORKLOAD_OUT,
    ("profile-prefill", "out"): CURVE_OUT,
    ("sim-sweep", "requests"): INT_LIST,
    ("sim-sweep", "gpus"): INT_LIST,
    ("sim-sweep", "bins"): INT_LIST,
    ("sim-sweep", "levels"): Kind(bad("", ",", "bogus", "HIGH", "1", "high;low", "high,high", "high,,zz")),
    ("capacity", "slo"): CAPACITY_SLO,
    ("serve", "config"): EMULATOR_CONFIG,
    ("compare", "reps"): integer(),
    ("export", "out"): EXPORT_OUT,
    **{(f"test {name}", "out"): SUITE_OUT for name in SUITES},
    ("test grid", "concurrency"): INT_LIST,
    ("test memory-pressure", "capacity"): integer(),
    ("test guardrail", "guardrails"): Kind(bad("", "none", "baseline=", "=none", "nosuch=x", "full")),
}

# ----- commands, and valid arguments around the one option under test


def _commands() -> dict[str, Any]:
    """Every command by its words on the command line: a group's ("test ttft") under the group's name."""
    top = typer.main.get_command(cli.app).commands  # type: ignore[attr-defined]
    flat = {}
    for name, command in top.items():
        subcommands = getattr(command, "commands", None)
        flat.update({f"{name} {s}": c for s, c in subcommands.items()} if subcommands else {name: command})
    return flat


COMMANDS = _commands()
ENGINE_FILE = "e.yaml"  # beside every case: predict --engine needs one
SHARED_SUITE_OPTIONS = {p.name for p in COMMANDS["test ttft"].params}  # the target's, monitors', disclosures'...
TARGET = {"url": "http://127.0.0.1:9", "model": "m"}  # a closed port: nothing that slips through reaches a server
BASELINE: dict[str, dict[str, str]] = {
    "report": {"run_dirs": RUN},
    "compare": {"dirs": RUN, "reps": "200"},  # one run reaches the grouping (MEASURING), every check passed
    "export": {"run_dir": RUN},
    **{f"runs {sub}": {"dirs": RUN} for sub in ("list", "trend", "check")},  # check: one group reaches series_of
    "workload": {"name": "synthetic-uniform", "requests": "3", "rate": "1", "arrival": "gamma", "out": f"{RUN}/w.csv"},
    "sim": {"requests": "3", "out": RUN},
    "sim-sweep": {"requests": "3", "gpus": "1", "bins": "1", "step": "1", "out": RUN},
    "calibrate": {**TARGET, "out": f"{RUN}/e.yaml"},  # a probe; a grid CSV instead of the URL fits T(b, L)
    "predict": {"engine": ENGINE_FILE, "requests": "3", "rate": "1", "out": RUN},
    "run": {**TARGET, "requests": "3", "warmup": "off", "rate": "1", "out": RUN},
    "prompt": {"tokenizer": "cl100k_base", "tokens": "5"},
    "profile-prefill": {**TARGET, "lengths": "8,16,32", "repeats": "1", "decode_tokens": "1", "out": f"{RUN}/c.json"},
    "capacity": {"slo": "ttft:p99<=500ms", **TARGET, "requests": "3", "warmup": "off", "out": RUN},
    "serve": {"port": "0"},
    **{f"test {name}": {**TARGET, "out": "suite"} for name in SUITES},
}
# what an option under test needs beside it (None: drop that one), so that a value slipping through is not refused
# for another reason that happens to name it
ALONGSIDE: dict[str, dict[str, str | None]] = {
    "concurrency": {"rate": None},
    "input_tokens": {"output_tokens": "8"},
    "output_tokens": {"input_tokens": "8"},
    "burstiness": {"arrival": "gamma"},
    "emulator_config": {"url": None, "model": None},
    "scheduler": {"url": None, "model": None},
    "config": {"url": None, "model": None},
    "grid_csv": {"url": None, "model": None},
    **{key: {"api": "chat"} for key in ("images", "image_dir", "audio")},
    **{key: {"api": "chat", "images": "1"} for key in ("image_size", "image_format")},
    "batch_inputs": {"api": "embeddings"},
    "rerank_shape": {"api": "rerank"},
}
# where commands start serving or measuring: a bad value that got this far was let through
MEASURING = (
    "infermeter.emulator.serving.serve",
    "infermeter.emulator.process.running_emulator",
    "infermeter.conduct.run.conduct",
    "infermeter.sim.simulate",
    "infermeter.sim.experiments.run_experiments",
    "infermeter.suites.capacity.search",
    "infermeter.suites.prefill.profile_prefill",
    "infermeter.suites.calibration.probe_server",
    "infermeter.load.target.list_models",  # asking the server what it serves: its first request
    "infermeter.suites.execute.execute",
    "infermeter.metrics.compared.group_runs",
    "infermeter.catalog.groups.series_of",  # runs check: one run is one group, refused only after every option
)


def params() -> list[tuple[str, Any]]:
    """(command, parameter) for every parameter that takes a value (flags have none to fuzz); the options every
    test shares are fuzzed on `test ttft` only, each test's own on it."""

    def own(command: str, name: str) -> bool:
        return not command.startswith("test ") or command == "test ttft" or name not in SHARED_SUITE_OPTIONS

    return [
        (c, p) for c, cmd in COMMANDS.items() for p in cmd.params if not getattr(p, "is_flag", False) and own(c, p.name)
    ]


def kind_of(command: str, param: Any) -> Kind | None:
    return PER_COMMAND.get((command, param.name)) or KINDS.get(param.name)


def names_of(param: Any) -> list[str]:
    """How a message may name the parameter: its long flags, or an argument's name quoted as click quotes it."""
    if param.param_type_name == "option":
        return [o for o in param.opts if o.startswith("--")]
    return [f"'{getattr(param, 'display_name_raw', param.name)}'"]


CASES = [(c, p.name) for c, p in params() if (k := kind_of(c, p)) is not None and k.listed]


def argv(command: str, values: dict[str, str | None], run: Path) -> list[str]:
    """The command line: options as --flag=value (a value may start with '-'), then '--' and the arguments."""
    by_name = {p.name: p for p in COMMANDS[command].params}
    options, arguments = [], []
    for name, value in values.items():
        if value is not None:
            value = value.replace(RUN, str(run))
            param = by_name[name]
            if param.param_type_name == "argument":
                arguments.append(value)
            else:
                options.append(f"{names_of(param)[0]}={value}")
    return [*command.split(), *options, "--", *arguments]


# ----- running a command


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str

    def describe(self, args: list[str]) -> str:
        return f"infermeter {' '.join(args)}\nexit {self.code}\nstderr: {self.err!r}\nstdout: {self.out[:500]!r}"


def invoke(args: list[str], cwd: Path, capfd: pytest.CaptureFixture[str]) -> Result:
    """main() in-process in `cwd`: its exit code and what it printed."""
    capfd.readouterr()
    code = 0
    with contextlib.chdir(cwd):
        try:
            cli.main(args)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    out, err = capfd.readouterr()
    return Result(code, out, err)


def assert_refused(result: Result, args: list[str], names: list[str]) -> None:
    """Exit 2, nothing on stdout, one line on stderr that names the option, no traceback."""
    about = result.describe(args)
    assert result.code == ExitCode.USAGE, about
    assert "Traceback" not in result.out + result.err, about
    lines = result.err.splitlines()
    assert len(lines) == 1 and lines[0].strip(), about
    assert any(n in lines[0] for n in names), f"the message names none of {names}\n{about}"
    assert result.out == "", about


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every file (its bytes) and directory (None) under root."""
    return {str(p.relative_to(root)): None if p.is_dir() else p.read_bytes() for p in sorted(root.rglob("*"))}


def make_run(path: Path) -> Path:
    """An existing run directory, as a finished run leaves it."""
    write_records(path, RunInfo(kind="test"), [RequestRecord(request_id=0, output_tokens=2, token_times=[1.0, 1.1])])
    return path


def fuzz(values: Kind | st.SearchStrategy[Any], listed: tuple[Any, ...], check: Callable[[Any], None], n: int) -> None:
    """`check` on every listed value, then on `n` drawn ones, reproducibly (the same draws on every machine)."""
    test = given(values)(check)
    for value in listed:
        test = example(value)(test)
    tuned = settings(max_examples=n, deadline=None, derandomize=True, database=None)
    settings(tuned, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])(test)()


class LetThrough(BaseException):
    """Raised where a command starts serving or measuring; not an Exception, so main() lets it out as it is."""


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Build the click group and its commands once (typer rebuilds them per call, 100 ms), stop whatever starts to
    measure, and give pytest back its SIGTERM handler (main() installs its own)."""

    def let_through(*args: Any, **kwargs: Any) -> Any:
        raise LetThrough("validation let an invalid value through: the command started serving or measuring")

    monkeypatch.setattr(typer.main, "get_command", functools.cache(typer.main.get_command))
    monkeypatch.setattr(typer.main, "get_group", functools.cache(typer.main.get_group))
    for target in MEASURING:
        monkeypatch.setattr(target, let_through)
    monkeypatch.delenv(UNSET_ENV, raising=False)
    sigterm = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, sigterm)


# ----- the tests


def test_every_option_is_classified() -> None:
    """A new option must say how its bad values are refused: add it to KINDS (or PER_COMMAND), its command to
    BASELINE."""
    missing = [f"{c} {names_of(p)[0]}" for c, p in params() if kind_of(c, p) is None]
    assert not missing, f"classify these options in tests/test_cli_bad_input.py KINDS: {missing}"
    assert set(BASELINE) == set(COMMANDS), "give every command its valid baseline arguments in BASELINE"


@pytest.mark.parametrize("command", list(BASELINE))
def test_baselines_are_valid(command: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """With --out at a new place, the arguments every case starts from finish or reach the measurement: in each case
    the option under test is the only thing wrong."""
    run = make_run(tmp_path / "existing-run")
    grid(*GRID_ROWS).make(tmp_path)
    (tmp_path / ENGINE_FILE).write_text("")  # an empty engine file: every setting at its default
    reads = command in ("report", "compare", "export") or command.startswith("runs ")  # an existing run, not a new one
    args = argv(command, BASELINE[command], run if reads else tmp_path / "new")
    try:
        result = invoke(args, tmp_path, capfd)
    except LetThrough:
        return
    assert result.code == ExitCode.OK, result.describe(args)


@pytest.mark.parametrize(("command", "name"), CASES, ids=[f"{c}:{n}" for c, n in CASES])
def test_invalid_value_is_refused(command: str, name: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """Any invalid value of any one option: exit 2, one line naming the option, the existing run untouched."""
    param = next(p for p in COMMANDS[command].params if p.name == name)
    kind = kind_of(command, param)
    assert kind is not None
    template = make_run(tmp_path / "existing-run")
    before = snapshot(template)
    names = {p.name for p in COMMANDS[command].params}
    beside = {k: v for k, v in ALONGSIDE.get(name, {}).items() if k in names}
    values: dict[str, str | None] = {**BASELINE[command], **beside}

    def check(value: Bad) -> None:
        cwd = Path(tempfile.mkdtemp(dir=tmp_path))
        run = Path(shutil.copytree(template, cwd.with_name(cwd.name + "-run")))
        (cwd / ENGINE_FILE).write_text("")
        value.make(cwd)
        args = argv(command, {**{k: v for k, v in values.items() if k != name}, name: value.value}, run)
        assert_refused(invoke(args, cwd, capfd), args, names_of(param))
        assert snapshot(run) == before, f"infermeter {' '.join(args)} changed {run}"

    listed = st.sampled_from(kind.listed)
    fuzz(listed if kind.drawn is None else st.one_of(listed, kind.drawn), kind.listed, check, n=20)


@pytest.mark.parametrize("command", ["run", "sim", "sim-sweep", "capacity"])
def test_valid_options_never_write_over_a_run(command: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """Valid options with --out at an existing run: refused with exit 2 before anything is measured (`_offline`
    fails any start of a measurement)."""
    run = make_run(tmp_path / "existing-run")
    before = snapshot(run)
    args = argv(command, BASELINE[command], run)
    assert_refused(invoke(args, tmp_path, capfd), args, ["--out"])
    assert snapshot(run) == before


def test_damaged_records_are_refused(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """records.parquet truncated anywhere is refused (exit 2, one line naming 'run_dirs'); with flipped bytes it is
    refused, or read when the damage escapes parquet's checks; never a traceback."""
    run = make_run(tmp_path / "run")
    good = (run / RECORDS).read_bytes()
    size = len(good)

    def check(damage: tuple[str, Any]) -> None:
        how, where = damage
        data = bytearray(good[:where] if how == "truncate" else good)
        for pos, xor in where if how == "flip" else ():
            data[pos] ^= xor
        damaged = Path(tempfile.mkdtemp(dir=tmp_path))
        (damaged / RUN_JSON).write_bytes((run / RUN_JSON).read_bytes())
        (damaged / RECORDS).write_bytes(bytes(data))
        for extra in ([], ["--json"]):
            args = ["report", str(damaged), *extra]
            result = invoke(args, tmp_path, capfd)
            if how == "truncate" or result.code != ExitCode.OK:
                assert_refused(result, args, ["'run_dirs'"])
            assert "Traceback" not in result.out + result.err, result.describe(args)

    truncations = st.integers(0, size - 1).map(lambda n: ("truncate", n))
    flips = st.lists(st.tuples(st.integers(0, size - 1), st.integers(1, 255)), min_size=1, max_size=4)
    listed = (
        *(("truncate", n) for n in (0, 1, 4, size // 2, size - 8, size - 5, size - 4, size - 1)),
        *(("flip", ((pos, 0xFF),)) for pos in (0, 3, size // 3, size // 2, size - 9, size - 8, size - 5, size - 1)),
    )
    fuzz(st.one_of(truncations, flips.map(lambda f: ("flip", tuple(f)))), listed, check, n=60)
