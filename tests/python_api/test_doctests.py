"""The examples in the Python API's docstrings run as written (doctest), so the documentation cannot drift from the
code: each module's examples are run, and a broken one fails here."""

import doctest
import importlib

import pytest

# every public module of the API whose docstrings carry examples, and how many examples each holds at least
MODULES = {
    "infermeter.python_api.run_handle": 2,
    "infermeter.python_api.simulation": 1,
    "infermeter.python_api.benchmarking": 2,
    "infermeter.python_api.suite": 1,
}


@pytest.mark.parametrize("name", MODULES)
def test_the_docstring_examples_run(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # an example that forgot its temporary directory writes here, not in the checkout
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder()
    tests = [t for t in finder.find(module) if t.examples]
    assert len(tests) >= MODULES[name], [t.name for t in tests]
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0 and result.attempted > 0


def test_a_broken_example_fails():
    """The runner above reports a wrong expected output as a failure (the check can fail)."""
    parser = doctest.DocTestParser()
    broken = parser.get_doctest(">>> 1 + 1\n3\n", {}, "broken", None, 0)
    runner = doctest.DocTestRunner()
    runner.run(broken, out=lambda _: None)
    assert runner.summarize(verbose=False).failed == 1
