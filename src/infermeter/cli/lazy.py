"""The `infermeter` command group, lazily: a command's module is imported when that command runs or shows its own
help, so `infermeter --help` and each command start without loading what the others need.

`infermeter --help` lists the commands from COMMANDS, a table of each command's module and the line the listing shows
of it; tests/test_cli_lazy.py holds the table to the commands the modules declare.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

import typer.main
from typer.core import TyperCommand, TyperGroup


@dataclass(frozen=True)
class Listed:
    """Where a command (or group) is declared: `infermeter.cli.<module>`, and the first paragraph of its help on one
    line, which `infermeter --help` shows."""

    module: str
    help: str


# every command, in the order `infermeter --help` lists them
COMMANDS: dict[str, Listed] = {
    "calibrate": Listed(
        "calibrate",
        "Fit the engine model to a live server (black box, over its normal API) and write engine.yaml; or fit the "
        "batch latency model T(b, L) to a latency grid CSV.",
    ),
    "compare": Listed(
        "compare",
        "Compare systems as the IETF draft's section 6 asks: equivalence, repeated runs with 95% CIs, and a test with "
        "a multiple-comparison correction for every difference; suites of one test level by level and on their "
        "figures.",
    ),
    "sim": Listed("sim", "Simulate one engine configuration on a virtual clock and write a run directory."),
    "sim-sweep": Listed(
        "sim",
        "Multi-bin dynamic batching's experiments at its load levels: the grid (requests x GPUs x bins K), the "
        "comparison of batching methods (resumable CSVs), and its hypotheses H1-H3 with their verdicts; every "
        "simulation a dask task with --workers / --cluster (the same CSVs, byte for byte).",
    ),
    "predict": Listed(
        "predict",
        "The simulator's answer for an engine configuration under a load, in the tables of a live run; with "
        "--workers / --cluster the simulation runs as a dask task.",
    ),
    "report": Listed(
        "report",
        "Recompute and print the summary of any run directory (live, emulated or simulated), or print a test suite's "
        "report again; --html / --markdown also write the full report with its plots.",
    ),
    "export": Listed(
        "export",
        "Write a run's requests, one row per request with every per-request metric, as CSV, JSONL (with each "
        "token's time) or Parquet.",
    ),
    "runs": Listed(
        "runs",
        "A catalog of run and suite directories in DuckDB: query it with SQL, draw a metric's trend over time, or "
        "check the newest runs for a significant regression (for CI).",
    ),
    "run": Listed(
        "run",
        "Benchmark a server, or the embedded emulator when no --url is given; ends with the minimum report. Options "
        "may come from a scenario file (--config), and RUN_DIR/run.json runs a run again.",
    ),
    "capacity": Listed(
        "run",
        "Search the highest request rate that meets every SLO; each probe is a full run, kept for resuming. With "
        "--trace (or a --dataset with timestamps) each probe replays the file's lengths and arrival pattern, scaled "
        "to the probe's rate; a --dataset without them sends its requests at each probe's rate.",
    ),
    "profile-prefill": Listed(
        "run",
        "Fit TTFT against prompt length from isolated requests; use it as --deadlines ttft=@FILE,slack=...",
    ),
    "serve": Listed("serve", "Run the emulator standalone: an OpenAI-compatible server over the engine model."),
    "workload": Listed(
        "workload", "Write a workload's requests (lengths, classes, prefixes, arrival offsets) to inspect them."
    ),
    "prompt": Listed(
        "workload", "Build one prompt of exactly N tokens (after the chat template with --chat) and print it."
    ),
    "test": Listed(
        "test",
        "Run a test of the IETF draft's section 5 as a suite of runs, with its tables and compliance verdict: "
        "infermeter test NAME [--url URL] [--quick] [--out DIR] [options of the test]; --list names them.",
    ),
}


def modules() -> list[str]:
    """The modules that declare commands, each once, in the listing's order."""
    return list(dict.fromkeys(listed.module for listed in COMMANDS.values()))


class Unlisted(TyperCommand):
    """Stands in for a command whose module is not imported yet: enough to list it."""

    module: str = ""


class LazyGroup(TyperGroup):
    """The top-level group: commands whose module is not imported yet stand listed by `Unlisted` placeholders,
    replaced by the real command (its module imported) the moment one is looked up for running or its own help.
    The listing always shows COMMANDS' lines.  `typer_app` is the app the modules register their commands with
    (cli.app sets it)."""

    typer_app: typer.Typer | None = None

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.listing = False
        self.placeholders: dict[str, Unlisted] = {}
        for name, listed in COMMANDS.items():
            self.placeholders[name] = Unlisted(name=name, help=listed.help)
            self.placeholders[name].module = listed.module
        built = dict(self.commands)
        self.commands = {name: built.pop(name, self.placeholders[name]) for name in COMMANDS}
        self.commands.update(built)  # registered some other way: listed last

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if self.listing and cmd_name in self.placeholders:
            return self.placeholders[cmd_name]
        command = self.commands.get(cmd_name)
        if isinstance(command, Unlisted):
            assert self.typer_app is not None
            importlib.import_module(f"infermeter.cli.{command.module}")
            command = self.commands[cmd_name] = typer.main.get_group(self.typer_app).commands[cmd_name]
        return command

    def format_help(self, ctx: Any, formatter: Any) -> None:
        """The help lists the commands without importing them (ctx and formatter are typer's click objects)."""
        self.listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self.listing = False
