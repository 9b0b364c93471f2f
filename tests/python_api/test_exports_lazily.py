"""`infermeter` and `infermeter.python_api` export the Python API lazily: every name resolves to its module's object
and is kept, `import infermeter` loads none of the heavy packages, and pytest never takes `infermeter.test` for a
test."""

import importlib

import pytest

from tests.test_cli_lazy import HEAVY, loaded_after

PACKAGES = ["infermeter", "infermeter.python_api"]
PUBLIC = {
    "benchmark",
    "benchmark_async",
    "simulate",
    "test",
    "test_async",
    "open_run",
    "Run",
    "RunConfig",
    "Summary",
    "RunInfo",
    "SuiteResult",
    "UserError",
}


@pytest.mark.parametrize("name", PACKAGES)
def test_every_exported_name_resolves_and_is_kept(name):
    package = importlib.import_module(name)
    for export in package.__all__:
        value = getattr(package, export)
        assert getattr(package, export) is value and export in vars(package), export
        module = getattr(value, "__module__", None)
        if module is not None and module.startswith("infermeter."):  # a class or function: its own module's object
            assert getattr(importlib.import_module(module), export) is value
    with pytest.raises(AttributeError, match=f"module '{name}' has no attribute 'nothing_here'"):
        package.nothing_here  # noqa: B018


def test_the_top_package_exports_the_api_and_keeps_its_version():
    import infermeter

    assert set(infermeter.__all__) == PUBLIC
    assert infermeter.__version__ == "0.1.0"
    assert infermeter.Summary is importlib.import_module("infermeter.metrics.summary_model").Summary


def test_importing_infermeter_loads_no_heavy_package():
    assert loaded_after("import infermeter") & set(HEAVY) == set()
    assert loaded_after("import infermeter\ninfermeter.RunInfo") & set(HEAVY) == set()


def test_pytest_does_not_collect_the_suite_functions():
    import infermeter

    assert infermeter.test.__test__ is False and infermeter.test_async.__test__ is False


@pytest.mark.parametrize(("package", "folder"), [("infermeter", ""), ("infermeter.python_api", "python_api")])
def test_type_checkers_see_the_names_loaded_at_run_time(package, folder):
    """As tests/test_lazy_types.py holds the other lazy packages: each name declared under TYPE_CHECKING from the
    module it is loaded from at run time."""
    from tests.test_lazy_types import declared

    lazy = {export: f"{package}.{module}" for export, module in importlib.import_module(package)._FROM.items()}
    assert declared(folder) == lazy
