"""Every name a package re-exports lazily resolves to the object its module defines, and is kept once resolved."""

import importlib

import pytest

PACKAGES = [f"infermeter.{p}" for p in ("client", "emulator", "load", "metrics", "tokenizers", "workload")]


@pytest.mark.parametrize("name", PACKAGES)
def test_every_exported_name_resolves_and_is_kept(name):
    package = importlib.import_module(name)
    for export in package.__all__:
        value = getattr(package, export)
        assert getattr(package, export) is value and export in vars(package), export
        module = getattr(value, "__module__", None)
        if module is not None and module.startswith(name + "."):  # a class or function: its own module's object
            assert getattr(importlib.import_module(module), export) is value
    with pytest.raises(AttributeError, match=f"module '{name}' has no attribute 'nothing_here'"):
        package.nothing_here  # noqa: B018
