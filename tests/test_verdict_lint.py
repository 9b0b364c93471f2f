"""A verdict is computed from evidence, never written down: no requirement, comparison finding or checklist item in the
package has a literal True or False where its `met` goes (a check that cannot fail is a defect).  `None` marks a
requirement whose evidence cannot exist ("not verifiable") and is allowed."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "infermeter"
# callable name -> the position of `met` among its positional arguments
MET_POSITION = {"requirement": 3, "Requirement": 3, "add": 3, "Finding": 2}


def literal_verdicts(source: str, where: str) -> list[str]:
    """Where `met` is given as a bool literal in `source`."""
    hits = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        given = [kw.value for kw in node.keywords if kw.arg == "met"]
        position = MET_POSITION.get(name)
        if position is not None and len(node.args) > position:
            given.append(node.args[position])
        if any(isinstance(v, ast.Constant) and isinstance(v.value, bool) for v in given):
            hits.append(f"{where}:{node.lineno}")
    return hits


def test_no_requirement_is_met_by_a_constant() -> None:
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 100, f"{PACKAGE} holds {len(files)} modules: the scan would find nothing"
    hits = [h for p in files for h in literal_verdicts(p.read_text(), str(p))]
    assert not hits, "requirements met by a constant (compute them from the runs):\n" + "\n".join(hits)


def test_the_lint_finds_each_way_of_writing_a_constant() -> None:
    """The check itself fails on what it exists to refuse, and passes computed verdicts and 'not verifiable'."""
    for bad in (
        'requirement("MUST", "5.1", "x", True, "why")',
        'Requirement(level="MUST", section="5", text="x", met=False, reason="")',
        'add("MUST", "4.1", "x", True, "why")',
        'Finding("6.4", "x", False, "why")',
        'suite.requirement("SHOULD", "5.2", "x", True, "")',
    ):
        assert literal_verdicts(bad, "t") == ["t:1"], bad
    for good in (
        'requirement("MUST", "5.1", "x", n >= 1000, "why")',
        'requirement("MUST", "5.1", "x", None, "the server exports no counter")',
        'Finding("6.4", "x", same, "why")',
        'at_least("MUST", "5.1", "x", 3, 10, "s")',
    ):
        assert literal_verdicts(good, "t") == [], good
