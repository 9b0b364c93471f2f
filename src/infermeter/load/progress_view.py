"""The live progress display's own process: draws with rich what the run writes to its stdin, one JSON object per
line (infermeter.load.progress): a line's figures (key, label, total, done, info), or text to print above them.

The run starts it in a session of its own, at the idle scheduling class and off the CPUs the run was confined to.
It ends when the run closes the pipe, or on SIGTERM, clearing its lines and showing the cursor again either way; a
failure of its own ends only the display, quietly: the run goes on.
"""

from __future__ import annotations

import signal
import sys
from typing import NoReturn


def _terminated(signum: int, frame: object) -> NoReturn:
    raise SystemExit(0)  # out through the display's `with`, which clears the lines


def main() -> None:
    """Draw until the pipe closes."""
    signal.signal(signal.SIGTERM, _terminated)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
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
    with Progress(*cols, console=Console(stderr=True), transient=True, auto_refresh=False) as bar:
        for raw in sys.stdin.buffer:
            try:
                got = orjson.loads(raw)
                if "print" in got:
                    bar.console.out(str(got["print"]), end="", highlight=False)
                    continue
                key, label, total, done, info = got["key"], got["label"], got["total"], got["done"], got["info"]
            except (orjson.JSONDecodeError, KeyError, TypeError):
                continue  # not a message of ours: the next update carries the whole line again
            if key not in lines:
                lines[key] = bar.add_task(label, total=total, info="")
            bar.update(lines[key], completed=done, info=info)
            if key == "":  # the run's own line comes last in each update
                bar.refresh()


if __name__ == "__main__":
    try:
        main()
    except Exception:  # the display is not worth a traceback on the run's terminal
        sys.exit(1)
