"""Re-exports that load on first use: a package's `__getattr__` (PEP 562) imports the module holding a name only
when the name is asked for, so importing the package (or one of its modules) does not import them all."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, where: dict[str, str]) -> Callable[[str], Any]:
    """The `__getattr__` of `package`: `where` maps each re-exported name to its module in the package; a name is
    imported once, then kept on the package."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
