"""src/ type-checks with mypy under pyproject.toml's [tool.mypy], and the few `# type: ignore` left each say why.

An ignore is allowed only after code on its line, narrowed to error codes and followed by its reason, e.g.
`x = f()  # type: ignore[attr-defined]  # pyarrow's stubs lack f`; at most MAX_IGNORES of them in all.
"""

import io
import re
import subprocess
import sys
import tokenize
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "infermeter"
MAX_IGNORES = 10
IGNORE = re.compile(r"#\s*type:\s*ignore\b")
REASONED = re.compile(r"#\s*type:\s*ignore\[[a-z-]+(?:,\s*[a-z-]+)*\]\s+#\s*\S")


def ignores(source: str) -> list[tuple[int, str, bool]]:
    """Each `# type: ignore` comment of a module: (line, the line's text, whether it stands after code with its
    error codes and a reason)."""
    lines = source.splitlines()
    found = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT and IGNORE.search(tok.string):
            line = lines[tok.start[0] - 1]
            after_code = bool(line[: tok.start[1]].strip())
            found.append((tok.start[0], line.strip(), after_code and bool(REASONED.match(tok.string))))
    return found


def test_mypy_passes():
    p = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "pyproject.toml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert p.returncode == 0, p.stdout + p.stderr


def test_mypy_config_hides_nothing():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert config["warn_unused_ignores"] is True
    assert config["files"] == ["src/infermeter"]
    for section in [config, *config.get("overrides", [])]:
        assert not section.get("ignore_errors"), section
        assert "disable_error_code" not in section, section


def test_type_ignores_few_and_reasoned():
    found = [
        (path.relative_to(ROOT), line, text, ok)
        for path in sorted([*SRC.rglob("*.py"), *SRC.rglob("*.pyi")])
        for line, text, ok in ignores(path.read_text())
    ]
    unreasoned = [f"{path}:{line}: {text}" for path, line, text, ok in found if not ok]
    assert not unreasoned, "a type: ignore needs code before it, its error codes and its reason:\n" + "\n".join(
        unreasoned
    )
    assert len(found) <= MAX_IGNORES, f"{len(found)} type: ignore in src/ (at most {MAX_IGNORES})"


def test_the_ignore_rule_tells_reasoned_from_bare():
    source = (
        "import a  # type: ignore[import-untyped]  # a ships no types\n"
        "b = 1  # type: ignore\n"
        "c = 2  # type: ignore[assignment]\n"
        "# type: ignore[misc]  # on a line of its own\n"
        's = "# type: ignore"\n'
    )
    assert [(line, ok) for line, _, ok in ignores(source)] == [(1, True), (2, False), (3, False), (4, False)]
