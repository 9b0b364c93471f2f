"""The command line's options: each check of `config.checks` as a typer parser (a bad value is a one-line usage
error naming the option, exit code 2, before anything is measured or written), the options several commands share
declared once from the configuration sections' fields, and `built_from`, which makes a command's options from
sections."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, get_args, get_origin

import typer

from infermeter.config import checks
from infermeter.config.section import Flag, Section
from infermeter.config.sections import Load, Objectives
from infermeter.config.sections import Workload as WorkloadSection
from infermeter.exports.spec import ExportSpec, parse_export
from infermeter.workload.limits import MAX_LENGTH

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

MAX_REQUESTS, MAX_SECONDS, MAX_RATE, MAX_SEED = (
    checks.MAX_REQUESTS,
    checks.MAX_SECONDS,
    checks.MAX_RATE,
    checks.MAX_SEED,
)
__all__ = ["MAX_LENGTH", "built_from"]


def parser(check: Callable[[Any], T]) -> Callable[[Any], T]:
    """A check as a typer parser: its ValueError becomes the usage error that names the option."""

    def parse(value: Any) -> T:
        try:
            return check(value)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None

    return parse


def number(
    lo: float | None = None, hi: float | None = None, lo_open: bool = False, what: str = "a number"
) -> Callable[[Any], float]:
    return parser(checks.number(lo, hi, lo_open, what))


def integer(lo: int, hi: int, what: str = "a whole number") -> Callable[[Any], int]:
    return parser(checks.integer(lo, hi, what))


def choice(*names: str) -> Callable[[Any], str]:
    return parser(checks.choice(*names))


def int_list(lo: int, hi: int) -> Callable[[Any], list[int]]:
    return parser(checks.int_list(lo, hi))


def choice_list(*names: str) -> Callable[[Any], str]:
    return parser(checks.choice_list(*names))


flat = checks.flat
url = parser(checks.url)
warmup = parser(checks.warmup)
extra_body = parser(checks.extra_body)
host = parser(checks.host)
out_path = parser(checks.out_path)
report_file = parser(checks.report_file)
existing_file = parser(checks.existing_file)
env_name = parser(checks.env_name)
RATE = parser(checks.RATE)
REQUESTS = integer(1, MAX_REQUESTS)
SLO = parser(checks.SLO)
DEADLINES = parser(checks.DEADLINES)
WORKLOAD = parser(checks.WORKLOAD)
TOKENIZER = parser(checks.TOKENIZER)
ENGINE_CONFIG_FILE = parser(checks.ENGINE_CONFIG_FILE)
EMULATOR_CONFIG_FILE = parser(checks.EMULATOR_CONFIG_FILE)


# ----- options made from configuration sections


@dataclass(frozen=True)
class Part:
    """The options a command takes from one section: all its fields or `only` these, with a command's own
    defaults (shown in help and applied when the option is not given) and help where it differs."""

    key: str
    section: type[Section]
    only: tuple[str, ...] | None = None
    defaults: dict[str, Any] = field(default_factory=dict)
    help: dict[str, str] = field(default_factory=dict)

    def names(self) -> list[str]:
        return [n for n in self.section.model_fields if self.only is None or n in self.only]


def _cli_type(annotation: Any, repeatable: bool = False) -> Any:
    """The type typer sees: optional (an option not given is None), str for a Literal (its check parses it), and
    a list field's item type unless its option is repeatable (the check parses the comma-separated list)."""
    args = [a for a in get_args(annotation) if a is not type(None)] if get_origin(annotation) is not None else []
    if repeatable and get_origin(annotation) is list:
        return annotation | None
    base = args[0] if len(args) == 1 and get_origin(annotation) is not Literal else annotation
    if get_origin(base) is Literal:
        base = str
    return base | None


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return {-1: "auto", 0: "off"}.get(value, str(value)) if isinstance(value, int) else str(value)


def section_option(part: Part, name: str) -> inspect.Parameter:
    """One field of a section as a typer option; None when not given, so a scenario file's value stands."""
    info = part.section.model_fields[name]
    flag = part.section.flag(name)
    help_text = part.help.get(name) or (flag.help if flag else "")
    required = info.is_required() and name not in part.defaults  # a field without a default: a required option
    default = None if required else part.defaults.get(name, info.get_default(call_default_factory=True))
    if default not in (None, {}, []):
        help_text += f" (default: {_shown(default)})"
    option = _option(flag, help_text, show_default=False)
    kind = _cli_type(info.annotation, flag is not None and flag.repeatable)
    return inspect.Parameter(
        name,
        inspect.Parameter.KEYWORD_ONLY,
        default=inspect.Parameter.empty if required else None,
        annotation=Annotated[kind, option],
    )


def _option(flag: Flag | None, help_text: str, show_default: bool = True) -> Any:
    """The typer option of a field's Flag: its names, and its check as the parser."""
    if flag is None:
        return typer.Option(help=help_text, show_default=show_default)
    parse = parser(flag.check) if flag.check is not None else None
    return typer.Option(*flag.names, help=help_text, parser=parse, show_default=show_default)


def with_signature(fn: F, signature: inspect.Signature) -> F:
    """`fn` with the parameters inspect (and so typer) reads from it: `__signature__`, set in the function's own
    attributes since a function's type declares no such attribute."""
    vars(fn)["__signature__"] = signature
    return fn


def built_from(*parts: Part) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a command the options of these sections.  The command is called with `given` (section -> field ->
    value, only what the command line gave, command defaults included) and its own parameters."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        own = list(inspect.signature(fn, eval_str=True).parameters.values())[1:]
        made = [(part, section_option(part, name)) for part in parts for name in part.names()]

        def command(**kwargs: Any) -> Any:
            given: dict[str, dict[str, Any]] = {}
            for part, param in made:
                value = kwargs.pop(param.name)
                if value is None:
                    value = part.defaults.get(param.name)
                if value is not None:
                    given.setdefault(part.key, {})[param.name] = value
            return fn(given, **kwargs)

        params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own] + [p for _, p in made]
        params.sort(key=lambda p: p.default is not inspect.Parameter.empty)  # required options first
        with_signature(command, inspect.Signature(params))
        command.__annotations__ = {p.name: p.annotation for p in params}
        command.__name__, command.__doc__ = fn.__name__, fn.__doc__
        return command

    return decorate


# ----- the shared options, one definition each: a section's field where one exists


def like(section: type[Section], name: str, kind: Any = None, help: str | None = None) -> Any:
    """A section's field as an option type for a command that sets its own default (`x: like(...) = default`)."""
    flag = section.flag(name)
    assert flag is not None, f"{section.__name__}.{name} declares no Flag"
    annotation = kind if kind is not None else section.model_fields[name].annotation
    return Annotated[annotation, _option(flag, help or flag.help)]


Trace = like(WorkloadSection, "trace")
RpsScale = like(WorkloadSection, "rps_scale")
Seed = like(WorkloadSection, "seed")
ARRIVAL_RATE = "arrival rate, requests/s; without it every request arrives at t=0"  # a workload's, or a simulation's
ArrivalRate = like(Load, "rate", help=ARRIVAL_RATE)
REQUESTS_TO_SEND = "requests to send"  # a simulation's --requests: nothing is measured
Arrival = like(Load, "arrival")
Burstiness = like(Load, "burstiness")
Slo = like(Objectives, "slo")
Deadlines = like(Objectives, "deadlines")
CapacitySlo = Annotated[
    list[str],
    typer.Option(
        help="repeatable: ttft:p99<=500ms | fluidity:tbt=25ms,ttft=300ms,target=0.9,share=0.99 | "
        "goodput:ttft=200ms,tpot=50ms,fraction=0.9",
        parser=parser(checks.CAPACITY_SLO),
    ),
]
EmulatorConfigFile = Annotated[
    Path | None, typer.Option(help="emulator config YAML/JSON (runs without --url)", parser=EMULATOR_CONFIG_FILE)
]
ScenarioFile = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="scenario YAML/JSON with the sections target, workload, load, objectives, monitors, emulator; or a "
        "run directory (its run.json) to run again; options given beside it override its keys",
    ),
]
Progress = Annotated[bool, typer.Option(help="show live progress")]
Html = Annotated[
    Path | None,
    typer.Option(
        "--html",
        help="also write the full report (IETF draft, Appendix C.2) as one offline HTML file with plots",
        parser=report_file,
    ),
]
Markdown = Annotated[
    Path | None,
    typer.Option("--markdown", help="also write the full report (Appendix C.2) as Markdown", parser=report_file),
]
Exports = Annotated[
    list[ExportSpec] | None,
    typer.Option(
        "--export",
        help="repeatable: at the end, also send the results to mlflow[:URI] (params, metrics, the HTML report), "
        "otlp:URL (OpenTelemetry metrics over OTLP/HTTP) or prometheus:FILE (a textfile-collector file)",
        parser=parser(lambda text: checked_export(text)),
        metavar="KIND[:WHERE]",
    ),
]


def checked_export(text: str) -> ExportSpec:
    """An --export value parsed and its exporter's own check passed (MLflow installed, the file's directory there),
    so a bad one is refused as the option's value before anything runs."""
    from infermeter.errors import UserError
    from infermeter.exports.send import check_exports

    spec = parse_export(text)
    try:
        check_exports([spec])
    except UserError as exc:
        raise ValueError(str(exc)) from None
    return spec


def __getattr__(name: str) -> Any:
    """--scheduler, the simulated engine's option: the registry (and the engine model) loads only for a command that
    takes it."""
    if name != "Scheduler":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from infermeter.config.engine import SimEngine

    globals()[name] = value = like(SimEngine, "scheduler", str | None)
    return value
