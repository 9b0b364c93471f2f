"""Running a coroutine to completion from synchronous code, on uvloop where it is installed (3-5x the SSE events/s of
the default loop): the commands, the suites and the Python API all run their runs through it."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """The coroutine's result, run on a new uvloop loop (asyncio's own where uvloop is missing)."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on POSIX
        import asyncio

        return asyncio.run(coro)
    return uvloop.run(coro)
