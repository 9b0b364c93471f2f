"""A package that re-exports lazily declares the same names to type checkers (under TYPE_CHECKING), each from the
module it loads at run time: else mypy sees those names as Any, or as a different object than the one used."""

import ast
import importlib
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "infermeter"
TYPED = ["client", "metrics", "workload"]  # the lazy packages whose names are declared for type checkers


def declared(package: str) -> dict[str, str]:
    """Name -> module of the imports under `if TYPE_CHECKING:` in the package's __init__.py."""
    tree = ast.parse((SRC / package / "__init__.py").read_text())
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom) and imp.module is not None, ast.dump(imp)
                for alias in imp.names:
                    assert alias.asname == alias.name, f"{alias.name}: re-exported as itself (`X as X`)"
                    found[alias.name] = imp.module
    return found


@pytest.mark.parametrize("package", TYPED)
def test_type_checkers_see_the_names_loaded_at_run_time(package):
    name = f"infermeter.{package}"
    lazy = {export: f"{name}.{module}" for export, module in importlib.import_module(name)._FROM.items()}
    assert declared(package) == lazy
