"""The live progress display's own process: draws with rich what the run writes to its stdin, one JSON object per
line (a line's key, label, total, done and info; infermeter.load.progress), until the pipe closes.

It runs at the idle scheduling class (nice 19 where there is none), so it only ever takes a CPU the run leaves idle,
and off the CPUs the run was confined to, if it was; it ignores Ctrl-C, which is the run's to handle, and ends when
the run closes the pipe, clearing its lines.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys


def lower_priority() -> None:
    """The idle scheduling class for this process and the threads it starts (rich's refresh thread); and, when the
    run was confined to some of the machine's CPUs (taskset), the others, which the run left free."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        with contextlib.suppress(AttributeError, OSError):
            os.nice(19)
    with contextlib.suppress(AttributeError, OSError):
        others = set(range(os.cpu_count() or 1)) - os.sched_getaffinity(0)
        if others:
            os.sched_setaffinity(0, others)


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    lower_priority()
    import orjson
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

    cols = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[info]}"),
        TimeElapsedColumn(),
    )
    lines: dict[str, TaskID] = {}
    with Progress(*cols, console=Console(stderr=True), transient=True, refresh_per_second=4) as bar:
        for raw in sys.stdin.buffer:
            try:
                got = orjson.loads(raw)
                key, label, total, done, info = got["key"], got["label"], got["total"], got["done"], got["info"]
            except (orjson.JSONDecodeError, KeyError, TypeError):
                continue  # not a line of ours: the next update carries the whole line again
            if key not in lines:
                lines[key] = bar.add_task(label, total=total, info="")
            bar.update(lines[key], completed=done, info=info)


if __name__ == "__main__":
    main()
