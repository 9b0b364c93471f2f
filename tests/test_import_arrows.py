"""The import graph follows the flow (DESIGN.md): no cycles, and no arrow pointing back up it.

Every import counts, including those inside functions and under TYPE_CHECKING: a cycle hidden in a function is
still a cycle a reader has to hold in mind.
"""

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "infermeter"

# (importer, imported, why): package prefixes
FORBIDDEN = [
    ("infermeter.metrics", "infermeter.client", "metrics are pure over records"),
    ("infermeter.metrics", "infermeter.load", "metrics are pure over records"),
    ("infermeter.metrics", "infermeter.emulator", "metrics are pure over records"),
    ("infermeter.engine", "infermeter.sim", "the engine knows no clock"),
    ("infermeter.engine", "infermeter.emulator", "the engine knows no clock or HTTP"),
    ("infermeter.engine", "infermeter.client", "the engine knows no HTTP"),
    ("infermeter.engine", "infermeter.load", "the engine knows no load generator"),
    ("infermeter.engine", "infermeter.workload", "the engine sees requests, not workloads"),
    ("infermeter.engine", "aiohttp", "the engine knows no HTTP"),
    ("infermeter.emulator", "infermeter.workload", "a server does not know the workload it will be sent"),
    ("infermeter.workload", "infermeter.load", "workloads are data"),
    ("infermeter.client", "infermeter.load", "a backend sends one request"),
    ("infermeter.load", "infermeter.distributed", "the conductor above both picks the sender"),
    ("infermeter.report", "infermeter.suites", "reports render contracts from the contract floor"),
    ("infermeter.config", "infermeter.suites", "configuration knows no procedures"),
]
# the contracts' leaves: modules every writer and reader imports, so they import (almost) nothing of the package
RUN_INFO_PARTS = ("infermeter.run_block", "infermeter.workload_declaration")  # run.json's types beside run_info
RECORD_PARTS = tuple(f"infermeter.records.{part}" for part in ("schema", "reader", "writer", "clock"))
LEAVES = {
    **{  # the records package: its parts import one another and nothing else of the package but these
        part: {"infermeter", "infermeter.errors", "infermeter.secrets", "infermeter.run_info", *RUN_INFO_PARTS}
        | set(RECORD_PARTS)
        for part in ("infermeter.records", *RECORD_PARTS)
    },
    # the version, errors, and its parts: the block base and the workload block
    "infermeter.run_info": {"infermeter", "infermeter.errors", *RUN_INFO_PARTS},
    "infermeter.workload_declaration": {"infermeter.run_block"},
    "infermeter.run_block": set(),
    "infermeter.suite_result": {"infermeter.chart"},  # suite.json keeps its charts as data
    "infermeter.chart": set(),
}


def module_names() -> dict[str, Path]:
    out = {}
    for path in SRC.rglob("*.py"):
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def graph() -> dict[str, set[str]]:
    mods = module_names()
    edges: dict[str, set[str]] = {}
    for mod, path in mods.items():
        pkg = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)]
                    base = ".".join(up + ([base] if base else []))
                names = [base] + [f"{base}.{a.name}" for a in node.names]
            for name in names:
                if name in mods:
                    found.add(name)
                elif not name.startswith("infermeter"):
                    found.add(name.split(".")[0])
        found.discard(mod)
        edges[mod] = found
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in edges:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    # a package's __init__ re-exporting its own modules (and they importing a sibling through it) is not a cycle
    edges = {m: {d for d in ds if m != d.rsplit(".", 1)[0] and d != m.rsplit(".", 1)[0]} for m, ds in graph().items()}
    assert cycles(edges) == []


def arrows_against_the_flow(edges: dict[str, set[str]]) -> list[str]:
    """Every import that FORBIDDEN or LEAVES rules out, as "<module> imports <name>: <why>"."""
    found = []
    for mod, imported in edges.items():
        for name in imported:
            for src, dst, why in FORBIDDEN:
                if (mod == src or mod.startswith(src + ".")) and (name == dst or name.startswith(dst + ".")):
                    found.append(f"{mod} imports {name}: {why}")
            if mod in LEAVES and name.startswith("infermeter") and name not in LEAVES[mod]:
                found.append(f"{mod} imports {name}: the run directory's contracts depend on nothing of the package")
    return found


def test_no_arrow_against_the_flow():
    assert arrows_against_the_flow(graph()) == []


def test_the_graph_holds_the_imports_it_must_see():
    """Top-level, TYPE_CHECKING and third-party imports are all edges (else the checks above would see nothing)."""
    edges = graph()
    assert "infermeter.records" in edges["infermeter.metrics.columns"]  # absolute, at the top
    assert "infermeter.client.request" in edges["infermeter.client.backend"]  # under TYPE_CHECKING
    assert "aiohttp" in edges["infermeter.client.openai_sse"]  # a third-party package, by its top name
    assert sum(len(v) for v in edges.values()) > 500


def test_the_check_sees_a_cycle_and_an_arrow():
    """The checks can fail: a made-up graph with both faults is caught."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    made_up = {
        "infermeter.metrics.latency": {"infermeter.client.openai_sse", "numpy"},
        "infermeter.records": {"infermeter.errors", "infermeter.load.driver"},
    }
    assert arrows_against_the_flow(made_up) == [
        "infermeter.metrics.latency imports infermeter.client.openai_sse: metrics are pure over records",
        "infermeter.records imports infermeter.load.driver: the run directory's contracts depend on nothing of the "
        "package",
    ]
