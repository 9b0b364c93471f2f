"""infermeter: benchmark LLM inference servers the way the IETF draft prescribes.

From Python: `benchmark` (a run, as `infermeter run`), `simulate` (`infermeter sim`), `test` (`infermeter test
NAME`), `open_run` (any run directory), and their async variants.  They load on first use: `import infermeter`
loads none of the machinery a run needs.
"""

from typing import TYPE_CHECKING

from infermeter.lazy import lazy_exports

if TYPE_CHECKING:  # what the names below are, for type checkers (at run time they load on first use)
    from infermeter.errors import UserError as UserError
    from infermeter.metrics import Summary as Summary
    from infermeter.python_api import Run as Run
    from infermeter.python_api import RunConfig as RunConfig
    from infermeter.python_api import benchmark as benchmark
    from infermeter.python_api import benchmark_async as benchmark_async
    from infermeter.python_api import open_run as open_run
    from infermeter.python_api import simulate as simulate
    from infermeter.python_api import test as test
    from infermeter.python_api import test_async as test_async
    from infermeter.run_info import RunInfo as RunInfo
    from infermeter.suite_result import SuiteResult as SuiteResult

__version__ = "0.1.0"

_FROM = {
    "benchmark": "python_api",
    "benchmark_async": "python_api",
    "simulate": "python_api",
    "test": "python_api",
    "test_async": "python_api",
    "open_run": "python_api",
    "Run": "python_api",
    "RunConfig": "python_api",
    "Summary": "metrics",
    "RunInfo": "run_info",
    "SuiteResult": "suite_result",
    "UserError": "errors",
}

__all__ = [*_FROM]

__getattr__ = lazy_exports(__name__, _FROM)
