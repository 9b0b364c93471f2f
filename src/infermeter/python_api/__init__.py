"""The Python API: `benchmark`, `simulate` and `test` run what `infermeter run`, `sim` and `test NAME` run, sharing
their code with the commands, and `open_run` reads any run directory; `infermeter` re-exports them.

Its modules load on first use, so importing the package loads none of the machinery a run needs.
"""

from typing import TYPE_CHECKING

from infermeter.lazy import lazy_exports

if TYPE_CHECKING:  # what the names below are, for type checkers (at run time they load on first use)
    from infermeter.python_api.benchmarking import RunConfig as RunConfig
    from infermeter.python_api.benchmarking import benchmark as benchmark
    from infermeter.python_api.benchmarking import benchmark_async as benchmark_async
    from infermeter.python_api.run_handle import Run as Run
    from infermeter.python_api.run_handle import open_run as open_run
    from infermeter.python_api.simulation import simulate as simulate
    from infermeter.python_api.suite import test as test
    from infermeter.python_api.suite import test_async as test_async

_FROM = {
    "benchmark": "benchmarking",
    "benchmark_async": "benchmarking",
    "RunConfig": "benchmarking",
    "open_run": "run_handle",
    "Run": "run_handle",
    "simulate": "simulation",
    "test": "suite",
    "test_async": "suite",
}

__all__ = [*_FROM]

__getattr__ = lazy_exports(__name__, _FROM)
