"""The checks behind every option: each turns a raw value (typed on a command line or read from a scenario file) into
its value, or raises ValueError with a message that says what is wrong.  The CLI shows the message as a usage error
naming the option; a scenario file's error names the key.  Checks are idempotent: a checked value passes again."""

from __future__ import annotations

import contextlib
import ipaddress
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import orjson

from infermeter.errors import UserError
from infermeter.secrets import redact_url
from infermeter.workload.limits import MAX_LENGTH

T = TypeVar("T")

MAX_REQUESTS = 10_000_000  # per run or simulation: more is a typo, and would not fit in memory
MAX_SECONDS = 7 * 86400.0
MAX_RATE = 1_000_000.0
MAX_SEED = 2**32 - 1


def _text(value: Any) -> str:
    """A bad value as the user typed it, quoted when it is empty or has spaces at its ends."""
    return value if isinstance(value, str) and value and value.strip() == value else repr(value)


def number(
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    what: str = "a number",
    hi_open: bool = False,
) -> Callable[[Any], float]:
    """A parser for a finite float in [lo, hi] (open at an end with lo_open / hi_open)."""

    def parse(value: Any) -> float:
        try:
            x = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"expected {what}, got {_text(value)}") from None
        bad_lo = lo is not None and (x <= lo if lo_open else x < lo)
        bad_hi = hi is not None and (x >= hi if hi_open else x > hi)
        if not math.isfinite(x) or bad_lo or bad_hi:
            low = "" if lo is None else f"{'above' if lo_open else 'at least'} {lo:g}"
            high = "" if hi is None else f"{'below' if hi_open else 'at most'} {hi:g}"
            raise ValueError(f"must be {what} {' and '.join(p for p in (low, high) if p)}, got {_text(value)}")
        return x

    return parse


def integer(lo: int, hi: int, what: str = "a whole number") -> Callable[[Any], int]:
    """A parser for an int in [lo, hi]; '1e3' and '2.0' are accepted when they are whole."""

    def parse(value: Any) -> int:
        try:
            x = float(value) if not isinstance(value, int) else value
            if isinstance(x, float) and (not math.isfinite(x) or not x.is_integer()):
                raise ValueError
            n = int(x)
        except (TypeError, ValueError, OverflowError):
            raise ValueError(f"expected {what}, got {_text(value)}") from None
        if not lo <= n <= hi:
            raise ValueError(f"must be {what} from {lo:,} to {hi:,}, got {_text(value)}")
        return n

    return parse


def choice(*names: str) -> Callable[[Any], str]:
    """A parser for one of a fixed set of names."""

    def parse(value: Any) -> str:
        if value not in names:
            raise ValueError(f"must be one of {', '.join(names)}, got {_text(value)}")
        return str(value)

    return parse


def choice_list(*names: str) -> Callable[[Any], str]:
    """A parser for comma-separated names, each one of a fixed set, none twice; returns them comma-joined."""

    def parse(value: Any) -> str:
        items = [x.strip() for x in str(value).split(",") if x.strip()]
        bad = [x for x in items if x not in names]
        if not items or bad:
            raise ValueError(f"expected comma-separated names from {', '.join(names)}, got {_text(value)}")
        if len(set(items)) < len(items):
            raise ValueError(f"names a value twice: {_text(value)}")
        return ",".join(items)

    return parse


def int_list(lo: int, hi: int) -> Callable[[Any], list[int]]:
    """A parser for comma-separated whole numbers, each in [lo, hi]; a list (a scenario file's, or a repeated
    option's: typer keeps one list per occurrence) is checked item by item and flattened."""
    one = integer(lo, hi)

    def parse(value: Any) -> list[int]:
        if isinstance(value, list | tuple):
            return [n for item in value for n in (parse(item) if isinstance(item, list | tuple) else [one(item)])]
        items = [x.strip() for x in str(value).split(",")]
        if not any(items):
            raise ValueError(f"expected comma-separated whole numbers from {lo:,} to {hi:,}, got {value!r}")
        return [one(x) for x in items if x]

    return parse


def flat(groups: list[Any]) -> list[int]:
    """The whole numbers of an `int_list` option, however many times it was given."""
    return [n for g in groups for n in (g if isinstance(g, list) else [g])]


def url(value: Any) -> str:
    """An http(s) base URL with a host (and a valid port when one is given)."""
    text = str(value).strip()
    try:
        parts = urlsplit(text)
        port_ok = parts.port is None or 0 < parts.port < 65536
    except ValueError:
        parts, port_ok = None, False
    if (
        parts is None
        or parts.scheme not in ("http", "https", "grpc")
        or not parts.hostname
        or not port_ok
        or " " in text
    ):
        raise ValueError(
            f"expected a base URL such as http://127.0.0.1:8000 (grpc://host:port for --backend grpc), "
            f"got {redact_url(text)!r}"
        )
    if parts.username is not None or parts.password is not None:
        raise ValueError(
            f"{redact_url(text)!r} carries credentials: put the key in $OPENAI_API_KEY (or --api-key-env) instead"
        )
    return text.rstrip("/")


def scheduler_address(value: Any) -> str:
    """A dask scheduler's address: tcp://host:port (tls:// and inproc:// too), or host:port for tcp."""
    text = str(value).strip()
    if "://" not in text:
        text = "tcp://" + text
    try:
        parts = urlsplit(text)
        port_ok = parts.port is not None and 0 < parts.port < 65536
    except ValueError:
        parts, port_ok = None, False
    if parts is None or parts.scheme not in ("tcp", "tls", "ws", "wss") or not parts.hostname or not port_ok:
        raise ValueError(f"expected a dask scheduler address such as tcp://10.0.0.5:8786, got {str(value)!r}")
    return text


def text(value: Any) -> str:
    """Free text that says something: not empty, not only spaces, one line."""
    if not isinstance(value, str) or not value.strip() or "\n" in value:
        raise ValueError(f"expected a short description on one line, got {value!r}")
    return value.strip()


def warmup(value: Any) -> int:
    """auto: the draft's rule (-1); off: none (0); N: exactly N warm-up requests."""
    if isinstance(value, int) and not isinstance(value, bool) and value in (-1, 0):
        return value  # already checked
    text = str(value).strip().lower()
    if text in ("auto", "off"):
        return -1 if text == "auto" else 0
    return integer(1, MAX_REQUESTS, "auto, off or a number of requests")(text)


def json_object(value: Any) -> dict[str, Any]:
    """A JSON object given on the command line."""
    if isinstance(value, dict):
        return value
    try:
        parsed = orjson.loads(str(value))
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc}): give an object such as '{{\"top_p\": 0.9}}'") from None
    if not isinstance(parsed, dict):
        raise ValueError("must be a JSON object such as '{\"top_p\": 0.9}'")
    return parsed


BODY_KEYS_SET_BY_INFERMETER = (
    "model",
    "prompt",
    "messages",
    "max_tokens",
    "max_completion_tokens",
    "n",
    "stream",
    "stream_options",
)


def extra_body(value: Any) -> dict[str, Any]:
    """A JSON object merged into request bodies; the fields that make the measurement are not its to change."""
    body = json_object(value)
    taken = [k for k in BODY_KEYS_SET_BY_INFERMETER if k in body]
    if taken:
        raise ValueError(
            f"sets {', '.join(taken)}, which infermeter controls (the model with --model, lengths with the "
            "workload, streaming always on): leave them out"
        )
    return body


_HOST_LABEL = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


def host(value: Any) -> str:
    """An address to listen on: an IP address or a host name, checked by its form (nothing is looked up)."""
    text = str(value)
    with contextlib.suppress(ValueError):
        ipaddress.ip_address(text)
        return text
    labels = text.removesuffix(".").split(".")
    if len(text) > 253 or not all(_HOST_LABEL.fullmatch(x) for x in labels) or labels[-1].isdigit():
        raise ValueError(f"expected an IP address or a host name such as 127.0.0.1, 0.0.0.0 or localhost, got {text!r}")
    return text


def out_path(value: Any) -> Path:
    """Where a command writes: a non-empty path whose existing ancestors are directories."""
    text = str(value)
    if not text.strip():
        raise ValueError("is empty: give the path to write to")
    path = Path(text)
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ValueError(f"{path} cannot be made: {parent} is a file, not a directory")
            break
    return path


def results_file(path: Path) -> str | None:
    """What writing `path` would destroy: a file of the run, or of the test suite, in its directory (the path as
    given or where its link leads); None when neither.  The one guard of every file a command writes where told."""
    from infermeter.records import RUN_FILES, holds_run
    from infermeter.suite_result import SUITE_FILES

    for candidate in dict.fromkeys((path, path.resolve())):
        folder = candidate.parent
        if candidate.name in RUN_FILES and holds_run(folder):
            return f"a file of the run in {folder}"
        if candidate.name in SUITE_FILES and any((folder / name).is_file() for name in SUITE_FILES):
            return f"a file of the test suite in {folder}"
    return None


def refuse_results_file(path: Path, shown: str | None = None) -> None:
    """A one-line UserError when writing `path` would write over a run's or a suite's file; `shown`: the option as
    given (`--out FILE`), else the path."""
    what = results_file(path)
    if what is not None:
        raise UserError(f"{shown or path} is {what}: choose another file")


def report_file(value: Any) -> Path:
    """Where a report file goes: a writable-looking path that is not a directory and not a file of a run or suite."""
    path = out_path(value)
    if path.is_dir():
        raise ValueError(f"{path} is a directory: give a file name, e.g. {path / 'report.html'}")
    try:
        refuse_results_file(path)
    except UserError as exc:
        raise ValueError(str(exc)) from None
    return path


def existing_path(value: Any) -> Path:
    """A file or a directory that exists (a Hugging Face dataset saved on disk is a directory)."""
    path = Path(str(value)).expanduser()
    if not path.exists():
        raise ValueError(f"{path}: no such file or directory")
    return path


def header(value: Any) -> Any:
    """--header 'Name: value' (one; a scenario file gives a list): a token name and a value, ${VAR} left as written."""
    if isinstance(value, list | tuple):
        return [header(v) for v in value]
    name, sep, text = str(value).partition(":")
    name, text = name.strip(), text.strip()
    if not sep or not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", name) or "\n" in text or "\r" in text:
        raise ValueError(f"expected 'Name: value', e.g. --header 'X-Tenant: team-a', got {value!r}")
    return f"{name}: {text}"


def request_id_prefix(value: Any) -> str:
    """A prefix for X-Request-Id: visible ASCII without spaces."""
    text = str(value)
    if not re.fullmatch(r"[!-~]{1,64}", text):
        raise ValueError(f"expected up to 64 visible ASCII characters without spaces, got {text!r}")
    return text


def think_time_text(text: str) -> Any:
    from infermeter.workload.think_time import ThinkTime

    return ThinkTime.parse(text)


def model_mix_text(text: str) -> Any:
    from infermeter.workload.model_mix import parse_model_mix

    return parse_model_mix(text)


MAX_IMAGE_SIDE = 8192  # larger than any vision encoder takes; one such image is 200 MB of pixels


def image_size(value: Any) -> str:
    """WxH in pixels, each side 1 to MAX_IMAGE_SIDE: '512x512'."""
    text = str(value).strip().lower()
    w, sep, h = text.partition("x")
    if not sep or not w.isdigit() or not h.isdigit():
        raise ValueError(f"{text!r} is not WxH: give the size in pixels, e.g. 512x512")
    if not (1 <= int(w) <= MAX_IMAGE_SIDE and 1 <= int(h) <= MAX_IMAGE_SIDE):
        raise ValueError(f"{text!r}: each side must be 1 to {MAX_IMAGE_SIDE} pixels")
    return f"{int(w)}x{int(h)}"


def image_dir(value: Any) -> Path:
    """A folder holding at least one image file --image-dir can send."""
    from infermeter.client.media import IMAGE_SUFFIXES

    path = Path(str(value)).expanduser()
    if not path.is_dir():
        raise ValueError(f"{path} is not a directory: give a folder of .png, .jpg or .jpeg files")
    try:
        found = any(p.suffix.lower() in IMAGE_SUFFIXES and p.is_file() for p in path.iterdir())
    except OSError as exc:
        raise ValueError(f"{path}: {exc.strerror or exc}") from None
    if not found:
        raise ValueError(f"{path} holds no .png, .jpg or .jpeg file: give a folder of images")
    return path


def existing_file(value: Any) -> Path:
    """A file that exists and can be read."""
    path = Path(str(value))
    if not path.exists():
        raise ValueError(f"{path} does not exist")
    if not path.is_file():
        raise ValueError(f"{path} is not a file")
    try:
        with path.open("rb") as fh:
            fh.read(1)
    except OSError as exc:
        raise ValueError(f"{path} cannot be read ({exc.strerror})") from None
    return path


def _checked(convert: Callable[[Any], T], check: Callable[[T], Any]) -> Callable[[Any], T]:
    """A parser: `convert` the raw value, then `check` it (its UserError becomes the check's ValueError)."""

    def parse(value: Any) -> T:
        converted = convert(value)
        try:
            check(converted)
        except UserError as exc:
            raise ValueError(str(exc)) from None
        return converted

    return parse


def config_file(load: Callable[[Path], Any]) -> Callable[[Any], Path]:
    """A parser for a config file that exists and whose content `load` accepts (read again where it is used)."""
    return _checked(existing_file, load)


def engine_config(path: Path) -> Any:
    from infermeter.engine.config import load_engine_config

    return load_engine_config(path)


def emulator_config(path: Path) -> Any:
    from infermeter.emulator.config import load_emulator_config

    return load_emulator_config(path)


def env_name(value: Any) -> str:
    """The name of an environment variable."""
    text = str(value)
    if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", text):
        raise ValueError(f"expected the name of an environment variable such as OPENAI_API_KEY, got {text!r}")
    return text


def spec(parse: Callable[[str], Any]) -> Callable[[Any], str]:
    """Validate a spec string with `parse` and keep the text."""
    return _checked(str, parse)


def slo_text(text: str) -> Any:
    from infermeter.metrics.goodput import parse_slo

    return parse_slo(text)


def deadlines_text(text: str) -> Any:
    from infermeter.metrics.fluidity import parse_deadlines

    return parse_deadlines(text)


def capacity_slo_text(text: str) -> Any:
    from infermeter.metrics.slo import parse_capacity_slo

    return parse_capacity_slo(text)


def tokenizer_text(text: str) -> str:
    from infermeter.tokenizers import TIKTOKEN_SHA256

    if text in TIKTOKEN_SHA256:
        return text
    from infermeter.tokenizers import resolve_tokenizer

    path = Path(text)
    if path.suffix.lower() not in (".json", ".gguf"):
        raise UserError(f"unknown tokenizer {text!r}: use cl100k_base, o200k_base, a tokenizer.json or a .gguf file")
    existing_file(path)
    resolve_tokenizer(text)  # a malformed file is refused now, not once the run has started
    return text


def workload_text(text: str) -> str:
    from infermeter.workload.spec import generate
    from infermeter.workload.standard import resolve

    generate(resolve(text), 1, 0)  # draws one request: reads any length CSV the workload names
    return text


SLO = spec(slo_text)
DEADLINES = spec(deadlines_text)
CAPACITY_SLO = spec(capacity_slo_text)
TOKENIZER = spec(tokenizer_text)
WORKLOAD = spec(workload_text)
THINK_TIME = spec(think_time_text)
MODEL_MIX = spec(model_mix_text)
ENGINE_CONFIG_FILE = config_file(engine_config)
EMULATOR_CONFIG_FILE = config_file(emulator_config)
RATE = number(0, MAX_RATE, lo_open=True, what="a rate in requests per second")
SECONDS = number(0, MAX_SECONDS, lo_open=True, what="a number of seconds")
INTERVAL = number(0, 3600, what="a number of seconds (0 turns it off)")
SEED = integer(0, MAX_SEED)
REQUESTS = integer(1, MAX_REQUESTS)
LENGTH = integer(1, MAX_LENGTH)  # a token length
