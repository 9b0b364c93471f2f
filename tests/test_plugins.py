"""Another package extends infermeter through entry points: a backend it adds is a `--backend` choice, a suite it adds
is listed by `infermeter test --list` and runs; a broken entry is one warning line; and the registry reads entry
points only when a name infermeter does not have is asked for or the names are listed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest
from pydantic import BaseModel

from infermeter import plugins
from infermeter.client.backend import BACKENDS
from infermeter.engine.registry import SCHEDULERS
from infermeter.plugins import Entry, Registry
from infermeter.suites.registry import SUITES
from infermeter.workload.standard import STANDARD, WORKLOADS

SRC = Path(__file__).resolve().parent.parent / "src"
DIST = "infermeter-toyplug"
ENTRY_POINTS = {
    "infermeter.backends": {"toy": "toyplug.backend:ToyBackend"},
    "infermeter.suites": {"toy-suite": "toyplug.suite:SUITE", "broken": "toyplug.missing:SUITE"},
}

BACKEND = '''"""The toy plugin's backend."""

import asyncio

from infermeter.run_info import Client


class ToyBackend:
    """Answers every request in-process, a token every millisecond."""

    counting = "one token per event"

    def __init__(self, config, clock, max_connections=0):
        self.clock = clock

    async def send(self, req, scheduled_at, record=None):
        rec = record if record is not None else req.record(scheduled_at)
        rec.submitted_at = self.clock.now()
        times = [rec.submitted_at + 0.001 * (k + 1) for k in range(req.max_tokens)]
        await asyncio.sleep(max(0.0, times[-1] - self.clock.now()))
        rec.token_times, rec.chunk_times, rec.chunk_tokens = times, times, [1] * len(times)
        rec.output_tokens, rec.status = len(times), "ok"
        return rec

    def start(self, req, scheduled_at, record):
        return self.send(req, scheduled_at, record)

    def pace(self, poll):
        pass

    async def close(self):
        pass

    def declaration(self):
        return Client(backend="toy", transport="in-process")

    async def server_token_count(self, text):
        return None

    @property
    def token_count_source(self):
        return "none offered"
'''

SUITE = '''"""The toy plugin's suite: one small closed-loop run, and how many requests succeeded."""

from infermeter.emulator.config import EmulatorConfig
from infermeter.suites.framework import Analysis, SuiteParams


class ToyParams(SuiteParams):
    requests: int = 6


class ToySuite:
    name = "toy-suite"
    section = "toy"
    reference = "the toy plugin"
    title = "Toy suite"
    summary = "one small closed-loop run from a plugin package"
    params = ToyParams

    def emulator(self, params):
        return EmulatorConfig()

    def procedure(self, lab, params):
        load = {"requests": params.requests, "concurrency": 1, "warmup": "off"}
        workload = {"input_tokens": 8, "output_tokens": 4}
        return lab.run("toy", f"{params.requests} requests", lab.config(workload=workload, load=load))

    def analyze(self, run, params):
        return Analysis(figures={"ok": run.summary.requests.ok})

    def requirements(self, run, analysis, params, quick):
        return []


SUITE = ToySuite()
'''


@pytest.fixture(scope="module")
def toy_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv that imports infermeter (and its dependencies) from this one, with the toy package installed as
    an installer leaves it: the package beside its dist-info, whose entry_points.txt declares the entries."""
    root = tmp_path_factory.mktemp("plugin")
    venv.create(root / "venv", with_pip=False)
    python = root / "venv" / "bin" / "python"
    where = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(subprocess.run([python, "-c", where], capture_output=True, text=True, check=True).stdout.strip())
    (site / "infermeter-dev.pth").write_text(f"{sysconfig.get_paths()['purelib']}\n{SRC}\n")
    package = site / "toyplug"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "backend.py").write_text(BACKEND)
    (package / "suite.py").write_text(SUITE)
    info = site / "infermeter_toyplug-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {DIST}\nVersion: 0.1\n")
    sections = [f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in e.items()) for group, e in ENTRY_POINTS.items()]
    (info / "entry_points.txt").write_text("\n".join(sections))
    (info / "INSTALLER").write_text("tests/test_plugins.py\n")
    (info / "RECORD").write_text("")
    return python


def toy_infermeter(python: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "250"}
    return subprocess.run(
        [python, "-m", "infermeter", *map(str, args)], capture_output=True, text=True, env=env, timeout=120
    )


def test_a_plugin_backend_is_a_backend_choice(toy_python: Path) -> None:
    p = toy_infermeter(toy_python, "run", "--help")
    assert p.returncode == 0, p.stderr
    assert "transport: openai, grpc, toy" in p.stdout


def test_a_plugin_suite_is_listed_and_a_broken_entry_is_one_warning(toy_python: Path) -> None:
    p = toy_infermeter(toy_python, "test", "--list")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert [line.split()[0] for line in lines] == [*SUITES, "toy-suite"]
    assert lines[-1] == f"{'toy-suite':<16} {'toy':<5} one small closed-loop run from a plugin package"
    (warning,) = p.stderr.splitlines()
    assert warning.startswith("warning: ignoring entry point infermeter.suites: broken = toyplug.missing:SUITE")
    assert f"of package {DIST}" in warning and "ModuleNotFoundError" in warning


def test_a_plugin_suite_runs_through_a_plugin_backend(toy_python: Path, tmp_path: Path) -> None:
    out = tmp_path / "suite"
    target = ("--url", "http://127.0.0.1:9", "--backend", "toy", "--model", "toy")  # nothing listens: only toy answers
    p = toy_infermeter(toy_python, "test", "toy-suite", *target, "--quick", "--out", out)
    assert p.returncode == 0, p.stderr
    result = json.loads((out / "suite.json").read_text())
    assert result["suite"] == "toy-suite" and result["analysis"]["figures"] == {"ok": 6}
    (run_json,) = out.glob("runs/*/run.json")
    assert json.loads(run_json.read_text())["client"]["backend"] == "toy"


def groups_read(code: str) -> list[str]:
    """The groups of infermeter's entry points a fresh interpreter reads while running `code`."""
    probe = (
        "import importlib.metadata as m, json, sys\n"
        "read, real = [], m.entry_points\n"
        "m.entry_points = lambda **kw: read.append(kw.get('group')) or real(**kw)\n"
        f"{code}\n"
        "print(json.dumps(read), file=sys.stderr)"
    )
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return [group for group in json.loads(p.stderr.splitlines()[-1]) if str(group).startswith("infermeter.")]


def test_entry_points_are_read_only_for_a_name_infermeter_lacks_or_a_listing() -> None:
    help_ = "from infermeter.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass"
    assert groups_read(help_) == []
    workloads = "from infermeter.workload.standard import WORKLOADS, resolve\nresolve('conversation')"
    assert groups_read(workloads) == []
    assert groups_read(f"{workloads}\nlist(WORKLOADS)") == ["infermeter.workloads"]


class Gadget:
    """A gadget from another package."""


def gadgets(monkeypatch: pytest.MonkeyPatch, *installed: Entry[object]) -> tuple[Registry[object], list[str]]:
    """A registry of one own gadget, with `installed` as what other packages declare, and the groups read."""
    read: list[str] = []

    def entry_points(group: str) -> list[Entry[object]]:
        read.append(group)
        return list(installed)

    monkeypatch.setattr(plugins, "entry_points", entry_points)
    registry: Registry[object] = Registry(
        "gadget",
        [Entry("own", f"{__name__}:Gadget", "infermeter's own gadget")],
        check=lambda name, obj: None if obj is Gadget else "it is not a gadget",
    )
    return registry, read


def test_own_names_resolve_without_reading_entry_points(monkeypatch: pytest.MonkeyPatch) -> None:
    registry, read = gadgets(monkeypatch, Entry("other", f"{__name__}:Gadget", None, "other-pkg"))
    assert registry.load("own") is Gadget and "own" in registry and read == []
    assert list(registry) == ["own", "other"] and read == ["infermeter.gadgets"]
    assert registry["other"].package == "other-pkg"
    assert registry.describe("own") == "infermeter's own gadget"
    assert registry.describe("other") == "A gadget from another package."  # its docstring, once imported
    assert list(registry) == ["own", "other"] and read == ["infermeter.gadgets"]  # read once per process


def test_broken_or_clashing_entries_are_one_warning_each(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    registry, _ = gadgets(
        monkeypatch,
        Entry("own", f"{__name__}:Gadget", None, "clash-pkg"),
        Entry("missing", "no_such_module_here:Gadget", None, "broken-pkg"),
        Entry("wrong", f"{__name__}:gadgets", None, "wrong-pkg"),
        Entry("raises", f"{__name__}:NOTHING", None, "raising-pkg"),
    )
    assert list(registry) == ["own", "missing", "wrong", "raises"]
    assert registry["own"].package == "infermeter"
    assert [registry.load(n) for n in ("missing", "wrong", "raises")] == [None, None, None]
    assert list(registry) == ["own"] and registry.load("missing") is None
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        f"warning: ignoring entry point infermeter.gadgets: own = {__name__}:Gadget of package clash-pkg: the gadget "
        "'own' is infermeter's",
        "warning: ignoring entry point infermeter.gadgets: missing = no_such_module_here:Gadget of package broken-pkg: "
        "it failed to import (ModuleNotFoundError: No module named 'no_such_module_here')",
        f"warning: ignoring entry point infermeter.gadgets: wrong = {__name__}:gadgets of package wrong-pkg: it is not "
        "a gadget",
        f"warning: ignoring entry point infermeter.gadgets: raises = {__name__}:NOTHING of package raising-pkg: it "
        f"failed to import (AttributeError: module '{__name__}' has no attribute 'NOTHING')",
    ]


@pytest.mark.parametrize("registry", [BACKENDS, SUITES, WORKLOADS, SCHEDULERS], ids=lambda r: r.kind)
def test_every_own_entry_is_described_and_loads_what_it_names(registry: Registry[object]) -> None:
    own = [name for name in registry if registry[name].package == "infermeter"]
    assert own
    for name in own:
        entry = registry[name]
        assert entry.description and "\n" not in entry.description, name
        obj = registry.load(name)
        if registry is BACKENDS:  # a class the transport is built from; it names itself nowhere
            assert isinstance(obj, type), name
        else:
            assert declared_name(obj) == name, name


def declared_name(obj: object) -> str:
    """The name an object gives itself: a suite's or workload's `name`, a scheduler config's default `name`."""
    if isinstance(obj, type) and issubclass(obj, BaseModel):
        return str(obj.model_fields["name"].default)
    return str(obj.name)


def test_the_standard_workloads_are_the_registered_ones() -> None:
    assert {name: WORKLOADS.load(name) for name in STANDARD} == STANDARD
    assert [name for name in WORKLOADS if WORKLOADS[name].package == "infermeter"] == list(STANDARD)
